package dashboard

import (
	"cmp"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/admin"
	"github.com/anyhook/anyhook/internal/store"
)

type eventRow struct {
	anyhook.Event
	States []store.DeliveryState
}

type eventsData struct {
	Source, Status, Q, Type string
	Sources                 []string
	Statuses                []anyhook.DeliveryStatus
	Rows                    []eventRow
	NextURL                 string
	FirstURL                string
	Paged                   bool // not the first page
	Partial                 string
	// Refused counts the refused requests that Q names, when Q found no
	// event: the event may never have been accepted.
	Refused    int
	RefusedURL string
	// Until is the search's upper receive time (a search continued
	// further back), carried by the form and the pager.
	Until string
	// SearchedBackTo, when set, is how far back a search by id prefix
	// looked (store.SearchPrefix); FurtherURL continues it before then.
	SearchedBackTo time.Time
	FurtherURL     string
	// BodySearch is set when Q is body:… or filter:… (a search inside
	// the bodies, admin.BodySearch); SearchError says why one was refused.
	BodySearch  bool
	SearchError string
	// OtherSource: Source is not in the config (a removed source's
	// events), so the source menu offers it too rather than show "any".
	OtherSource bool
	// Saved are the saved searches, each with its link; SaveQuery is
	// this list's parameters, which "save this search" keeps.
	Saved     []savedSearch
	SaveQuery string
	// CanAct: the session may act (save and delete searches, replay).
	CanAct bool
	// Filter is the CEL of a filter: search; ReplaySince and ReplayUntil
	// are the window it looked at, which its bulk replay covers.
	Filter                   string
	ReplaySince, ReplayUntil string
	ReplayFrom               time.Time
	// Back is this page's URL, where a replay comes back to.
	Back string
}

// savedSearch is a saved search and the events list it opens.
type savedSearch struct {
	store.SavedSearch
	URL string
}

// eventHints say where the filters the events list lacks are.
var eventHints = map[string]func(string) string{
	"destination": func(d string) string {
		return "one destination's deliveries are listed a status at a time at /deliveries?destination=" + url.QueryEscape(d) +
			"&status=dead (or pending, retrying, delivering, held, paused, delivered, resolved; held when none is given)"
	},
}

// eventFilter reads the list's query parameters.
func eventFilter(v url.Values) (store.EventFilter, error) {
	if err := onlyParams(v, eventHints, "source", "status", "type", "q", "until", "cursor"); err != nil {
		return store.EventFilter{}, err
	}
	f := store.EventFilter{
		Source: strings.TrimSpace(v.Get("source")),
		Status: anyhook.DeliveryStatus(strings.TrimSpace(v.Get("status"))),
		Q:      strings.TrimSpace(v.Get("q")),
		Type:   strings.TrimSpace(v.Get("type")),
		Cursor: strings.TrimSpace(v.Get("cursor")),
		Limit:  50,
	}
	if f.Status != "" && !f.Status.Valid() {
		return f, &pageError{http.StatusBadRequest, fmt.Sprintf("unknown status %q", f.Status)}
	}
	if u := strings.TrimSpace(v.Get("until")); u != "" {
		t, err := time.Parse(time.RFC3339Nano, u)
		if err != nil {
			return f, &pageError{http.StatusBadRequest, fmt.Sprintf("until %q is not a time like 2026-01-02T15:04:05Z", u)}
		}
		f.Until = t
	}
	return f, nil
}

