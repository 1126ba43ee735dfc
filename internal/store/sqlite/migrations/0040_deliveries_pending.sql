-- A list of a status derived from the pause (pending: never tried;
-- retrying; paused: of a destination held back) names the destinations
-- the delivery counters show in it (sqlstore.ShownIn) and walks each
-- one's stored pending deliveries here, newest event first, testing the
-- attempt count and the source in the index. Through
-- deliveries_status_event, which holds every pending delivery, a list of
-- a part with none read every pending delivery's row (73 ms at a million
-- events, pending with none new), and through an index of all
-- destinations' a paused destination's untried backlog was read to find
-- the others' few (BENCHMARKS.md, "A paused backlog by name").
CREATE INDEX deliveries_waiting ON deliveries (destination, event_id, attempt_count, source) WHERE status = 'pending';
-- The same of a source: a list of a source's events or deliveries walks
-- each named destination's of that source (of a source that a paused
-- destination's backlog has none of, none: through the index above,
-- 62 ms at a million events to read that backlog).
CREATE INDEX deliveries_waiting_source ON deliveries (destination, source, event_id, attempt_count) WHERE status = 'pending';
-- The indexes are built in the migration's write transaction: ingest waits for them.
