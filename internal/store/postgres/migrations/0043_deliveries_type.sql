-- The events of a source and a type with a delivery in a status (dead of
-- shopify's push, say) walked every event of the pair and probed each for
-- a delivery in the status: a pair with none read all its events to find
-- none (424,836 at ten million: 2.7 s, 9.8 s cold). Each delivery now
-- keeps its event's type, as it keeps its source (0039), and this index
-- answers the three together, newest event first.
--
-- The fill rewrites every delivery: as in 0039 the table's secondary
-- indexes (whichever exist: 0061's comes after this one in number order)
-- are dropped first and built again after, by sorting. Writes to
-- deliveries wait for the whole migration (ADD COLUMN holds the table's
-- ACCESS EXCLUSIVE lock to the commit; docs/operations.md, "Upgrades on a big store").
SET LOCAL maintenance_work_mem = '256MB';
ALTER TABLE deliveries ADD COLUMN type text;
DO $$
DECLARE
	defs text[];
	def text;
BEGIN
	SELECT array_agg(indexdef) INTO defs FROM pg_indexes
	WHERE schemaname = current_schema() AND tablename = 'deliveries' AND indexname <> 'deliveries_pkey';
	IF defs IS NOT NULL THEN
		EXECUTE (SELECT 'DROP INDEX ' || string_agg(quote_ident(indexname), ', ') FROM pg_indexes
			WHERE schemaname = current_schema() AND tablename = 'deliveries' AND indexname <> 'deliveries_pkey');
	END IF;
	-- The counters' update trigger would join every old row to its new
	-- one to find no change of status or destination.
	ALTER TABLE deliveries DISABLE TRIGGER delivery_counts_update;
	UPDATE deliveries d SET type = e.type FROM events e WHERE e.id = d.event_id AND e.type IS NOT NULL;
	ALTER TABLE deliveries ENABLE TRIGGER delivery_counts_update;
	FOREACH def IN ARRAY coalesce(defs, '{}') LOOP
		EXECUTE def;
	END LOOP;
END $$;
-- The type as the events list compares it (sqlstore.TypeExpr).
CREATE INDEX deliveries_status_source_type ON deliveries (status, source, lower(coalesce(type, '') COLLATE "C"), event_id);
-- The planner's estimate of the index's expression: a pair with no
-- delivery in the status is then read from the index, not walked.
ANALYZE deliveries;
