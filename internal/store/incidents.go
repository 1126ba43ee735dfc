package store

import (
	"context"
	"time"
)

// Incident states: open at the first failure; a person acknowledges it;
// it resolves by itself once its destination delivered again for a
// while, or a person resolves it. A resolved incident reopens when its
// destination fails the same way again soon after.
const (
	IncidentOpen         = "open"
	IncidentAcknowledged = "acknowledged"
	IncidentResolved     = "resolved"
)

// ResolvedByAuto is Incident.ResolvedBy of an incident that resolved by
// itself.
const ResolvedByAuto = "auto"

// IncidentSample bounds Incident.Sample.
const IncidentSample = 10

// Incident groups the failed attempts of one destination that failed the
// same way (its Kind: internal/incident).
type Incident struct {
	ID          string
	Destination string
	Kind        string
	State       string
	FirstSeen   time.Time
	LastSeen    time.Time
	Attempts    int // failed attempts counted
	Events      int // distinct events among them
	LatestError string
	// Sample holds the ids of the first events affected (at most
	// IncidentSample), in the order seen; read by Incident only.
	Sample []string
	// HealthySince is the destination's first success after the latest
	// failure, zero while it fails: the incident resolves by itself once
	// it is older than the resolve window.
	HealthySince   time.Time
	EscalatedAt    time.Time
	AcknowledgedBy string
	AcknowledgedAt time.Time
	Note           string
	ResolvedAt     time.Time
	ResolvedBy     string // ResolvedByAuto or the actor
	Reopens        int
	// The automatic pause of the destination tripped or resumed while
	// the incident was unresolved (NoteBreaker); zero: never.
	BreakerTrippedAt time.Time
	BreakerResumedAt time.Time
}

// IncidentAttempt is one recorded attempt as incidents see it.
type IncidentAttempt struct {
	Destination string
	// Kind is how it failed (internal/incident); "" for a success.
	Kind    string
	EventID string
	Error   string
	At      time.Time // when it ended
}

// IncidentPolicy is when incidents change by themselves.
type IncidentPolicy struct {
	// ResolveAfter: an incident resolves once its destination has
	// succeeded, with no failure since, for this long.
	ResolveAfter time.Duration
	// ReopenWithin: a failure of the kind of an incident resolved less
	// than this long ago reopens it rather than open a new one.
	ReopenWithin time.Duration
	// An open incident escalates (once) when EscalateEvents events are
	// affected or it has been open EscalateAfter; 0 turns either off.
	EscalateEvents int
	EscalateAfter  time.Duration
}

// Incident changes, what alerts follow (IncidentChange.Change).
const (
	ChangeOpened    = "opened"
	ChangeReopened  = "reopened"
	ChangeEscalated = "escalated"
	ChangeResolved  = "resolved"
)

// IncidentChange is one change that RecordIncidents or SweepIncidents
// made, with the incident as it is after it. Each change is reported to
// one caller, whatever the number of processes.
type IncidentChange struct {
	Change   string
	Incident Incident
}

// IncidentFilter selects incidents, newest first.
type IncidentFilter struct {
	State       string // "" any; or IncidentOpen, IncidentAcknowledged, IncidentResolved; "unresolved": open or acknowledged
	Destination string
	Limit       int
	Cursor      string
}

// Incidents is the part of Store that keeps incidents. Times are the
// caller's (the attempts' own, and the recorder's clock for the sweep),
// so that a test's clock drives the windows on both backends.
type Incidents interface {
	// RecordIncidents records a batch of attempts in one transaction:
	// each failure counts on the unresolved incident of its (destination,
	// kind), opening one, or reopening the latest resolved within
	// ReopenWithin of the failure; each success starts its destination's
	// healthy time unless a later failure is recorded. Two processes
	// recording the same (destination, kind) at once count on one
	// incident. It returns the opens, reopens and escalations by events.
	RecordIncidents(ctx context.Context, as []IncidentAttempt, p IncidentPolicy) ([]IncidentChange, error)
	// SweepIncidents resolves the incidents healthy for ResolveAfter at
	// now and escalates those open EscalateAfter, and returns them.
	SweepIncidents(ctx context.Context, now time.Time, p IncidentPolicy) ([]IncidentChange, error)
	// Incident reads one, with its Sample; anyhook.ErrNotFound when none.
	Incident(ctx context.Context, id string) (Incident, error)
	ListIncidents(ctx context.Context, f IncidentFilter) ([]Incident, string, error)
	// AcknowledgeIncident marks an open incident acknowledged by the
	// actor, with its reason as the note; an acknowledged or resolved one
	// is refused with anyhook.ErrInvalid.
	AcknowledgeIncident(ctx context.Context, id string, by Actor, at time.Time) (Incident, error)
	// ResolveIncident resolves an unresolved incident by the actor, with
	// its reason as the note (a resolved one: anyhook.ErrInvalid). It
	// reopens as one that resolved by itself would.
	ResolveIncident(ctx context.Context, id string, by Actor, at time.Time) (Incident, error)
	// NoteBreaker records on the destination's unresolved incidents that
	// its automatic pause tripped (or resumed) at at.
	NoteBreaker(ctx context.Context, destination string, tripped bool, at time.Time) error
	IncidentPruner
}

// IncidentPruner forgets old incidents (incidents.retention).
type IncidentPruner interface {
	// PruneIncidents deletes at most limit incidents resolved before
	// before, and their events (the sample), oldest first, and returns
	// how many; an unresolved one is never deleted.
	PruneIncidents(ctx context.Context, before time.Time, limit int) (int, error)
}
