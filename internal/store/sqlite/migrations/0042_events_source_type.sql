-- The events of one source and one type, newest first: with events_type
-- or events_source alone, a source and a type that are each common but
-- never occur together walked every event of the type to find none.
CREATE INDEX events_source_type ON events (source, lower(coalesce(type, '')), id);
