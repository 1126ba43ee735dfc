-- A trigger runs under the writing session's search_path: one without
-- this schema (pg_dump's scripts set it to '', a role may have its own)
-- would fail every write on "activity does not exist". The counters'
-- functions are pinned to the schema they were created in (pg_temp last),
-- as 0012 pins the log's.
DO $$
BEGIN
	EXECUTE format('ALTER FUNCTION anyhook_counts_insert() SET search_path = %I, pg_temp', current_schema());
	EXECUTE format('ALTER FUNCTION anyhook_counts_update() SET search_path = %I, pg_temp', current_schema());
	EXECUTE format('ALTER FUNCTION anyhook_counts_delete() SET search_path = %I, pg_temp', current_schema());
	EXECUTE format('ALTER FUNCTION anyhook_activity_events() SET search_path = %I, pg_temp', current_schema());
	EXECUTE format('ALTER FUNCTION anyhook_activity_attempts() SET search_path = %I, pg_temp', current_schema());
	EXECUTE format('ALTER FUNCTION anyhook_minute(timestamptz) SET search_path = %I, pg_temp', current_schema());
END $$;
