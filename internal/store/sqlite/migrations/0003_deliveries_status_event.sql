-- Listing events by delivery status walks this index newest first.
CREATE INDEX deliveries_status_event ON deliveries (status, event_id);
