-- Times are Unix microseconds (INTEGER). Ids are UUIDv7 text, so ordering
-- by id is ordering by creation time.
CREATE TABLE events (
	id          TEXT PRIMARY KEY,
	source      TEXT NOT NULL,
	dedup_key   TEXT,              -- NULL: the event cannot be deduplicated
	received_at INTEGER NOT NULL,
	method      TEXT NOT NULL,
	path        TEXT NOT NULL,
	headers     BLOB NOT NULL,     -- JSON object of header name -> values
	body        BLOB NOT NULL,
	object      TEXT,
	version     TEXT,
	stale       INTEGER NOT NULL DEFAULT 0,
	duplicates  INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX events_dedup ON events (source, dedup_key) WHERE dedup_key IS NOT NULL;
CREATE INDEX events_source ON events (source, id);
CREATE INDEX events_received ON events (received_at);

-- The delivery queue.
CREATE TABLE deliveries (
	id              TEXT PRIMARY KEY,
	event_id        TEXT NOT NULL REFERENCES events (id),
	destination     TEXT NOT NULL,
	status          TEXT NOT NULL,
	replay          INTEGER NOT NULL DEFAULT 0,
	stale           INTEGER NOT NULL DEFAULT 0,
	attempt_count   INTEGER NOT NULL DEFAULT 0,
	next_attempt_at INTEGER NOT NULL,
	lease_until     INTEGER,
	created_at      INTEGER NOT NULL,
	updated_at      INTEGER NOT NULL,
	note            TEXT NOT NULL DEFAULT ''
);
CREATE INDEX deliveries_due ON deliveries (destination, status, next_attempt_at);
CREATE INDEX deliveries_event ON deliveries (event_id);
CREATE INDEX deliveries_status ON deliveries (status, id);

CREATE TABLE attempts (
	delivery_id   TEXT NOT NULL REFERENCES deliveries (id),
	number        INTEGER NOT NULL,
	started_at    INTEGER NOT NULL,
	duration_us   INTEGER NOT NULL,
	status_code   INTEGER NOT NULL,
	error         TEXT NOT NULL,
	response_body BLOB,
	PRIMARY KEY (delivery_id, number)
);

-- Highest version seen per (source, object) for the staleness guard.
CREATE TABLE versions (
	source  TEXT NOT NULL,
	object  TEXT NOT NULL,
	version TEXT NOT NULL,
	PRIMARY KEY (source, object)
);

CREATE TABLE destinations (
	name   TEXT PRIMARY KEY,
	paused INTEGER NOT NULL DEFAULT 0
);
