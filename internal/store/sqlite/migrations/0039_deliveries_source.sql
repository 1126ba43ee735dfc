-- The deliveries list filtered by source (alone, or with a destination)
-- walked every delivery (or every one of the destination) and looked up
-- each one's event to compare its source: a source that never sent to the
-- destination read them all to find none. Each delivery now keeps its
-- event's source (an event's source never changes), and two indexes in the
-- list's order (newest id first) serve the filter.
ALTER TABLE deliveries ADD COLUMN source TEXT NOT NULL DEFAULT '';
UPDATE deliveries SET source = coalesce((SELECT source FROM events WHERE events.id = deliveries.event_id), '');
CREATE INDEX deliveries_source ON deliveries (source, id);
CREATE INDEX deliveries_destination_source ON deliveries (destination, source, id);
-- The fill rewrites every delivery and the indexes are built in the migration's write transaction: ingest waits for it (BENCHMARKS.md, "The read side at scale").
