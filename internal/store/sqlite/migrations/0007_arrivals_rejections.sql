-- What arrived, and what was refused (docs/design.md, "What arrived, and
-- what was refused"). Nothing here is on the ledger's leaf.
--
-- How each event was authenticated, and the address it came from. NULL on
-- events recorded before: not recorded.
ALTER TABLE events ADD COLUMN remote_addr TEXT;
ALTER TABLE events ADD COLUMN verify_method TEXT;   -- signature | token | none | fetched
ALTER TABLE events ADD COLUMN verify_scheme TEXT;   -- "stripe v1", "gitlab token", …
ALTER TABLE events ADD COLUMN verify_secret INTEGER; -- index in the source's secrets; NULL: none

-- The first store.MaxArrivals (20) duplicates of each event, as they
-- arrived; later ones only raise events.duplicates. seq is the value of
-- events.duplicates the duplicate raised it to.
CREATE TABLE arrivals (
	event_id    TEXT NOT NULL REFERENCES events (id),
	seq         INTEGER NOT NULL,
	received_at INTEGER NOT NULL,            -- Unix microseconds
	remote_addr TEXT NOT NULL,
	headers     BLOB NOT NULL,               -- store.ArrivalHeader: wire form, at most 16 KiB
	headers_cut INTEGER NOT NULL DEFAULT 0,  -- the headers were cut to fit
	PRIMARY KEY (event_id, seq)
) WITHOUT ROWID;

-- Requests ingest refused with a 4xx: sizes, a hash and the answer, never
-- a body or a secret. Bounded by the writer (internal/rejectlog): the
-- latest rows of configured sources and, apart, of unknown names.
CREATE TABLE rejections (
	id           INTEGER PRIMARY KEY AUTOINCREMENT,
	at           INTEGER NOT NULL,     -- Unix microseconds
	source       TEXT NOT NULL,        -- as requested, cut and cleaned
	known        INTEGER NOT NULL,     -- a configured source
	reason       TEXT NOT NULL,        -- the ingest outcome
	status       INTEGER NOT NULL,
	message      TEXT NOT NULL,
	remote_addr  TEXT NOT NULL,
	user_agent   TEXT NOT NULL,
	body_size    INTEGER NOT NULL,     -- -1: not read and not announced
	body_sha256  TEXT,                 -- NULL: the body was not read in full
	header_count INTEGER NOT NULL,
	header_bytes INTEGER NOT NULL
);
CREATE INDEX rejections_known ON rejections (known, id);
