-- The log's queue of events to sequence. A trigger adds each
-- new event's id in the transaction that inserts the event, whoever
-- inserts it: ingest, a process of an older version during a rolling
-- upgrade, or someone writing to the table directly (the sequencer then
-- logs it, flagged late when a checkpoint should have held it, as it
-- always did). The sequencer takes ids from the queue and deletes them
-- with the entries it writes. Before, every round looked for unlogged
-- events among all those received in the last 15 minutes (an anti-join
-- that grew with the traffic: 38 ms a round with 40,000 recent events,
-- seconds under sustained load) and, every 5 minutes, among all events.
CREATE TABLE ledger_pending (
	event_id text COLLATE "C" PRIMARY KEY
);
-- A queue: every row is deleted soon after it is written. Vacuum it after
-- a fixed number of dead rows, not a share of the (small) live ones, so
-- the sequencer's index scan does not walk a growing tail of them.
ALTER TABLE ledger_pending SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);

CREATE FUNCTION ledger_pending_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	-- A queued id left behind (its event deleted before it was logged)
	-- must not fail a new event that reuses the id.
	INSERT INTO ledger_pending (event_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
	RETURN NULL;
END
$$;
-- A trigger runs in the inserting session, under its search_path; one
-- without this schema (pg_dump's scripts set it to '', a role may have
-- its own) would fail every insert into events on "ledger_pending does
-- not exist". Pinned to the schema the table is in (pg_temp last, so no
-- temporary table can stand in for it).
DO $$ BEGIN
	EXECUTE format('ALTER FUNCTION ledger_pending_add() SET search_path = %I, pg_temp', current_schema());
END $$;

-- Queue what the log lacks. This reads every event (seconds on a large
-- database), so it runs before CREATE TRIGGER: the trigger's lock on
-- events (SHARE ROW EXCLUSIVE, held to the commit) makes every INSERT
-- wait, and processes of the older version keep ingesting during a
-- rolling upgrade (TestMigrateQueuesWithoutBlockingIngest).
INSERT INTO ledger_pending (event_id)
	SELECT id FROM events e WHERE NOT EXISTS (SELECT 1 FROM ledger_entries l WHERE l.event_id = e.id);
CREATE TRIGGER events_ledger_pending AFTER INSERT ON events
	FOR EACH ROW EXECUTE FUNCTION ledger_pending_add();
-- Events committed after the read above and before the trigger took its
-- lock (which waits for every insert in progress) were received just now:
-- look among the last 15 minutes' only (the older sequencer's window, an
-- index range on events_received), under the lock. One received long
-- before (a gateway's clock far behind) is the sweep's, as it was the
-- older sequencer's full pass.
INSERT INTO ledger_pending (event_id)
	SELECT id FROM events e WHERE received_at > now() - interval '15 minutes'
		AND NOT EXISTS (SELECT 1 FROM ledger_entries l WHERE l.event_id = e.id)
	ON CONFLICT DO NOTHING;

-- Rows that reach the table with triggers off (a restore with
-- session_replication_role = replica, say) have no pending row: a sweep
-- walks all events in chunks of ids, from sweep_cursor ('' when no pass
-- is under way), and logs those it finds.
ALTER TABLE ledger_state ADD COLUMN sweep_cursor text COLLATE "C" NOT NULL DEFAULT '';
