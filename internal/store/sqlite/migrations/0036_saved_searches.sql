-- Saved searches (bookmarks) of the events list: a name people pick and
-- the list's query parameters (source, type, status, q: an id, body:… or
-- filter:…), URL-encoded. Few rows, read whole, by name.
CREATE TABLE saved_searches (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    query      TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    created_by TEXT NOT NULL DEFAULT ''
);
