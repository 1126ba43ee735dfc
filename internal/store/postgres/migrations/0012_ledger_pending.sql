-- The log's queue of events to sequence (issue 15): ingest adds each new
-- event's id in the transaction that records it, the sequencer takes ids
-- from it and deletes them with the entries it writes. Before, every
-- round looked for unlogged events among all those received in the last
-- 15 minutes (an anti-join that grew with the traffic: 38 ms a round with
-- 40,000 recent events, seconds under sustained load) and, every 5
-- minutes, among all events ever.
CREATE TABLE ledger_pending (
	event_id text COLLATE "C" PRIMARY KEY
);
-- A queue: every row is deleted soon after it is written. Vacuum it after
-- a fixed number of dead rows, not a share of the (small) live ones, so
-- the sequencer's index scan does not walk a growing tail of them.
ALTER TABLE ledger_pending SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
INSERT INTO ledger_pending (event_id)
	SELECT id FROM events e WHERE NOT EXISTS (SELECT 1 FROM ledger_entries l WHERE l.event_id = e.id);
-- Events that reach the table without ingest (inserted behind the
-- gateway's back) have no pending row: a sweep walks all events in chunks
-- of ids, from sweep_cursor ('' when no pass is under way), and logs those
-- it finds (as late, if a checkpoint should have held them).
ALTER TABLE ledger_state ADD COLUMN sweep_cursor text COLLATE "C" NOT NULL DEFAULT '';
