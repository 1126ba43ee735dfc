-- The events of a source and a type with a delivery in a status (dead of
-- shopify's push, say) walked the status's deliveries and probed each
-- one's event for the pair: a pair with none read them all to find none.
-- Each delivery now keeps its event's type, as it keeps its source
-- (0039), and this index answers the three together, newest event first;
-- its first two columns count a source's deliveries in a status.
ALTER TABLE deliveries ADD COLUMN type TEXT;
UPDATE deliveries SET type = (SELECT type FROM events WHERE events.id = deliveries.event_id);
-- The type as the events list compares it (sqlstore.TypeExpr).
CREATE INDEX deliveries_status_source_type ON deliveries (status, source, lower(coalesce(type, '')), event_id);
-- The fill rewrites every delivery and the index is built in the migration's write transaction: ingest waits for it (docs/operations.md, "Upgrades on a big store").
