-- The tamper-evident log (internal/ledger, docs/ledger.md), mirroring the
-- SQLite schema. Append-only: the gateway never updates or deletes these
-- rows, except that retention sets body_pruned when it empties an old
-- event's body. Times are the database clock's.

-- One row per log position: index 0, 1, 2, … without gaps.
CREATE TABLE ledger_entries (
	idx          bigint PRIMARY KEY,
	event_id     text COLLATE "C" NOT NULL UNIQUE,
	header_hash  bytea NOT NULL,           -- SHA-256 of the canonical headers
	body_hash    bytea NOT NULL,           -- SHA-256 of the exact body
	leaf_hash    bytea NOT NULL,
	sequenced_at timestamptz NOT NULL DEFAULT now(),
	late         boolean NOT NULL DEFAULT false,
	body_pruned  boolean NOT NULL DEFAULT false
);
CREATE INDEX ledger_entries_unpruned ON ledger_entries (idx) WHERE NOT body_pruned;

-- The Merkle tree's stored hashes, by tlog stored-hash index.
CREATE TABLE ledger_hashes (
	idx  bigint PRIMARY KEY,
	hash bytea NOT NULL
);

-- Signed checkpoints, oldest first.
CREATE TABLE ledger_checkpoints (
	id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
	size       bigint NOT NULL,
	root       bytea NOT NULL,
	note       bytea NOT NULL,
	created_at timestamptz NOT NULL DEFAULT now()
);

-- The sequencer looks at recent events (by received_at) each round and at
-- all events every few minutes; swept_at is when it last did.
CREATE TABLE ledger_state (
	id       integer PRIMARY KEY CHECK (id = 1),
	swept_at timestamptz NOT NULL DEFAULT '-infinity'
);
INSERT INTO ledger_state (id) VALUES (1);
