-- The PostgreSQL schema mirrors the SQLite one (internal/store/sqlite) with
-- native types. Ids are UUIDv7 text compared bytewise (COLLATE "C"), so
-- ordering by id is ordering by creation time whatever the database's
-- collation. Every time a lease, retry or creation depends on is written by
-- the database clock (now()), so many gateway processes agree on it.
CREATE TABLE events (
	id          text COLLATE "C" PRIMARY KEY,
	source      text NOT NULL,
	dedup_key   text,                  -- NULL: the event cannot be deduplicated
	received_at timestamptz NOT NULL,  -- set by the gateway that read the request
	method      text NOT NULL,
	path        text NOT NULL,
	headers     bytea NOT NULL,        -- store.EncodeHeader, kept as bytes so it round-trips exactly
	body        bytea NOT NULL,
	object      text,
	version     text,
	stale       boolean NOT NULL DEFAULT false,
	duplicates  bigint NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX events_dedup ON events (source, dedup_key) WHERE dedup_key IS NOT NULL;
CREATE INDEX events_source ON events (source, id);
CREATE INDEX events_received ON events (received_at);

-- The delivery queue.
CREATE TABLE deliveries (
	id              text COLLATE "C" PRIMARY KEY,
	event_id        text COLLATE "C" NOT NULL REFERENCES events (id),
	destination     text NOT NULL,
	status          text NOT NULL CHECK (status IN ('pending', 'delivering', 'delivered', 'dead', 'held', 'skipped', 'paused')),
	replay          boolean NOT NULL DEFAULT false,
	stale           boolean NOT NULL DEFAULT false,
	attempt_count   integer NOT NULL DEFAULT 0,
	next_attempt_at timestamptz NOT NULL,
	lease_until     timestamptz,           -- while delivering
	created_at      timestamptz NOT NULL,
	updated_at      timestamptz NOT NULL,
	note            text NOT NULL DEFAULT ''
);
-- Claim: the due pending deliveries of one destination, oldest due first.
CREATE INDEX deliveries_due ON deliveries (destination, next_attempt_at) WHERE status = 'pending';
-- Rescue: claims whose lease ran out.
CREATE INDEX deliveries_lease ON deliveries (lease_until) WHERE status = 'delivering';
CREATE INDEX deliveries_event ON deliveries (event_id);
CREATE INDEX deliveries_status ON deliveries (status, id);
CREATE INDEX deliveries_destination ON deliveries (destination, id);

CREATE TABLE attempts (
	delivery_id   text COLLATE "C" NOT NULL REFERENCES deliveries (id),
	number        integer NOT NULL,
	started_at    timestamptz NOT NULL,
	duration_us   bigint NOT NULL,
	status_code   integer NOT NULL,
	error         text NOT NULL,
	response_body bytea,
	PRIMARY KEY (delivery_id, number)
);

-- Highest version seen per (source, object) for the staleness guard.
CREATE TABLE versions (
	source  text NOT NULL,
	object  text NOT NULL,
	version text NOT NULL,
	PRIMARY KEY (source, object)
);

CREATE TABLE destinations (
	name   text PRIMARY KEY,
	paused boolean NOT NULL DEFAULT false
);
