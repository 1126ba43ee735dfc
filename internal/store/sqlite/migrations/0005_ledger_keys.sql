-- The log's public keys (note verifier keys, docs/ledger.md), in the order
-- they came into force. The first gateway to start records its key; one
-- with another key refuses to start. anyhook log rotate-key adds the next
-- key together with a checkpoint signed by both. The highest seq is the
-- key in force.
CREATE TABLE ledger_keys (
	seq          INTEGER PRIMARY KEY,     -- 1, 2, …
	verifier_key TEXT NOT NULL UNIQUE,
	added_at     INTEGER NOT NULL         -- Unix microseconds
);
