-- The deliveries of one destination in one status, newest first: the
-- dashboard's queues filtered by destination (a rare status must not make
-- the list walk every delivery of the destination to find none).
CREATE INDEX deliveries_destination_status ON deliveries (destination, status, id);
