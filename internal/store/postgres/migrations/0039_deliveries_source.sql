-- The deliveries list filtered by source (alone, or with a destination)
-- walked every delivery (or every one of the destination) and looked up
-- each one's event to compare its source: a source that never sent to the
-- destination read them all to find none. Each delivery now keeps its
-- event's source (an event's source never changes; the column's collation
-- is events.source's, so the filter compares alike), and two indexes in
-- the list's order (newest id first) serve the filter.
ALTER TABLE deliveries ADD COLUMN source text NOT NULL DEFAULT '';
-- The counters' update trigger would join every old row to its new one
-- to find no change of status or destination: it is off for the fill,
-- which no other transaction sees (ADD COLUMN holds the table's ACCESS
-- EXCLUSIVE lock to the commit).
ALTER TABLE deliveries DISABLE TRIGGER delivery_counts_update;
UPDATE deliveries d SET source = e.source FROM events e WHERE e.id = d.event_id;
ALTER TABLE deliveries ENABLE TRIGGER delivery_counts_update;
CREATE INDEX deliveries_source ON deliveries (source, id);
CREATE INDEX deliveries_destination_source ON deliveries (destination, source, id);
-- The fill rewrites every delivery and CREATE INDEX holds off writes to
-- deliveries while it builds (BENCHMARKS.md, "The read side at scale").
