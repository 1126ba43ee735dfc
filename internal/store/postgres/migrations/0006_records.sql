-- What the screens say is what happened (docs/design.md,
-- "Delivery states"). Mirrors the SQLite migration.

ALTER TABLE deliveries
	-- When the latest claim started: an attempt lost in a crash started then.
	ADD COLUMN claimed_at timestamptz,
	-- How a person took a held or dead delivery out of its queue for good:
	-- replayed (replayed_by carries the work), discarded (both now status
	-- resolved) or marked_delivered (status delivered).
	ADD COLUMN resolution text NOT NULL DEFAULT '',
	ADD COLUMN resolved_at timestamptz,
	ADD COLUMN resolved_by text NOT NULL DEFAULT '',
	ADD COLUMN resolution_reason text NOT NULL DEFAULT '',
	ADD COLUMN replayed_by text COLLATE "C";
-- The new status. NOT VALID: the existing rows passed the narrower check,
-- and validating would read the whole table under the migration's lock.
ALTER TABLE deliveries DROP CONSTRAINT deliveries_status_check;
ALTER TABLE deliveries ADD CONSTRAINT deliveries_status_check
	CHECK (status IN ('pending', 'delivering', 'delivered', 'dead', 'held', 'skipped', 'paused', 'resolved')) NOT VALID;

-- The audit trail: one row per replay delivery created, resend, discard
-- and mark, with who, when and why.
CREATE TABLE actions (
	id          text COLLATE "C" PRIMARY KEY,        -- UUIDv7
	event_id    text COLLATE "C" NOT NULL REFERENCES events (id),
	delivery_id text COLLATE "C" NOT NULL,           -- the delivery acted on; for a replay, the one it created
	destination text NOT NULL,
	action      text NOT NULL CHECK (action IN ('replay', 'resend', 'mark_delivered', 'discard')),
	actor       text NOT NULL,
	reason      text NOT NULL DEFAULT '',
	at          timestamptz NOT NULL
);
CREATE INDEX actions_event ON actions (event_id, id);

-- What earlier versions left in the dead and held queues although a person
-- had dealt with it: a replay of the same event and destination made after
-- the delivery's last change took over; a discard only wrote a note.
UPDATE deliveries d SET status = 'resolved', resolution = 'replayed', resolved_by = 'before 0006',
	replayed_by = r.id, resolved_at = r.created_at
FROM (SELECT DISTINCT ON (o.id) o.id AS orig, x.id, x.created_at
	FROM deliveries o JOIN deliveries x ON x.event_id = o.event_id AND x.destination = o.destination
		AND x.replay AND x.id <> o.id AND x.created_at >= o.updated_at
	WHERE o.status IN ('held', 'dead')
	ORDER BY o.id, x.id) r
WHERE d.id = r.orig;
UPDATE deliveries SET status = 'resolved', resolution = 'discarded', resolved_at = updated_at, resolved_by = 'before 0006'
WHERE status = 'dead' AND note LIKE 'discarded by an operator at %';
UPDATE deliveries SET resolution = 'marked_delivered', resolved_at = updated_at, resolved_by = 'before 0006'
WHERE status = 'delivered' AND note LIKE 'marked delivered by an operator at %';
