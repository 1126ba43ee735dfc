-- The log's queue is filled once per statement that inserts events, not
-- once per event: ingest inserts a whole batch in one
-- statement, and the row trigger of migration 12 ran a function and an
-- insert of its own for each of its events. The statement trigger sees the
-- rows the statement inserted (its transition table; a row ON CONFLICT
-- skipped is not among them) and queues them with one insert.
--
-- The row trigger is disabled, not dropped: DROP TRIGGER takes an ACCESS
-- EXCLUSIVE lock on events, which waits behind any read in progress (a
-- dump, a slow query of the dashboard) while every read and insert of the
-- older processes of a rolling upgrade queues behind it. Disabling one
-- trigger and creating the other take SHARE ROW EXCLUSIVE, as migration
-- 12's CREATE TRIGGER did: it waits for the writes to events in progress
-- (an ingest, a duplicate count, a body pruning; a manual VACUUM or
-- ANALYZE), not for reads (TestMigration13DoesNotWaitForReads), and the
-- older processes' inserts wait for it meanwhile (for at most the
-- upgrade's lock_timeout: migrate.go), until the upgrade's
-- transaction (all pending migrations: one) commits. Both in it: no
-- insert falls between them.
--
-- The row trigger's function no longer queues anything: a data-only
-- restore with --disable-triggers ends with ENABLE TRIGGER ALL, which
-- turns the row trigger back on, and then it only costs a call.
CREATE FUNCTION ledger_pending_add_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	-- A queued id left behind (its event deleted before it was logged)
	-- must not fail a new event that reuses the id.
	INSERT INTO ledger_pending (event_id) SELECT id FROM inserted_events ON CONFLICT DO NOTHING;
	RETURN NULL;
END
$$;
-- Pinned to this schema, as ledger_pending_add (0012) is, for the same
-- reason: the trigger runs under the inserting session's search_path.
DO $$ BEGIN
	EXECUTE format('ALTER FUNCTION ledger_pending_add_inserted() SET search_path = %I, pg_temp', current_schema());
END $$;

CREATE OR REPLACE FUNCTION ledger_pending_add() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RETURN NULL; -- the statement trigger queues the event (migration 13)
END
$$;

ALTER TABLE events DISABLE TRIGGER events_ledger_pending;
CREATE TRIGGER events_ledger_queue AFTER INSERT ON events
	REFERENCING NEW TABLE AS inserted_events
	FOR EACH STATEMENT EXECUTE FUNCTION ledger_pending_add_inserted();
