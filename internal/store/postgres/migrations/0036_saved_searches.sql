-- Saved searches (bookmarks) of the events list: a name people pick and
-- the list's query parameters (source, type, status, q: an id, body:… or
-- filter:…), URL-encoded. Few rows, read whole, by name.
CREATE TABLE saved_searches (
    id         text COLLATE "C" PRIMARY KEY,
    name       text NOT NULL UNIQUE,
    query      text NOT NULL,
    created_at timestamptz NOT NULL,
    created_by text NOT NULL DEFAULT ''
);