// GET /events?source=&status=&q=&type=&until=&cursor=  (X-AnyHook-Partial: rows only)
//
// q is an id, its start, body:<text> or filter:<CEL>.
func (d *Dashboard) events(w http.ResponseWriter, r *http.Request) error {
	f, err := eventFilter(r.URL.Query())
	if err != nil {
		return err
	}
	partial := r.Header.Get("X-AnyHook-Partial") != ""
	// The search box takes whichever id a person has: the event id (what
	// a handler logs as X-AnyHook-Delivery), a delivery id, or the
	// provider's event id, or the start of any of them or of an object.
	// One match opens the event.
	var evs []anyhook.Event
	var next string
	var found bool
	searched := store.Searched{Complete: true}
	status := http.StatusOK
	body, filter, bodySearch := admin.BodySearch(f.Q)
	var searchError string
	if bodySearch {
		// body: and filter: search inside the bodies, bounded as GET
		// /api/events?body=&filter= is.
		match, perr := admin.BodyMatcher(body, filter)
		switch {
		case perr != nil:
			searchError = perr.Message
		case body == "" && filter == "":
			searchError = "say what to look for after " + strings.TrimSuffix(f.Q, " ")
		case f.Status != "":
			searchError = "a search inside the bodies cannot take a delivery status: choose any status"
		}
		if searchError != "" {
			status = http.StatusBadRequest
		} else {
			g := f
			g.Q, g.Cursor = "", ""
			if evs, searched, err = store.SearchBodies(r.Context(), d.opt.Store, g, match, d.now(), store.DefaultBodyBudget); err != nil {
				return err
			}
		}
	} else {
		var ev anyhook.Event
		if ev, found, err = store.SearchByID(r.Context(), d.opt.Store, f); err != nil {
			return err
		}
		if found {
			evs = []anyhook.Event{ev}
		} else if evs, next, err = d.listEvents(r, f); err != nil {
			return err
		}
	}
	if f.Q != "" && !bodySearch && !found && len(evs) == 0 {
		// No exact match: a prefix of an id, over a bounded window, as
		// GET /api/events?q= does.
		g := f
		g.Q, g.Prefix = "", f.Q
		if evs, next, searched, err = store.SearchPrefix(r.Context(), d.opt.Store, g, d.now()); err != nil {
			return err
		}
	}
	if f.Q != "" && !bodySearch && f.Cursor == "" && !partial && len(evs) == 1 && next == "" && searched.Complete {
		http.Redirect(w, r, "/events/"+url.PathEscape(evs[0].ID), http.StatusSeeOther)
		return nil
	}
	data := eventsData{Source: f.Source, OtherSource: f.Source != "" && !slices.Contains(d.sources, f.Source), Status: string(f.Status), Q: f.Q, Type: f.Type, Sources: d.sources,
		Statuses: statusOrder, Paged: f.Cursor != "", BodySearch: bodySearch, SearchError: searchError, CanAct: canAct(r)}
	if !f.Until.IsZero() {
		data.Until = f.Until.UTC().Format(time.RFC3339Nano)
	}
	if f.Q != "" && !bodySearch && f.Cursor == "" && len(evs) == 0 {
		if data.Refused, err = store.RejectionHint(r.Context(), d.opt.Store, f.Source, f.Q); err != nil {
			return err
		}
		q := url.Values{"q": {f.Q}}
		if f.Source != "" {
			q.Set("source", f.Source)
		}
		data.RefusedURL = "/rejections?" + q.Encode()
	}
	data.Rows = make([]eventRow, len(evs))
	ids := make([]string, len(evs))
	for i, ev := range evs {
		data.Rows[i].Event = ev
		ids[i] = ev.ID
	}
	if len(ids) > 0 {
		states, err := d.opt.Store.DeliveryStates(r.Context(), ids)
		if err != nil {
			return err
		}
		for i := range data.Rows {
			data.Rows[i].States = states[data.Rows[i].ID]
		}
	}
	q := url.Values{}
	for k, v := range map[string]string{"source": f.Source, "status": string(f.Status), "q": f.Q, "type": f.Type, "until": data.Until} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if bodySearch && filter != "" && searchError == "" {
		until := f.Until
		if until.IsZero() {
			until = d.now()
		}
		// The window searched: a complete search began at since, or
		// at the window's start when nothing was received before it.
		from := searched.BackTo
		if searched.Complete {
			if from = f.Since; from.IsZero() {
				from = until.Add(-store.BodyWindow)
			}
		}
		data.Filter, data.ReplayFrom = filter, from
		data.ReplaySince = from.UTC().Format(time.RFC3339Nano)
		data.ReplayUntil = until.UTC().Format(time.RFC3339Nano)
		data.Back = r.URL.RequestURI()
	}
	if !searched.Complete {
		data.SearchedBackTo = searched.BackTo
		further := maps.Clone(q)
		further.Set("until", searched.BackTo.UTC().Format(time.RFC3339Nano))
		data.FurtherURL = "/events?" + further.Encode()
	}
	saved, err := d.opt.Store.ListSavedSearches(r.Context())
	if err != nil {
		return err
	}
	for _, s := range saved {
		data.Saved = append(data.Saved, savedSearch{s, "/events?" + s.Query})
	}
	keep := maps.Clone(q)
	keep.Del("until")
	data.SaveQuery = keep.Encode()
	data.FirstURL = "/events"
	if len(q) > 0 {
		data.FirstURL += "?" + q.Encode()
	}
	data.Partial = data.FirstURL
	if next != "" {
		q.Set("cursor", next)
		data.NextURL = "/events?" + q.Encode()
	}
	if partial {
		return d.renderPartial(w, "events", "rows", data)
	}
	d.render(w, r, status, "events", "Events", data)
	return nil
}

