-- Incidents (store.Incidents; docs/design.md, "Incidents"): failing
-- deliveries grouped by destination and failure kind. One row per
-- incident; a resolved one may reopen (same row, reopens + 1).
CREATE TABLE incidents (
	id                 TEXT PRIMARY KEY,        -- UUIDv7 (store.NewID)
	destination        TEXT NOT NULL,
	kind               TEXT NOT NULL,           -- internal/incident: dns, refused, tls, connect, timeout, reset, 5xx, 4xx, 429, 410, …
	state              TEXT NOT NULL,           -- open | acknowledged | resolved
	first_seen         INTEGER NOT NULL,        -- Unix microseconds
	last_seen          INTEGER NOT NULL,
	attempts           INTEGER NOT NULL,        -- failed attempts of this kind
	events             INTEGER NOT NULL,        -- distinct events among them (incident_events)
	latest_error       TEXT NOT NULL,
	healthy_since      INTEGER,                 -- the destination's first success after its last failure; NULL while failing
	escalated_at       INTEGER,                 -- when the escalation alert was raised (once)
	acknowledged_by    TEXT NOT NULL DEFAULT '',
	acknowledged_at    INTEGER,
	note               TEXT NOT NULL DEFAULT '',
	resolved_at        INTEGER,
	resolved_by        TEXT NOT NULL DEFAULT '', -- "auto" or the actor
	reopens            INTEGER NOT NULL DEFAULT 0,
	breaker_tripped_at INTEGER,                 -- the automatic pause tripped (NoteBreaker)
	breaker_resumed_at INTEGER
);
-- At most one unresolved incident per (destination, kind): the upsert of
-- every process lands on it.
CREATE UNIQUE INDEX incidents_active ON incidents (destination, kind) WHERE state <> 'resolved';
CREATE INDEX incidents_resolved ON incidents (destination, kind, resolved_at) WHERE state = 'resolved';

-- The distinct events of each incident, in the order first seen: the
-- count and the sample (the first few) come from here.
CREATE TABLE incident_events (
	incident_id TEXT NOT NULL,
	event_id    TEXT NOT NULL,
	seen_at     INTEGER NOT NULL,
	PRIMARY KEY (incident_id, event_id)
) WITHOUT ROWID;
CREATE INDEX incident_events_seen ON incident_events (incident_id, seen_at, event_id);
