package admin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/delivery"
	routes "github.com/anyhook/anyhook/internal/route"
	"github.com/anyhook/anyhook/internal/store"
)

// GET /api/events?source=&type=&status=&q=&since=&until=&limit=&cursor=
func (a *API) listEvents(w http.ResponseWriter, r *http.Request) error {
	q := a.query(r)
	q.only("source", "type", "status", "q", "body", "filter", "since", "until", "limit", "cursor")
	f := store.EventFilter{
		Source: q.str("source"),
		Type:   q.str("type"),
		Status: q.status("status"),
		Q:      q.str("q"),
		Since:  q.time("since"),
		Until:  q.time("until"),
		Limit:  q.limit(),
		Cursor: q.str("cursor"),
	}
	q.window(f.Since, f.Until)
	match := bodyQuery(q, &f)
	if q.err != nil {
		return q.err
	}
	if match != nil {
		return a.searchBodies(w, r, f, match)
	}
	// q is whichever id a person has: the event's own, a delivery's, or
	// the provider's.
	var evs []anyhook.Event
	var next string
	ev, found, err := store.SearchByID(r.Context(), a.store, f)
	if err != nil {
		return err
	}
	if found {
		evs = []anyhook.Event{ev}
	} else if evs, next, err = a.store.ListEvents(r.Context(), f); err != nil {
		return err
	}
	var searched *searchedJSON
	if f.Q != "" && !found && len(evs) == 0 {
		// No exact match: a prefix of an id, over a bounded window.
		g := f
		g.Q, g.Prefix = "", f.Q
		var sr store.Searched
		if evs, next, sr, err = store.SearchPrefix(r.Context(), a.store, g, a.now()); err != nil {
			return err
		}
		searched = &searchedJSON{Complete: sr.Complete}
		if !sr.Complete {
			searched.BackTo = &sr.BackTo
		}
	}
	out := eventListJSON{listJSON: listJSON[eventJSON]{Items: make([]eventJSON, 0, len(evs)), NextCursor: next}, Searched: searched}
	for _, ev := range evs {
		out.Items = append(out.Items, a.toEvent(ev, false))
	}
	if f.Q != "" && len(evs) == 0 && f.Cursor == "" {
		// Found nothing: perhaps it was refused (a bad signature, a
		// typo in the source's URL).
		if out.Rejections, err = store.RejectionHint(r.Context(), a.store, f.Source, f.Q); err != nil {
			return err
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// bodyQuery reads body= and filter= of GET /api/events: the predicate
// of a search inside the bodies, or nil when neither is given.
// A q of body:… or filter:… is the same search (BodySearch), and is
// taken out of f.
func bodyQuery(q *query, f *store.EventFilter) store.Matcher {
	body, filter := q.v.Get("body"), strings.TrimSpace(q.v.Get("filter"))
	inQ := false
	if b, fl, ok := BodySearch(f.Q); ok {
		if body != "" || filter != "" {
			q.fail(badParam("q", "%s and body= or filter=: give one", f.Q))
			return nil
		}
		if b == "" && fl == "" {
			q.fail(badParam("q", "%q: say what to look for after the colon", f.Q))
			return nil
		}
		body, filter, f.Q = b, fl, ""
		inQ = true
	}
	if body == "" && filter == "" {
		return nil
	}
	match, err := BodyMatcher(body, filter)
	if err != nil {
		if inQ {
			// The parameter given was q: "q: filter: …" names it, and
			// which part of it.
			err = badParam("q", "%s", err.Message)
		}
		q.fail(err)
		return nil
	}
	switch {
	case f.Status != "":
		q.fail(badParam("status", "a search inside the bodies walks receive time and cannot take status; search first, then open the events"))
	case f.Q != "":
		q.fail(badParam("q", "search by id or inside the bodies, not both"))
	case f.Cursor != "":
		q.fail(badParam("cursor", "a search inside the bodies continues with until=searched.back_to, not a cursor"))
	}
	return match
}

// MaxBodyText bounds body=, the text a search looks for in the bodies.
const MaxBodyText = 1024

// BodyMatcher is the predicate of a search inside the bodies (GET
// /api/events?body=&filter=, the dashboard's body: and filter:): the
// body holds the bytes of body, and the CEL expression filter (the
// language and variables of a destination's filter, route.Compile) is
// true; either may be "". Its error names the parameter.
func BodyMatcher(body, filter string) (store.Matcher, *Error) {
	if len(body) > MaxBodyText {
		return nil, badParam("body", "longer than %d bytes", MaxBodyText)
	}
	var cel *routes.Filter
	if filter != "" {
		var err error
		if cel, err = routes.Compile(filter); err != nil {
			return nil, badParam("filter", "%s", err)
		}
	}
	needle := []byte(body)
	return func(ev *anyhook.Event) (bool, uint64) {
		if !bytes.Contains(ev.Body, needle) {
			return false, 0
		}
		if cel == nil {
			return true, 0
		}
		// An evaluation that fails (over the cost limit, a field of the
		// wrong type) is no match, as it is for a destination.
		ok, cost, err := cel.MatchCost(routes.NewInput(routes.FromEvent(ev)))
		return err == nil && ok, cost
	}, nil
}

// searchBodies answers GET /api/events?body=&filter=: the matching events
// of the bounded window (store.SearchBodies), and how far back it looked.
func (a *API) searchBodies(w http.ResponseWriter, r *http.Request, f store.EventFilter, match store.Matcher) error {
	evs, sr, err := store.SearchBodies(r.Context(), a.store, f, match, a.now(), store.DefaultBodyBudget)
	if err != nil {
		return err
	}
	searched := &searchedJSON{Complete: sr.Complete}
	if !sr.Complete {
		searched.BackTo = &sr.BackTo
	}
	out := eventListJSON{listJSON: listJSON[eventJSON]{Items: make([]eventJSON, 0, len(evs))}, Searched: searched}
	for _, ev := range evs {
		out.Items = append(out.Items, a.toEvent(ev, false))
	}
	return writeJSON(w, http.StatusOK, out)
}

// eventListJSON is a page of events; a search by q that found none says
// how many refused requests q names (GET /api/rejections?q=).
type eventListJSON struct {
	listJSON[eventJSON]
	Rejections int           `json:"rejections,omitempty"`
	Searched   *searchedJSON `json:"searched,omitempty"`
}

// searchedJSON says how far back a search by id prefix or inside the
// bodies looked: back_to,
// when not complete, is the receive time before which it did not look
// (ask again with until=back_to to look further back).
type searchedJSON struct {
	Complete bool       `json:"complete"`
	BackTo   *time.Time `json:"back_to,omitempty"`
}

// GET /api/events/{id}
func (a *API) getEvent(w http.ResponseWriter, r *http.Request) error {
	ev, err := a.store.Event(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	if err := store.FillWaitsBehind(r.Context(), a.store, ev.Deliveries, a.inOrder); err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, a.toEvent(ev, true))
}

type replayEventRequest struct {
	Destination string `json:"destination"`
	// Source is the source of a provider event id: such an id is unique
	// within one source only.
	Source string `json:"source"`
	Reason string `json:"reason"`
	// IgnoreFilters sends a replay without a destination to every
	// destination of the source, whatever their filters say.
	IgnoreFilters bool `json:"ignore_filters"`
}

type replayEventResponse struct {
	EventID string `json:"event_id"`
	// Matched says which of the event's ids the path named: event_id,
	// delivery_id or provider_event_id.
	Matched    string         `json:"matched"`
	Deliveries []deliveryJSON `json:"deliveries"`
}

// candidateJSON is one event an ambiguous provider event id names.
type candidateJSON struct {
	EventID    string    `json:"event_id"`
	Source     string    `json:"source"`
	ReceivedAt time.Time `json:"received_at"`
}

// ambiguous is the 409 of a provider event id that events of several
// sources have: the candidates, and how to pick one.
func ambiguous(e *store.AmbiguousError) *Error {
	cands := make([]candidateJSON, len(e.Candidates))
	for i, c := range e.Candidates {
		cands[i] = candidateJSON{EventID: c.ID, Source: c.Source, ReceivedAt: c.ReceivedAt}
	}
	return &Error{Status: http.StatusConflict, Code: "ambiguous_id",
		Message: e.Error() + `; name one with "source" (` + strings.Join(e.Sources(), ", ") + `), or use its event_id`,
		Details: map[string]any{"candidates": cands}}
}

// POST /api/events/{id}/replay {"destination": "...", "source": "..."}
//
// id is whichever id a person has, as the command line takes it: the
// event's own, a delivery's (then that delivery's destination), or the
// provider's (with "source" when events of several sources have it).
func (a *API) replayEvent(w http.ResponseWriter, r *http.Request) error {
	var req replayEventRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	req.Destination = strings.TrimSpace(req.Destination)
	pull := !principal(r).Admin()
	if pull {
		// Before the destination is looked up: a pull token learns
		// nothing of the others.
		d, err := pullOnly(r, req.Destination)
		if err != nil {
			return err
		}
		req.Destination = d
	}
	if req.Destination != "" && !a.known[req.Destination] {
		return badParam("destination", "unknown destination %q (configured: %s)", req.Destination, strings.Join(a.dests, ", "))
	}
	reason, err := checkReason(req.Reason)
	if err != nil {
		return err
	}
	by := actor(r, reason)
	req.Source = strings.TrimSpace(req.Source)
	if p := store.TextProblem(req.Source); p != "" {
		return badParam("source", "%s", p)
	}
	found, err := store.Resolve(r.Context(), a.store, r.PathValue("id"), req.Source, slices.Sorted(maps.Keys(a.sources)))
	var amb *store.AmbiguousError
	if errors.As(err, &amb) && pull {
		// The candidates are events of other destinations too.
		return &Error{Status: http.StatusConflict, Code: "ambiguous_id",
			Message: "events of several sources have this id; name one with \"source\", or use its event_id"}
	}
	if errors.As(err, &amb) {
		return ambiguous(amb)
	}
	if err != nil {
		return err
	}
	ev := found.Event
	dest := req.Destination
	if dest == "" && found.Via != nil {
		dest = found.Via.Destination // a delivery id: that delivery's destination
	}
	if pull && !a.eventOf(ev, dest) {
		// As if it did not exist: a pull token learns nothing of other
		// destinations' events, not even that an id is one.
		return &Error{Status: http.StatusNotFound, Code: "not_found",
			Message: "event " + clip(r.PathValue("id")) + " of destination " + dest + ": not found"}
	}
	dests, err := a.replayTargets(ev, dest, req.IgnoreFilters)
	if err != nil {
		return err
	}
	ds, err := a.store.Replay(r.Context(), ev.ID, dests, by)
	if err != nil {
		return err
	}
	a.queue()
	a.log.LogAttrs(r.Context(), slog.LevelInfo, "admin: event replayed",
		slog.String("event_id", ev.ID), slog.String("source", ev.Source), slog.Any("destinations", dests),
		slog.String("actor", by.Name), slog.String("reason", by.Reason))
	out := replayEventResponse{EventID: ev.ID, Matched: found.Matched, Deliveries: make([]deliveryJSON, 0, len(ds))}
	for _, d := range ds {
		out.Deliveries = append(out.Deliveries, a.toDelivery(d, false))
	}
	return writeJSON(w, http.StatusAccepted, out)
}

// eventOf reports whether ev is an event of dest, for a pull token's
// replay: dest had a delivery of it, or receives its source and its
// filter accepts it now.
func (a *API) eventOf(ev anyhook.Event, dest string) bool {
	for _, d := range ev.Deliveries {
		if d.Destination == dest {
			return true
		}
	}
	if !slices.Contains(a.sources[ev.Source], dest) {
		return false
	}
	ok, _ := routes.Split(a.filters, routes.NewInput(routes.FromEvent(&ev)), []string{dest}, nil)
	return len(ok) == 1
}

// replayTargets says where a replay of ev goes: dest alone, if it receives
// ev's source (or ev already had a delivery to it), whatever its filter
// says; without dest, every configured destination of the source whose
// filter accepts ev now (all of them with ignoreFilters), or, when the
// source is no longer configured, the configured destinations ev was
// delivered to.
func (a *API) replayTargets(ev anyhook.Event, dest string, ignoreFilters bool) ([]string, error) {
	had := map[string]bool{}
	for _, d := range ev.Deliveries {
		had[d.Destination] = true
	}
	ofSource, configured := a.sources[ev.Source]
	if dest != "" {
		if slices.Contains(ofSource, dest) || had[dest] {
			return []string{dest}, nil
		}
		return nil, badParam("destination", "destination %q does not receive source %q", dest, ev.Source)
	}
	var dests []string
	var filtered []string
	if configured {
		dests = slices.Clone(ofSource)
		if !ignoreFilters && len(a.filters) > 0 {
			dests, filtered = routes.Split(a.filters, routes.NewInput(routes.FromEvent(&ev)), dests, nil)
		}
	} else {
		for _, d := range a.dests {
			if had[d] {
				dests = append(dests, d)
			}
		}
	}
	if len(dests) == 0 && len(filtered) > 0 {
		return nil, &Error{Status: http.StatusBadRequest, Code: "invalid",
			Message: "no destination's filter accepts the event (" + strings.Join(filtered, ", ") + "); name one with \"destination\", or set \"ignore_filters\": true"}
	}
	if len(dests) == 0 {
		return nil, &Error{Status: http.StatusBadRequest, Code: "invalid",
			Message: "source " + ev.Source + " has no configured destinations; name one with \"destination\""}
	}
	return dests, nil
}

type bulkReplayRequest struct {
	Source      string `json:"source"`
	Status      string `json:"status"`
	Destination string `json:"destination"`
	Since       string `json:"since"`
	Until       string `json:"until"`
	DryRun      bool   `json:"dry_run"`
	Reason      string `json:"reason"`
	// Filter, a CEL expression over the event (a destination's filter
	// language), keeps the deliveries of the events it accepts among
	// those received from since to until (required since).
	Filter string `json:"filter"`
	// Search, the name of a saved search (of body: or filter:), replays
	// the events it finds as Filter does; it brings its own source, so
	// neither filter, source nor status goes with it.
	Search string `json:"search"`
	// Force replays into destinations that are paused or failing, which
	// is otherwise refused (409) naming them.
	Force bool `json:"force"`
}

type bulkReplayResponse struct {
	Count int `json:"count"`
	// Matched is how many events filter accepted (with a filter only).
	Matched *int            `json:"matched_events,omitempty"`
	DryRun  bool            `json:"dry_run"`
	Skipped []skippedReplay `json:"skipped"`
	// Troubled are the destinations the replay sends (or would send)
	// into while they are paused or failing: a dry run says so, and so
	// does a forced replay.
	Troubled []TroubledDestination `json:"troubled,omitempty"`
}

// TroubledDestination is a destination a replay would send into while it
// cannot take it, as the API (and anyhook replay --json) names it.
type TroubledDestination struct {
	Destination string `json:"destination"`
	Reason      string `json:"reason"` // paused or failing
	Detail      string `json:"detail"`
}

// troubledNames are the names of ts, for the log.
func troubledNames(ts []store.Troubled) []string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Destination
	}
	return names
}

// TroubledDestinations are ts as the API names them.
func TroubledDestinations(ts []store.Troubled) []TroubledDestination {
	var out []TroubledDestination
	for _, t := range ts {
		out = append(out, TroubledDestination{Destination: t.Destination, Reason: t.Reason(), Detail: t.String()})
	}
	return out
}

// failing says whether and how destination fails (Failing).
func (a *API) failing(ctx context.Context, destination string) (string, error) {
	return Failing(a.health, a.store)(ctx, destination)
}

// Failing says whether and how a destination fails, for store.Trouble: as
// this process's delivery engine saw it (health; its latest attempts
// failed, none succeeded since), or, for a destination it attempted none
// of (or with health nil), as the store holds it (store.LatestFailure).
// The admin API and the dashboard judge a replay's destinations alike
// with it.
func Failing(health func() map[string]delivery.Health, st store.TroubleReader) func(ctx context.Context, destination string) (string, error) {
	return func(ctx context.Context, destination string) (string, error) {
		if health != nil {
			if h, ok := health()[destination]; ok {
				switch h.Streak {
				case 0:
					return "", nil
				case 1:
					return fmt.Sprintf("its latest attempt, at %s, failed (%s), and none has succeeded since", h.Since.UTC().Format(time.RFC3339), h.LastError), nil
				}
				return fmt.Sprintf("its last %d attempts failed, since %s (last error: %s), and none has succeeded since",
					h.Streak, h.Since.UTC().Format(time.RFC3339), h.LastError), nil
			}
		}
		return store.LatestFailure(ctx, st, destination)
	}
}

// replayTrouble returns the destinations of f.Destinations (or
// f.Destination) that are paused or failing and that f selects deliveries
// of: where a bulk replay would burn attempts, or wait.
func (a *API) replayTrouble(ctx context.Context, f store.DeliveryFilter) ([]store.Troubled, error) {
	dests := f.Destinations
	if f.Destination != "" {
		dests = []string{f.Destination}
	}
	ts, err := store.Trouble(ctx, a.store, dests, a.failing)
	if err != nil || len(ts) == 0 {
		return nil, err
	}
	selected, err := store.Selected(ctx, a.store, f, troubledNames(ts))
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(ts, func(t store.Troubled) bool { return !slices.Contains(selected, t.Destination) }), nil
}

// skippedReplay is a selected event a bulk replay left alone, and why.
type skippedReplay struct {
	EventID string `json:"event_id"`
	Reason  string `json:"reason"` // "pruned": retention removed its body
}

func skipped(pruned []string) []skippedReplay {
	out := make([]skippedReplay, len(pruned))
	for i, id := range pruned {
		out[i] = skippedReplay{EventID: id, Reason: "pruned"}
	}
	return out
}

// POST /api/replay {"source","status","destination","since","until","dry_run"}
//
// It replays every delivery the filter selects (since/until bound the
// delivery's creation time). An empty filter is refused: it would replay
// everything ever received.
func (a *API) bulkReplay(w http.ResponseWriter, r *http.Request) error {
	var req bulkReplayRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	q := &query{now: a.now()}
	dest, err := pullOnly(r, strings.TrimSpace(req.Destination)) // a pull token's own destination
	if err != nil {
		return err
	}
	f := store.DeliveryFilter{
		Source:      strings.TrimSpace(req.Source),
		Status:      anyhook.DeliveryStatus(strings.TrimSpace(req.Status)),
		Destination: dest,
		Since:       parseTime(q, "since", strings.TrimSpace(req.Since)),
		Until:       parseTime(q, "until", strings.TrimSpace(req.Until)),
	}
	if p := store.TextProblem(f.Source); p != "" {
		q.fail(badParam("source", "%s", p)) // PostgreSQL would fail the query; no source has such a name
	}
	if f.Status != "" && !f.Status.Valid() {
		q.fail(badParam("status", "unknown status %q (a bulk replay takes %s)", f.Status, statusList(store.ReplayStatuses)))
	}
	if why := store.ReplayRefusal(f.Status); why != "" {
		if f.Status == anyhook.StatusResolved {
			why += "; replay one event with POST /api/events/{id}/replay"
		}
		q.fail(badParam("status", "%s", why))
	}
	reason, err := checkReason(req.Reason)
	if err != nil {
		q.fail(err.(*Error))
	}
	if f.Destination != "" && !a.known[f.Destination] {
		q.fail(badParam("destination", "unknown destination %q (configured: %s)", f.Destination, strings.Join(a.dests, ", ")))
	}
	q.window(f.Since, f.Until)
	filter, search := strings.TrimSpace(req.Filter), strings.TrimSpace(req.Search)
	if (filter != "" || search != "") && !principal(r).Admin() {
		// It reads the bodies of every destination's events: its count
		// would answer questions about them.
		return forbidden(principal(r), "may not replay by filter or saved search, which search the bodies of every destination's events; replay by status and time")
	}
	var sel *EventSelection
	switch {
	case search != "":
		for _, c := range []struct{ name, value string }{{"filter", filter}, {"source", f.Source}, {"status", string(f.Status)}} {
			if c.value != "" {
				q.fail(badParam("search", "a saved search selects the events itself: give search or %s, not both", c.name))
			}
		}
		if f.Since.IsZero() {
			q.fail(badParam("since", "a replay by search needs since: it reads the body of every event received from since to until"))
		}
	case filter != "":
		s, perr := FilterSelection(f.Source, filter)
		if perr != nil {
			q.fail(perr)
		} else if f.Since.IsZero() {
			q.fail(badParam("since", "a replay by filter needs since: it reads the body of every event received from since to until"))
		}
		sel = &s
	}
	if f.Destination == "" && f.Source == "" && f.Status == "" && f.Since.IsZero() && f.Until.IsZero() {
		q.fail(&Error{Status: http.StatusBadRequest, Code: "invalid",
			Message: "an empty filter would replay every delivery; give at least one of source, status, destination, since, until"})
	}
	if q.err != nil {
		return q.err
	}
	if search != "" {
		s, err := SearchSelection(r.Context(), a.store, search)
		if err != nil {
			return err
		}
		sel, f.Source, f.Status = &s, s.Source, s.Status
	}
	var matched *int
	if sel != nil {
		ids, err := FilterEvents(r.Context(), a.store, *sel, f.Since, f.Until, a.now())
		if err != nil {
			return err
		}
		// The filter's window is the events' receive time; the deliveries
		// are those of the events it matched, whenever created.
		f.EventIDs, f.Since, f.Until = ids, time.Time{}, time.Time{}
		n := len(ids)
		matched = &n
	}
	if f.Destination == "" {
		// Only destinations a dispatcher takes: a replay queued for one the
		// config no longer names would wait for ever (discard those).
		f.Destinations = a.dests
	}
	troubled, err := a.replayTrouble(r.Context(), f)
	if err != nil {
		return err
	}
	if req.DryRun {
		res, err := store.DryRunReplay(r.Context(), a.store, f)
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, bulkReplayResponse{Count: res.Count, Matched: matched, DryRun: true, Skipped: skipped(res.Pruned), Troubled: TroubledDestinations(troubled)})
	}
	if len(troubled) > 0 && !req.Force {
		var says []string
		for _, t := range troubled {
			says = append(says, t.String())
		}
		return &Error{Status: http.StatusConflict, Code: "destination_troubled",
			Message: "the replay cannot be delivered now: " + strings.Join(says, "; ") + `. Fix or resume first (a failing destination spends the replays' attempts, and they go dead again), or send "force": true`,
			Details: map[string]any{"destinations": TroubledDestinations(troubled)}}
	}
	by := actor(r, reason)
	res, err := a.store.ReplayDeliveries(r.Context(), f, by)
	if err != nil {
		return err
	}
	a.queue()
	a.log.LogAttrs(r.Context(), slog.LevelInfo, "admin: bulk replay",
		slog.String("source", f.Source), slog.String("status", string(f.Status)),
		slog.String("destination", f.Destination), slog.Time("since", f.Since), slog.Time("until", f.Until),
		slog.String("filter", filter), slog.String("search", search), slog.Int("count", res.Count), slog.Int("skipped_pruned", len(res.Pruned)),
		slog.Any("forced_into", troubledNames(troubled)),
		slog.String("actor", by.Name), slog.String("reason", by.Reason))
	return writeJSON(w, http.StatusAccepted, bulkReplayResponse{Count: res.Count, Matched: matched, Skipped: skipped(res.Pruned), Troubled: TroubledDestinations(troubled)})
}
