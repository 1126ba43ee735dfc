-- A delivery's status, destination and source are not independent: routes
-- send a source to some destinations only, and a paused destination's
-- deliveries are the pending ones. Without these statistics the planner
-- multiplied their shares, took the paused deliveries of a source that no
-- route sends to the paused destination for thousands, and walked every
-- delivery of a window to find none (1.1 s at a million events; 0.5 ms
-- with them). ANALYZE reads a sample (0.7 s at a million deliveries) and
-- holds off no write.
CREATE STATISTICS deliveries_routes (mcv) ON status, destination, source FROM deliveries;
ANALYZE deliveries;
