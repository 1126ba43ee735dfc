-- A delivery's status, destination and source are not independent: routes
-- send a source to some destinations only, and a paused destination's
-- deliveries are the pending ones. Without these statistics the planner
-- multiplied their shares, took the paused deliveries of a source that no
-- route sends to the paused destination for thousands, and walked every
-- delivery of a window to find none (1.1 s at a million events; 0.5 ms
-- with them). The statistics keep up to 1,000 combinations: with the
-- default 100, the rarest ones (resolved deliveries) were left out and
-- any combination not kept was still taken for up to their share of the
-- table (thousands of rows), and the retrying deliveries of a source that
-- sends only to a paused destination walked every delivery of a window
-- (8.4 s at a million, 13 ms with these and the index below).
CREATE STATISTICS deliveries_routes (mcv) ON status, destination, source FROM deliveries;
ALTER STATISTICS deliveries_routes SET STATISTICS 1000;
-- The pending deliveries of a source, newest first: a list of pending or
-- retrying deliveries of a source, which leaves out the held-back
-- destinations' by name, reads the source's pending ones, not all pending
-- ones (46 ms at a million events to find none, 14 ms).
CREATE INDEX deliveries_pending_source ON deliveries (source, id) WHERE status = 'pending';
-- ANALYZE reads a sample (300,000 rows for the statistics above: 8.5 s on
-- a million events here) and holds off no write; the index holds off
-- writes to deliveries while it builds (1 s on a million). A table of
-- fewer than ten pages (a new store's) is not analyzed: a table never
-- analyzed is planned as ten pages at least, one analyzed as what it
-- held, so a plan made while it is small (the attempts' foreign-key
-- check, a prepared statement's generic plan) scans it whole and is kept
-- while it grows, until autovacuum analyzes it again
-- (TestMigrationsAnalyzeNoSmallTable).
DO $$ BEGIN
	IF pg_relation_size('deliveries') >= 10 * current_setting('block_size')::bigint THEN ANALYZE deliveries; END IF;
END $$;
