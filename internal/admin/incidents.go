package admin

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/anyhook/anyhook/internal/store"
)

// IncidentStore is the part of store.Incidents the API uses.
type IncidentStore interface {
	Incident(ctx context.Context, id string) (store.Incident, error)
	ListIncidents(ctx context.Context, f store.IncidentFilter) ([]store.Incident, string, error)
	AcknowledgeIncident(ctx context.Context, id string, by store.Actor, at time.Time) (store.Incident, error)
	ResolveIncident(ctx context.Context, id string, by store.Actor, at time.Time) (store.Incident, error)
}

// incidentJSON is an incident as the API shows it.
type incidentJSON struct {
	ID             string    `json:"id"`
	Destination    string    `json:"destination"`
	Kind           string    `json:"kind"`
	State          string    `json:"state"`
	FirstSeen      time.Time `json:"first_seen"`
	LastSeen       time.Time `json:"last_seen"`
	Attempts       int       `json:"attempts"`
	Events         int       `json:"events"`
	LatestError    string    `json:"latest_error"`
	SampleEventIDs []string  `json:"sample_event_ids,omitzero"`
	HealthySince   time.Time `json:"healthy_since,omitzero"`
	EscalatedAt    time.Time `json:"escalated_at,omitzero"`
	AcknowledgedBy string    `json:"acknowledged_by,omitzero"`
	AcknowledgedAt time.Time `json:"acknowledged_at,omitzero"`
	Note           string    `json:"note,omitzero"`
	ResolvedAt     time.Time `json:"resolved_at,omitzero"`
	ResolvedBy     string    `json:"resolved_by,omitzero"`
	Reopens        int       `json:"reopens"`
	BreakerTripped time.Time `json:"breaker_tripped_at,omitzero"`
	BreakerResumed time.Time `json:"breaker_resumed_at,omitzero"`
}

func toIncident(i store.Incident) incidentJSON {
	return incidentJSON{ID: i.ID, Destination: i.Destination, Kind: i.Kind, State: i.State, FirstSeen: i.FirstSeen, LastSeen: i.LastSeen,
		Attempts: i.Attempts, Events: i.Events, LatestError: i.LatestError, SampleEventIDs: i.Sample, HealthySince: i.HealthySince,
		EscalatedAt: i.EscalatedAt, AcknowledgedBy: i.AcknowledgedBy, AcknowledgedAt: i.AcknowledgedAt, Note: i.Note,
		ResolvedAt: i.ResolvedAt, ResolvedBy: i.ResolvedBy, Reopens: i.Reopens, BreakerTripped: i.BreakerTrippedAt, BreakerResumed: i.BreakerResumedAt}
}

// GET /api/incidents?state=&destination=&limit=&cursor=
func (a *API) listIncidents(w http.ResponseWriter, r *http.Request) error {
	q := a.query(r)
	q.only("state", "destination", "limit", "cursor")
	f := store.IncidentFilter{State: q.str("state"), Destination: q.str("destination"), Limit: q.limit(), Cursor: q.str("cursor")}
	switch f.State {
	case "", store.IncidentOpen, store.IncidentAcknowledged, store.IncidentResolved, "unresolved":
	default:
		q.fail(badParam("state", "unknown state %q (want open, acknowledged, resolved or unresolved)", f.State))
	}
	if q.err != nil {
		return q.err
	}
	is, next, err := a.store.ListIncidents(r.Context(), f)
	if err != nil {
		return err
	}
	out := listJSON[incidentJSON]{Items: make([]incidentJSON, 0, len(is)), NextCursor: next}
	for _, i := range is {
		out.Items = append(out.Items, toIncident(i))
	}
	return writeJSON(w, http.StatusOK, out)
}

// GET /api/incidents/{id}
func (a *API) getIncident(w http.ResponseWriter, r *http.Request) error {
	i, err := a.store.Incident(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, toIncident(i))
}

type incidentActionRequest struct {
	Note string `json:"note"`
}

// POST /api/incidents/{id}/acknowledge {"note": "…"}
func (a *API) acknowledgeIncident(w http.ResponseWriter, r *http.Request) error {
	return a.actIncident(w, r, true)
}

// POST /api/incidents/{id}/resolve {"note": "…"}
func (a *API) resolveIncident(w http.ResponseWriter, r *http.Request) error {
	return a.actIncident(w, r, false)
}

func (a *API) actIncident(w http.ResponseWriter, r *http.Request, ack bool) error {
	var req incidentActionRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	note, err := store.CheckReason(req.Note)
	if err != nil {
		return badParam("note", "%s", trimInvalid(err))
	}
	by := actor(r, note)
	act, verb := a.store.ResolveIncident, "resolved"
	if ack {
		act, verb = a.store.AcknowledgeIncident, "acknowledged"
	}
	i, err := act(r.Context(), r.PathValue("id"), by, a.now())
	if err != nil {
		return err
	}
	a.log.LogAttrs(r.Context(), slog.LevelInfo, "admin: incident "+verb,
		slog.String("incident_id", i.ID), slog.String("destination", i.Destination), slog.String("kind", i.Kind),
		slog.String("actor", by.Name), slog.String("note", by.Reason))
	if !ack && a.onIncident != nil {
		a.onIncident(store.IncidentChange{Change: store.ChangeResolved, Incident: i})
	}
	return writeJSON(w, http.StatusOK, toIncident(i))
}
