-- The deliveries list with a time window (since, until: created_at) walks
-- this index from the window's end, newest first by creation time then id
-- (store.DeliveriesByTime): walking the ids newest first read every
-- delivery after the window too.
CREATE INDEX deliveries_created ON deliveries (created_at, id);
-- The index is built in the migration's write transaction: ingest waits for it (BENCHMARKS.md, "The read side at scale").
