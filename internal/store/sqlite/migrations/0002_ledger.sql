-- The tamper-evident log (internal/ledger, docs/ledger.md). Append-only:
-- the gateway never updates or deletes these rows, except that retention
-- sets body_pruned when it empties an old event's body.

-- One row per log position: index 0, 1, 2, … without gaps.
CREATE TABLE ledger_entries (
	idx          INTEGER PRIMARY KEY,
	event_id     TEXT NOT NULL UNIQUE,
	header_hash  BLOB NOT NULL,          -- SHA-256 of the canonical headers
	body_hash    BLOB NOT NULL,          -- SHA-256 of the exact body
	leaf_hash    BLOB NOT NULL,
	sequenced_at INTEGER NOT NULL,       -- Unix microseconds
	late         INTEGER NOT NULL DEFAULT 0,
	body_pruned  INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX ledger_entries_unpruned ON ledger_entries (idx) WHERE body_pruned = 0;

-- The Merkle tree's stored hashes, by tlog stored-hash index.
CREATE TABLE ledger_hashes (
	idx  INTEGER PRIMARY KEY,
	hash BLOB NOT NULL
);

-- Signed checkpoints, oldest first.
CREATE TABLE ledger_checkpoints (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	size       INTEGER NOT NULL,
	root       BLOB NOT NULL,
	note       BLOB NOT NULL,
	created_at INTEGER NOT NULL
);

-- The sequencer's progress: events with a higher rowid have not been
-- looked at yet (SQLite allocates rowids in commit order).
CREATE TABLE ledger_state (
	id        INTEGER PRIMARY KEY CHECK (id = 1),
	seq_rowid INTEGER NOT NULL
);
INSERT INTO ledger_state (id, seq_rowid) VALUES (1, 0);
