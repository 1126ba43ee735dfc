package dashboard

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/anyhook/anyhook/internal/incident"
	"github.com/anyhook/anyhook/internal/store"
)

// IncidentReader is what the incident pages read of the store.
type IncidentReader interface {
	Incident(ctx context.Context, id string) (store.Incident, error)
	ListIncidents(ctx context.Context, f store.IncidentFilter) ([]store.Incident, string, error)
}

type incidentsData struct {
	State       string // the filter: unresolved (the default), resolved or all
	Destination string
	States      []string
	Rows        []incidentRow
	NextURL     string
	FirstURL    string
	Paged       bool
}

type incidentRow struct {
	store.Incident
	What string // the kind in words
}

// NavKey marks the page in the navigation.
func (incidentsData) NavKey() string { return "incidents" }

// incidentStates are the incidents page's filters, in the order shown.
var incidentStates = []string{"unresolved", store.IncidentOpen, store.IncidentAcknowledged, store.IncidentResolved, "all"}

// GET /incidents?state=&destination=&cursor=
func (d *Dashboard) incidents(w http.ResponseWriter, r *http.Request) error {
	v := r.URL.Query()
	if err := onlyParams(v, nil, "state", "destination", "cursor"); err != nil {
		return err
	}
	state := strings.TrimSpace(v.Get("state"))
	if state == "" {
		state = "unresolved"
	}
	f := store.IncidentFilter{State: state, Destination: strings.TrimSpace(v.Get("destination")), Cursor: strings.TrimSpace(v.Get("cursor")), Limit: 100}
	switch state {
	case "all":
		f.State = ""
	case "unresolved", store.IncidentOpen, store.IncidentAcknowledged, store.IncidentResolved:
	default:
		return &pageError{http.StatusBadRequest, "unknown state " + state + " (want " + strings.Join(incidentStates, ", ") + ")"}
	}
	is, next, err := d.opt.Store.ListIncidents(r.Context(), f)
	if err != nil {
		return err
	}
	data := incidentsData{State: state, Destination: f.Destination, States: incidentStates, Paged: f.Cursor != ""}
	for _, i := range is {
		data.Rows = append(data.Rows, incidentRow{i, incident.Describe(i.Kind)})
	}
	q := url.Values{}
	if state != "unresolved" {
		q.Set("state", state)
	}
	if f.Destination != "" {
		q.Set("destination", f.Destination)
	}
	data.FirstURL = "/incidents"
	if len(q) > 0 {
		data.FirstURL += "?" + q.Encode()
	}
	if next != "" {
		q.Set("cursor", next)
		data.NextURL = "/incidents?" + q.Encode()
	}
	d.render(w, r, http.StatusOK, "incidents", "Incidents", data)
	return nil
}

type incidentData struct {
	incidentRow
	Open     bool // open: it can be acknowledged
	Resolved bool
	For      time.Duration // how long it has lasted (until resolved)
	// PausedBy is "a person" or "its breaker" while the destination is
	// paused: its failing deliveries then wait as paused, not dead, and
	// the page links that list.
	PausedBy string
	CanAct   bool // the session may act: acknowledge, resolve
}

// NavKey marks the page in the navigation.
func (incidentData) NavKey() string { return "incidents" }

// GET /incidents/{id}
func (d *Dashboard) incidentPage(w http.ResponseWriter, r *http.Request) error {
	i, err := d.opt.Store.Incident(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	end := d.now()
	if !i.ResolvedAt.IsZero() {
		end = i.ResolvedAt
	}
	data := incidentData{incidentRow: incidentRow{i, incident.Describe(i.Kind)}, Open: i.State == store.IncidentOpen,
		Resolved: i.State == store.IncidentResolved, For: end.Sub(i.FirstSeen), CanAct: canAct(r)}
	paused, err := d.opt.Store.Paused(r.Context())
	if err != nil {
		return err
	}
	breakers, err := d.opt.Store.Breakers(r.Context())
	if err != nil {
		return err
	}
	if _, ok := breakers[i.Destination]; ok {
		data.PausedBy = "its breaker"
	} else if paused[i.Destination] {
		data.PausedBy = "a person"
	}
	d.render(w, r, http.StatusOK, "incident", "Incident: "+i.Destination+" "+i.Kind, data)
	return nil
}

// POST /incidents/{id}/{action} note=… (action: acknowledge or resolve)
func (d *Dashboard) actIncident(w http.ResponseWriter, r *http.Request) error {
	if err := parseForm(w, r); err != nil {
		return err
	}
	id, action := r.PathValue("id"), r.PathValue("action")
	done := map[string]string{"acknowledge": "acknowledged", "resolve": "resolved"}[action]
	if done == "" {
		return &pageError{http.StatusNotFound, "unknown action " + action}
	}
	res, err := d.callAPI(r, "POST", "/api/incidents/"+url.PathEscape(id)+"/"+action, map[string]string{"note": r.PostForm.Get("note")}, nil)
	if err != nil {
		return err
	}
	if !res.ok() {
		setFlash(w, r, true, "Incident "+id+": "+res.message())
	} else {
		setFlash(w, r, false, "Incident "+id+" "+done+".")
	}
	back(w, r, "/incidents/"+url.PathEscape(id))
	return nil
}

// openIncidents are the unresolved incidents, newest first, for the
// overview's top (at most a page of them).
func (d *Dashboard) openIncidents(ctx context.Context) ([]incidentRow, error) {
	is, _, err := d.opt.Store.ListIncidents(ctx, store.IncidentFilter{State: "unresolved", Limit: 20})
	var rows []incidentRow
	for _, i := range is {
		rows = append(rows, incidentRow{i, incident.Describe(i.Kind)})
	}
	return rows, err
}
