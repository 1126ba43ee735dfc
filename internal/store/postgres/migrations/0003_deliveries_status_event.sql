-- Listing events by delivery status can walk this index newest first.
CREATE INDEX deliveries_status_event ON deliveries (status, event_id);
