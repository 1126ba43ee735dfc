-- The deliveries list with a time window (since, until: created_at) walks
-- this index from the window's end, newest first by creation time then id
-- (store.DeliveriesByTime): walking the ids newest first read every
-- delivery after the window too.
CREATE INDEX deliveries_created ON deliveries (created_at, id);
-- CREATE INDEX holds off writes to deliveries while it builds (BENCHMARKS.md, "The read side at scale").
