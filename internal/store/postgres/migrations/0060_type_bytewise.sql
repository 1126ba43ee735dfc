-- The events_type index compares the lowered type bytewise (COLLATE "C"),
-- whatever the database's collation: a type glob's literal prefix is then
-- a range of it, which the store walks one distinct type at a time
-- (sqlstore.ListTypes) instead of reading every event through ILIKE. Only
-- ASCII letters are lowered, as SQLite's lower() does: the glob ignores
-- ASCII case. Rebuilding it holds off writes to events while it builds
-- (BENCHMARKS.md, "The read side at scale").
DROP INDEX events_type;
CREATE INDEX events_type ON events (lower(coalesce(type, '') COLLATE "C"), id);
