-- What the screens say is what happened (docs/design.md,
-- "Delivery states").

-- When the latest claim started: an attempt lost in a crash started then.
ALTER TABLE deliveries ADD COLUMN claimed_at INTEGER;
-- How a person took a held or dead delivery out of its queue for good:
-- replayed (replayed_by carries the work), discarded (both now status
-- resolved) or marked_delivered (status delivered).
ALTER TABLE deliveries ADD COLUMN resolution TEXT NOT NULL DEFAULT '';
ALTER TABLE deliveries ADD COLUMN resolved_at INTEGER;
ALTER TABLE deliveries ADD COLUMN resolved_by TEXT NOT NULL DEFAULT '';
ALTER TABLE deliveries ADD COLUMN resolution_reason TEXT NOT NULL DEFAULT '';
ALTER TABLE deliveries ADD COLUMN replayed_by TEXT;

-- The audit trail: one row per replay delivery created, resend, discard
-- and mark, with who, when and why.
CREATE TABLE actions (
	id          TEXT PRIMARY KEY,          -- UUIDv7
	event_id    TEXT NOT NULL REFERENCES events (id),
	delivery_id TEXT NOT NULL,             -- the delivery acted on; for a replay, the one it created
	destination TEXT NOT NULL,
	action      TEXT NOT NULL,             -- replay | resend | mark_delivered | discard
	actor       TEXT NOT NULL,
	reason      TEXT NOT NULL DEFAULT '',
	at          INTEGER NOT NULL
);
CREATE INDEX actions_event ON actions (event_id, id);

-- What earlier versions left in the dead and held queues although a person
-- had dealt with it: a replay of the same event and destination made after
-- the delivery's last change took over; a discard only wrote a note.
UPDATE deliveries SET status = 'resolved', resolution = 'replayed', resolved_by = 'before 0006',
	replayed_by = (SELECT min(r.id) FROM deliveries r WHERE r.event_id = deliveries.event_id
		AND r.destination = deliveries.destination AND r.replay AND r.id <> deliveries.id AND r.created_at >= deliveries.updated_at),
	resolved_at = (SELECT min(r.created_at) FROM deliveries r WHERE r.event_id = deliveries.event_id
		AND r.destination = deliveries.destination AND r.replay AND r.id <> deliveries.id AND r.created_at >= deliveries.updated_at)
WHERE status IN ('held', 'dead') AND EXISTS (SELECT 1 FROM deliveries r WHERE r.event_id = deliveries.event_id
	AND r.destination = deliveries.destination AND r.replay AND r.id <> deliveries.id AND r.created_at >= deliveries.updated_at);
UPDATE deliveries SET status = 'resolved', resolution = 'discarded', resolved_at = updated_at, resolved_by = 'before 0006'
WHERE status = 'dead' AND note LIKE 'discarded by an operator at %';
UPDATE deliveries SET resolution = 'marked_delivered', resolved_at = updated_at, resolved_by = 'before 0006'
WHERE status = 'delivered' AND note LIKE 'marked delivered by an operator at %';
