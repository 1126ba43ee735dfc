-- Every filter of the event and delivery lists walks an index in the
-- lists' keyset order (newest id first), so a page costs its own rows
-- however many events the store holds (docs/operations.md, "Sizing").
-- CREATE INDEX holds off writes to its table while it builds
-- (BENCHMARKS.md measures how long on a million events).
--
-- An exact type (no *) is matched ignoring case, as ILIKE does.
CREATE INDEX events_type ON events (lower(coalesce(type, '')), id);
-- A search by provider event id without a source (events_dedup is by
-- source first).
CREATE INDEX events_dedup_key ON events (dedup_key, id);
