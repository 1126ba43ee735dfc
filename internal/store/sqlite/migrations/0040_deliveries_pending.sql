-- A status list of pending (never tried) or retrying (tried, due again)
-- walks these, newest event first: both are stored as 'pending', told
-- apart by attempt_count. Through deliveries_status_event, which holds
-- both, a list of the one that has none (no new delivery waits, thousands
-- retry) read every pending delivery to find none: 73 ms at a million
-- events, 141 ms over a window with a destination paused. They hold the
-- destination and the source too, tested in the index: while a
-- destination is held back these lists leave its deliveries out by name
-- (sqlstore.StatusIs), and a list of a source's events compares its
-- deliveries' source.
CREATE INDEX deliveries_untried ON deliveries (event_id, destination, source) WHERE status = 'pending' AND attempt_count = 0;
CREATE INDEX deliveries_retrying ON deliveries (event_id, destination, source) WHERE status = 'pending' AND attempt_count > 0;
-- A list of pending or retrying deliveries or events of a source walks
-- the source's here, newest event first, testing the rest in the index.
CREATE INDEX deliveries_pending_source ON deliveries (source, event_id, attempt_count, destination) WHERE status = 'pending';
-- A list of paused deliveries (stored pending, of a destination held
-- back, named by the list) walks that destination's here, newest event
-- first.
CREATE INDEX deliveries_held ON deliveries (destination, event_id, source) WHERE status = 'pending';
-- The indexes are built in the migration's write transaction: ingest waits for them (BENCHMARKS.md, "A paused backlog by name").
