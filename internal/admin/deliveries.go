package admin

import (
	"context"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// GET /api/deliveries?status=&destination=&source=&since=&until=&limit=&cursor=
func (a *API) listDeliveries(w http.ResponseWriter, r *http.Request) error {
	q := a.query(r)
	q.only("status", "destination", "source", "since", "until", "limit", "cursor")
	f := store.DeliveryFilter{
		Status:      q.status("status"),
		Destination: q.str("destination"),
		Source:      q.str("source"),
		Since:       q.time("since"),
		Until:       q.time("until"),
		Limit:       q.limit(),
		Cursor:      q.str("cursor"),
	}
	q.window(f.Since, f.Until)
	if q.err != nil {
		return q.err
	}
	ds, next, err := a.store.ListDeliveries(r.Context(), f)
	if err != nil {
		return err
	}
	if len(ds) == 0 && f.Cursor == "" {
		if err := a.knownDestination(r.Context(), f.Destination); err != nil {
			return err
		}
	}
	if err := store.FillWaitsBehind(r.Context(), a.store, ds, a.inOrder); err != nil {
		return err
	}
	out := listJSON[deliveryJSON]{Items: make([]deliveryJSON, 0, len(ds)), NextCursor: next}
	for _, d := range ds {
		out.Items = append(out.Items, a.toDelivery(d, false))
	}
	return writeJSON(w, http.StatusOK, out)
}

// knownDestination refuses a destination filter that names no destination
// at all, rather than answer an empty list as if it had no deliveries: a
// destination is known when it is configured, or when deliveries to it
// remain (one since removed from the config).
func (a *API) knownDestination(ctx context.Context, dest string) error {
	if dest == "" || a.known[dest] {
		return nil
	}
	ds, _, err := a.store.ListDeliveries(ctx, store.DeliveryFilter{Destination: dest, Limit: 1})
	if err != nil || len(ds) > 0 {
		return err
	}
	return badParam("destination", "unknown destination %q (configured: %s)", dest, strings.Join(a.dests, ", "))
}

type resolveRequest struct {
	Action string `json:"action"`
	Reason string `json:"reason"`
}

// POST /api/deliveries/{id}/resolve {"action": "resend"|"mark_delivered"|"discard", "reason": "…"}
func (a *API) resolve(w http.ResponseWriter, r *http.Request) error {
	var req resolveRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	switch req.Action {
	case store.ActionResend, store.ActionMarkDelivered, store.ActionDiscard:
	case "":
		return badParam("action", "required: resend, mark_delivered or discard")
	default:
		return badParam("action", "unknown action %q (want resend, mark_delivered or discard)", req.Action)
	}
	reason, err := checkReason(req.Reason)
	if err != nil {
		return err
	}
	by := actor(r, reason)
	d, err := a.store.Resolve(r.Context(), r.PathValue("id"), req.Action, by)
	if err != nil {
		return err
	}
	if req.Action == store.ActionResend {
		a.queue()
	}
	a.log.LogAttrs(r.Context(), slog.LevelInfo, "admin: delivery resolved",
		slog.String("delivery_id", d.ID), slog.String("event_id", d.EventID),
		slog.String("destination", d.Destination), slog.String("action", req.Action),
		slog.String("status", string(d.Status)), slog.String("actor", by.Name), slog.String("reason", by.Reason))
	return writeJSON(w, http.StatusOK, a.toDelivery(d, false))
}

type destinationJSON struct {
	Name string `json:"name"`
	// Paused is true while its deliveries wait: paused by a person, or
	// by its breaker (auto_pause); PausedBy says which ("person" when
	// both), and Breaker is the breaker's state while it is tripped.
	Paused   bool         `json:"paused"`
	PausedBy string       `json:"paused_by,omitempty"`
	Breaker  *breakerJSON `json:"breaker,omitempty"`
	Sources  []string     `json:"sources"`
	// Configured is false for a destination the config no longer names
	// that still has unfinished deliveries (orphaned: they wait, and
	// resume when the destination is configured again).
	Configured bool `json:"configured"`
	// Unfinished counts an orphaned destination's deliveries by status.
	Unfinished map[anyhook.DeliveryStatus]int `json:"unfinished,omitzero"`
	Reach
}

// Reach says how a destination is reached, never with a secret: its
// type, the kind of its credential, the names of its static headers, whether it presents
// a client certificate, and its proxy without user or password.
type Reach struct {
	Type       string   `json:"type,omitempty"`    // http, nats, rabbitmq, kafka or pull
	Auth       string   `json:"auth,omitempty"`    // bearer, basic or oauth2; "": none
	Headers    []string `json:"headers,omitempty"` // names only
	ClientCert bool     `json:"client_cert,omitempty"`
	Proxy      string   `json:"proxy,omitempty"` // scheme://host:port; "": the environment's
}

// breakerJSON is a tripped breaker: when, why, and when one delivery is
// tried next.
type breakerJSON struct {
	TrippedAt   time.Time `json:"tripped_at"`
	Reason      string    `json:"reason"`
	NextProbeAt time.Time `json:"next_probe_at"`
}

// pausedBy fills d's pause from paused (a person's) and breakers.
func (d *destinationJSON) pausedBy(paused map[string]bool, breakers map[string]store.Breaker) {
	b, tripped := breakers[d.Name]
	if tripped {
		d.Breaker = &breakerJSON{TrippedAt: b.TrippedAt, Reason: b.Reason, NextProbeAt: b.NextProbe}
	}
	switch {
	case paused[d.Name]:
		d.Paused, d.PausedBy = true, "person"
	case tripped:
		d.Paused, d.PausedBy = true, "breaker"
	}
}

type destinationsResponse struct {
	Items      []destinationJSON `json:"items"`
	NextCursor string            `json:"next_cursor"`
	// Counts is the number of deliveries per status over all destinations
	// (one grouped query; per-destination counts would not be cheap).
	Counts map[anyhook.DeliveryStatus]int `json:"counts"`
}

// GET /api/destinations
func (a *API) listDestinations(w http.ResponseWriter, r *http.Request) error {
	paused, err := a.store.Paused(r.Context())
	if err != nil {
		return err
	}
	breakers, err := a.store.Breakers(r.Context())
	if err != nil {
		return err
	}
	counts, err := a.store.Counts(r.Context())
	if err != nil {
		return err
	}
	if counts == nil {
		counts = map[anyhook.DeliveryStatus]int{}
	}
	out := destinationsResponse{Items: make([]destinationJSON, 0, len(a.dests)), Counts: counts}
	for _, name := range a.dests {
		d := destinationJSON{Name: name, Sources: []string{}, Configured: true, Reach: a.reach[name]}
		d.pausedBy(paused, breakers)
		for src, ds := range a.sources {
			for _, x := range ds {
				if x == name {
					d.Sources = append(d.Sources, src)
					break
				}
			}
		}
		slices.Sort(d.Sources)
		out.Items = append(out.Items, d)
	}
	qs, err := a.store.QueueStats(r.Context(), nil)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(qs.Depth)) {
		if !a.known[name] {
			d := destinationJSON{Name: name, Sources: []string{}, Unfinished: qs.Depth[name]}
			d.pausedBy(paused, breakers)
			out.Items = append(out.Items, d)
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// POST /api/destinations/{name}/pause
func (a *API) pause(w http.ResponseWriter, r *http.Request) error { return a.setPaused(w, r, true) }

// POST /api/destinations/{name}/resume
func (a *API) resume(w http.ResponseWriter, r *http.Request) error { return a.setPaused(w, r, false) }

func (a *API) setPaused(w http.ResponseWriter, r *http.Request, paused bool) error {
	name := r.PathValue("name")
	if !a.known[name] {
		return &Error{Status: http.StatusNotFound, Code: "not_found",
			Message: "unknown destination " + strconv.Quote(name) + " (configured: " + strings.Join(a.dests, ", ") + ")"}
	}
	if err := a.store.SetPaused(r.Context(), name, paused); err != nil {
		return err
	}
	// A person's resume also clears a pause by the breaker (auto_pause):
	// they have seen the destination and want it delivered to now.
	cleared := false
	if !paused {
		var err error
		if cleared, err = a.store.ResetBreaker(r.Context(), name); err != nil {
			return err
		}
		a.queue()
	}
	if cleared && a.onBreakerCleared != nil {
		a.onBreakerCleared(name, actor(r, "").Name, a.now())
	}
	a.log.LogAttrs(r.Context(), slog.LevelInfo, "admin: destination pause changed",
		slog.String("destination", name), slog.Bool("paused", paused), slog.Bool("breaker_cleared", cleared),
		slog.String("actor", actor(r, "").Name))
	return writeJSON(w, http.StatusOK, struct {
		Name           string `json:"name"`
		Paused         bool   `json:"paused"`
		BreakerCleared bool   `json:"breaker_cleared"`
	}{name, paused, cleared})
}

type discardRequest struct {
	Reason string `json:"reason"`
}

type discardResponse struct {
	Destination string `json:"destination"`
	Count       int    `json:"count"`
}

// POST /api/destinations/{name}/discard {"reason": "..."}
//
// Discards every pending (paused included), held and dead delivery of a
// destination the config no longer names (orphaned): each becomes
// resolved (discarded) with an action recording who and why. A
// configured destination is refused: its deliveries are discarded one by
// one from the dead and held queues.
func (a *API) discardDestination(w http.ResponseWriter, r *http.Request) error {
	var req discardRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	name := r.PathValue("name")
	if a.known[name] {
		return &Error{Status: http.StatusBadRequest, Code: "invalid",
			Message: "destination " + strconv.Quote(name) + " is configured; only an orphaned destination's deliveries are discarded in bulk (resolve this one's from the dead and held queues)"}
	}
	reason, err := checkReason(req.Reason)
	if err != nil {
		return err
	}
	by := actor(r, reason)
	n, err := a.store.DiscardDestination(r.Context(), name, by)
	if err != nil {
		return err
	}
	a.log.LogAttrs(r.Context(), slog.LevelInfo, "admin: orphaned destination discarded",
		slog.String("destination", name), slog.Int("count", n), slog.String("actor", by.Name), slog.String("reason", by.Reason))
	return writeJSON(w, http.StatusOK, discardResponse{Destination: name, Count: n})
}
