-- The events of a source and a type with a delivery in a status (dead of
-- shopify's push, say) walked every event of the pair and probed each for
-- a delivery in the status: a pair with none read all its events to find
-- none (424,836 at ten million: 2.7 s, 9.8 s cold). Each delivery now
-- keeps its event's type, as it keeps its source (0039), and this index
-- answers the three together, newest event first, for the statuses a
-- person looks through (dead, held, resolved). It is partial so that the
-- path every event takes (pending, delivering, delivered) writes none of
-- it: an index of every delivery would cost each one more index pages.
--
-- The type is filled for the deliveries that are not delivered or
-- skipped (the only ones that can be, or become, dead, held or
-- resolved); a delivered or skipped one recorded before this keeps none,
-- and no read looks at it (sqlstore.TypedStatus). Writes to deliveries
-- wait for the fill (docs/operations.md, "Upgrades on a big store").
ALTER TABLE deliveries ADD COLUMN type text;
ALTER TABLE deliveries DISABLE TRIGGER delivery_counts_update;
UPDATE deliveries d SET type = e.type FROM events e
WHERE e.id = d.event_id AND e.type IS NOT NULL AND d.status NOT IN ('delivered', 'skipped');
ALTER TABLE deliveries ENABLE TRIGGER delivery_counts_update;
-- The type as the events list compares it (sqlstore.TypeExpr).
CREATE INDEX deliveries_status_source_type ON deliveries (status, source, lower(coalesce(type, '') COLLATE "C"), event_id)
	WHERE status IN ('dead', 'held', 'resolved');
-- As in 0041, a table of fewer than ten pages is not analyzed.
DO $$ BEGIN
	IF pg_relation_size('deliveries') >= 10 * current_setting('block_size')::bigint THEN ANALYZE deliveries; END IF;
END $$;
