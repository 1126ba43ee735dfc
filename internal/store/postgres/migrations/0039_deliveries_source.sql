-- The deliveries list filtered by source (alone, or with a destination)
-- walked every delivery (or every one of the destination) and looked up
-- each one's event to compare its source: a source that never sent to the
-- destination read them all to find none. Each delivery now keeps its
-- event's source (an event's source never changes; the column's collation
-- is events.source's, so the filter compares alike), and two indexes in
-- the list's order (newest id first) serve the filter.
--
-- The fill rewrites every delivery. Through the table's secondary
-- indexes that ran past 20 minutes for 15 million deliveries on a small
-- server (each new row version an entry in every index, their pages
-- written again at every checkpoint); so they are dropped first and
-- built again after, by sorting (all but 0061's deliveries_created, which
-- a store migrated in number order does not have yet). Writes to
-- deliveries wait for the whole migration (ADD COLUMN holds the table's
-- ACCESS EXCLUSIVE lock to the commit; BENCHMARKS.md, "Ten million events
-- on both stores").
SET LOCAL maintenance_work_mem = '256MB';
ALTER TABLE deliveries ADD COLUMN source text NOT NULL DEFAULT '';
DROP INDEX deliveries_due, deliveries_lease, deliveries_event, deliveries_status,
	deliveries_destination, deliveries_status_event, deliveries_destination_status;
-- The counters' update trigger would join every old row to its new one
-- to find no change of status or destination: it is off for the fill,
-- which no other transaction sees.
ALTER TABLE deliveries DISABLE TRIGGER delivery_counts_update;
UPDATE deliveries d SET source = e.source FROM events e WHERE e.id = d.event_id;
ALTER TABLE deliveries ENABLE TRIGGER delivery_counts_update;
-- As 0001, 0003 and 0032 made them.
CREATE INDEX deliveries_due ON deliveries (destination, next_attempt_at) WHERE status = 'pending';
CREATE INDEX deliveries_lease ON deliveries (lease_until) WHERE status = 'delivering';
CREATE INDEX deliveries_event ON deliveries (event_id);
CREATE INDEX deliveries_status ON deliveries (status, id);
CREATE INDEX deliveries_destination ON deliveries (destination, id);
CREATE INDEX deliveries_status_event ON deliveries (status, event_id);
CREATE INDEX deliveries_destination_status ON deliveries (destination, status, id);
CREATE INDEX deliveries_source ON deliveries (source, id);
CREATE INDEX deliveries_destination_source ON deliveries (destination, source, id);
