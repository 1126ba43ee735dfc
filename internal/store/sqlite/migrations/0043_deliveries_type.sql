-- The events of a source and a type with a delivery in a status (dead of
-- shopify's push, say) walked the status's deliveries and probed each
-- one's event for the pair: a pair with none read them all to find none.
-- Each delivery now keeps its event's type, as it keeps its source
-- (0039), and this index answers the three together, newest event first,
-- for the statuses a person looks through (dead, held, resolved); its
-- first two columns count a source's deliveries in one. It is partial so
-- that the path every event takes (pending, delivering, delivered)
-- writes none of it. A query uses it only by naming its condition as
-- written here (sqlstore.TypedStatusIn): SQLite has no statistics to
-- weigh it against the other indexes of a status.
--
-- The type is filled for the deliveries that are not delivered or
-- skipped (the only ones that can be, or become, dead, held or
-- resolved); a delivered or skipped one recorded before this keeps none,
-- and no read looks at it.
ALTER TABLE deliveries ADD COLUMN type TEXT;
UPDATE deliveries SET type = (SELECT type FROM events WHERE events.id = deliveries.event_id)
WHERE status NOT IN ('delivered', 'skipped');
CREATE INDEX deliveries_status_source_type ON deliveries (status, source, lower(coalesce(type, '')), event_id)
	WHERE status IN ('dead', 'held', 'resolved');
-- The fill and the index are in the migration's write transaction: ingest waits for them (docs/operations.md, "Upgrades on a big store").
