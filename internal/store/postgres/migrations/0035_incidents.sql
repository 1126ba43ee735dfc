-- Incidents (store.Incidents; docs/design.md, "Incidents"): failing
-- deliveries grouped by destination and failure kind. One row per
-- incident; a resolved one may reopen (same row, reopens + 1).
CREATE TABLE incidents (
	id                 text COLLATE "C" PRIMARY KEY, -- UUIDv7 (store.NewID)
	destination        text COLLATE "C" NOT NULL,
	kind               text COLLATE "C" NOT NULL,    -- internal/incident: dns, refused, tls, connect, timeout, reset, 5xx, 4xx, 429, 410, …
	state              text NOT NULL,                -- open | acknowledged | resolved
	first_seen         timestamptz NOT NULL,
	last_seen          timestamptz NOT NULL,
	attempts           bigint NOT NULL,              -- failed attempts of this kind
	events             bigint NOT NULL,              -- distinct events among them (incident_events)
	latest_error       text NOT NULL,
	healthy_since      timestamptz,                  -- the destination's first success after its last failure; NULL while failing
	escalated_at       timestamptz,                  -- when the escalation alert was raised (once)
	acknowledged_by    text NOT NULL DEFAULT '',
	acknowledged_at    timestamptz,
	note               text NOT NULL DEFAULT '',
	resolved_at        timestamptz,
	resolved_by        text NOT NULL DEFAULT '',     -- "auto" or the actor
	reopens            integer NOT NULL DEFAULT 0,
	breaker_tripped_at timestamptz,                  -- the automatic pause tripped (NoteBreaker)
	breaker_resumed_at timestamptz
);
-- At most one unresolved incident per (destination, kind): the upsert of
-- every process lands on it.
CREATE UNIQUE INDEX incidents_active ON incidents (destination, kind) WHERE state <> 'resolved';
CREATE INDEX incidents_resolved ON incidents (destination, kind, resolved_at) WHERE state = 'resolved';

-- The distinct events of each incident, in the order first seen: the
-- count and the sample (the first few) come from here.
CREATE TABLE incident_events (
	incident_id text COLLATE "C" NOT NULL,
	event_id    text COLLATE "C" NOT NULL,
	seen_at     timestamptz NOT NULL,
	PRIMARY KEY (incident_id, event_id)
);
CREATE INDEX incident_events_seen ON incident_events (incident_id, seen_at, event_id);
