-- A duplicate whose body differed from its event's (the same provider id,
-- another payload): the hex SHA-256 of the body that was dropped. NULL
-- for a duplicate with the event's own body, for one whose event's body
-- retention had pruned (nothing to compare), and for arrivals recorded
-- before.
ALTER TABLE arrivals ADD COLUMN body_sha256 text;
