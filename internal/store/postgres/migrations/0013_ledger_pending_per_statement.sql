-- The log's queue is filled once per statement that inserts events, not
-- once per event (issue 15): ingest inserts a whole batch in one
-- statement, and a row trigger ran a function and an insert of its own
-- for each of its events. The statement trigger sees the rows the
-- statement inserted (its transition table; an insert that ON CONFLICT
-- skipped is not among them) and queues them with one insert. Dropped and
-- created in this migration's transaction: no insert falls between the
-- two, and the lock CREATE TRIGGER takes on events reads nothing.
DROP TRIGGER events_ledger_pending ON events;

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

CREATE TRIGGER events_ledger_pending AFTER INSERT ON events
	REFERENCING NEW TABLE AS inserted_events
	FOR EACH STATEMENT EXECUTE FUNCTION ledger_pending_add_inserted();

DROP FUNCTION ledger_pending_add();