// listEvents is ListEvents, except that a search by provider event id
// without a source asks each source in turn: the dedup index is
// (source, dedup_key), so a search scoped to a source is an index lookup
// while an unscoped one would read every event.
//
// A status filter makes the store look for events with a delivery in that
// status, newest first; for a status no delivery has, that would read every
// event to find nothing, so the (cheap) queue counts answer first.
func (d *Dashboard) listEvents(r *http.Request, f store.EventFilter) ([]anyhook.Event, string, error) {
	if f.Status != "" && slices.Contains(store.UnfinishedStatuses, f.Status) {
		qs, err := d.opt.Store.QueueStats(r.Context(), nil)
		if err != nil {
			return nil, "", err
		}
		if qs.Total(f.Status) == 0 {
			return nil, "", nil
		}
	}
	if f.Q == "" || f.Source != "" || len(d.sources) == 0 {
		return d.opt.Store.ListEvents(r.Context(), f)
	}
	var all []anyhook.Event
	for _, src := range d.sources {
		g := f
		g.Source, g.Cursor, g.Limit = src, "", 500
		evs, _, err := d.opt.Store.ListEvents(r.Context(), g)
		if err != nil {
			return nil, "", err
		}
		all = append(all, evs...)
	}
	if len(all) == 0 {
		// Perhaps an event of a source the config no longer names (removed
		// or renamed): ask without a source, as the API does.
		return d.opt.Store.ListEvents(r.Context(), f)
	}
	slices.SortFunc(all, func(a, b anyhook.Event) int { return cmp.Compare(b.ID, a.ID) })
	if f.Cursor != "" {
		i, _ := slices.BinarySearchFunc(all, f.Cursor, func(e anyhook.Event, c string) int { return cmp.Compare(c, e.ID) })
		for i < len(all) && all[i].ID >= f.Cursor {
			i++
		}
		all = all[i:]
	}
	var next string
	if len(all) > f.Limit {
		all = all[:f.Limit]
		next = all[len(all)-1].ID
	}
	return all, next, nil
}

// POST /searches name=&query=  (query: the events list's parameters)
func (d *Dashboard) saveSearch(w http.ResponseWriter, r *http.Request) error {
	if err := parseForm(w, r); err != nil {
		return err
	}
	query := r.PostForm.Get("query")
	res, err := d.callAPI(r, "POST", "/api/searches", map[string]string{"name": r.PostForm.Get("name"), "query": query}, nil)
	if err != nil {
		return err
	}
	if !res.ok() {
		setFlash(w, r, true, "Not saved: "+res.message())
	} else {
		setFlash(w, r, false, "Search \""+strings.TrimSpace(r.PostForm.Get("name"))+"\" saved.")
	}
	back(w, r, "/events?"+query)
	return nil
}

// POST /searches/{id}/delete
func (d *Dashboard) deleteSearch(w http.ResponseWriter, r *http.Request) error {
	if err := parseForm(w, r); err != nil {
		return err
	}
	res, err := d.callAPI(r, "DELETE", "/api/searches/"+url.PathEscape(r.PathValue("id")), nil, nil)
	if err != nil {
		return err
	}
	if !res.ok() {
		setFlash(w, r, true, "Not deleted: "+res.message())
	} else {
		setFlash(w, r, false, "Saved search deleted.")
	}
	back(w, r, "/events")
	return nil
}
