-- In-order delivery per object: a destination with
-- order: per_object finds the other deliveries of an event's object
-- through its events, by (source, object).
CREATE INDEX events_object ON events (source, object) WHERE object IS NOT NULL;
