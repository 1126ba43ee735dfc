-- What arrived, and what was refused (docs/design.md, "What arrived, and
-- what was refused"). Nothing here is on the ledger's leaf. Adding
-- nullable columns rewrites nothing.
--
-- How each event was authenticated, and the address it came from. NULL on
-- events recorded before: not recorded.
ALTER TABLE events
	ADD COLUMN remote_addr text,
	ADD COLUMN verify_method text,    -- signature | token | none | fetched
	ADD COLUMN verify_scheme text,    -- "stripe v1", "gitlab token", …
	ADD COLUMN verify_secret integer; -- index in the source's secrets; NULL: none

-- The first store.MaxArrivals (20) duplicates of each event, as they
-- arrived; later ones only raise events.duplicates. seq is the value of
-- events.duplicates the duplicate raised it to, so it is read under the
-- row lock of that update and the key never waits on another transaction.
CREATE TABLE arrivals (
	event_id    text COLLATE "C" NOT NULL REFERENCES events (id),
	seq         integer NOT NULL,
	received_at timestamptz NOT NULL,
	remote_addr text NOT NULL,
	headers     bytea NOT NULL,                -- store.ArrivalHeader: wire form, at most 16 KiB
	headers_cut boolean NOT NULL DEFAULT false, -- the headers were cut to fit
	PRIMARY KEY (event_id, seq)
);

-- Requests ingest refused with a 4xx: sizes, a hash and the answer, never
-- a body or a secret. Bounded by the writer (internal/rejectlog): the
-- latest rows of configured sources and, apart, of unknown names.
CREATE TABLE rejections (
	id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	at           timestamptz NOT NULL,
	source       text NOT NULL,        -- as requested, cut and cleaned
	known        boolean NOT NULL,     -- a configured source
	reason       text NOT NULL,        -- the ingest outcome
	status       integer NOT NULL,
	message      text NOT NULL,
	remote_addr  text NOT NULL,
	user_agent   text NOT NULL,
	body_size    bigint NOT NULL,      -- -1: not read and not announced
	body_sha256  text,                 -- NULL: the body was not read in full
	header_count integer NOT NULL,
	header_bytes integer NOT NULL
);
CREATE INDEX rejections_known ON rejections (known, id);
