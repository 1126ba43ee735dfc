package dashboard

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"html/template"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/store"
)

// funcs are the template helpers; "ago" is bound to the dashboard's
// clock in parseTemplates.
var funcs = template.FuncMap{
	"ts": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05Z")
	},
	"ago":     func(t time.Time) template.HTML { return "" },
	"agoText": func(t time.Time) string { return "" },
	"ms": func(d time.Duration) string {
		return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
	},
	"age":    human,
	"size":   func(n int) string { return byteSize(int64(n)) },
	"status": func(s anyhook.DeliveryStatus) string { return "st-" + string(s) },
	"join":   strings.Join,
	"resolvable": func(s anyhook.DeliveryStatus) bool {
		return s == anyhook.StatusHeld || s == anyhook.StatusDead
	},
	// lost: the attempt's claim expired before its outcome was recorded.
	"lost": store.Lost,
	// times writes n with the singular or plural noun: "1 time", "3 times".
	// times writes n (any integer) with the singular or plural noun.
	"times": func(n any, one, many string) (string, error) {
		switch n := n.(type) {
		case int:
			return count(n, one, many), nil
		case int64:
			return count(int(n), one, many), nil
		}
		return "", fmt.Errorf("times: %T is not an integer", n)
	},
}

// count writes n with the singular or plural noun: "1 event", "2 events".
func count(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// human writes a duration the way a person reads it: 3s, 4m, 2h 5m, 3d.
func human(d time.Duration) string {
	switch {
	case d < time.Second:
		return "0s"
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// statusOrder is how statuses are listed.
var statusOrder = []anyhook.DeliveryStatus{
	anyhook.StatusPending, anyhook.StatusDelivering, anyhook.StatusDelivered, anyhook.StatusDead,
	anyhook.StatusHeld, anyhook.StatusSkipped, anyhook.StatusPaused, anyhook.StatusResolved,
}

type statusCount struct {
	Status anyhook.DeliveryStatus
	Count  int
}

// destRow is one destination's health.
type destRow struct {
	Name          string
	Orphaned      bool // not in the config, with unfinished deliveries
	Sources       []string
	Paused        bool
	Health        delivery.Health
	HasHealth     bool
	Depth         map[anyhook.DeliveryStatus]int
	LastDelivered time.Time
	Delivered     int // over the overview's window
	Dead          int
}

// Count is the number of the destination's deliveries in status s.
func (r destRow) Count(s string) int { return r.Depth[anyhook.DeliveryStatus(s)] }

type overviewData struct {
	Window        string
	Received      int
	Delivered     int
	Dead          int
	IngestRate    string // per minute
	DeliveryRate  string
	SuccessRatio  string
	Queue         []statusCount
	OldestPending string
	Stale         int // stale events received in the window
	Skipped       int // of them, skipped (stale: skip)
	IngestChart   chart
	DeliveryChart chart
	Destinations  []destRow
	Ledger        *LedgerStatus
}

// GET /
func (d *Dashboard) overview(w http.ResponseWriter, r *http.Request) error {
	data := overviewData{Window: "last hour", SuccessRatio: "—", OldestPending: "—", IngestRate: "—", DeliveryRate: "—"}
	rows, err := d.destRows(r)
	if err != nil {
		return err
	}
	if d.opt.Ledger != nil {
		ls, err := d.opt.Ledger(r.Context())
		if err != nil {
			return err
		}
		data.Ledger = &ls
	}
	act, err := d.opt.Store.Activity(r.Context(), store.ActivityQuery{Window: time.Hour, Bucket: time.Minute, Destinations: d.dests})
	if err != nil {
		return err
	}
	qs, err := d.opt.Store.QueueStats(r.Context(), d.dests)
	if err != nil {
		return err
	}
	n := len(act.Received)
	delivered, dead := store.Merge(act.Delivered, n), store.Merge(act.Dead, n)
	data.Received, data.Delivered, data.Dead = store.Sum(act.Received), store.Sum(delivered), store.Sum(dead)
	data.Stale, data.Skipped = act.Stale, act.Skipped
	minutes := float64(n) * act.Bucket.Minutes()
	data.IngestRate = fmt.Sprintf("%.1f", float64(data.Received)/minutes)
	data.DeliveryRate = fmt.Sprintf("%.1f", float64(data.Delivered+data.Dead)/minutes)
	if fin := data.Delivered + data.Dead; fin > 0 {
		data.SuccessRatio = fmt.Sprintf("%.1f%%", 100*float64(data.Delivered)/float64(fin))
	}
	for _, st := range store.UnfinishedStatuses {
		data.Queue = append(data.Queue, statusCount{st, qs.Total(st)})
	}
	if !qs.OldestPending.IsZero() {
		data.OldestPending = human(qs.OldestPendingAge())
	}
	data.IngestChart = newChart("events received per minute", act.Start, act.Bucket,
		[]chartSeries{{Name: "received", Class: "s-received"}}, [][]int{act.Received})
	data.DeliveryChart = newChart("deliveries finished per minute", act.Start, act.Bucket,
		[]chartSeries{{Name: "delivered", Class: "s-delivered"}, {Name: "dead", Class: "s-dead"}}, [][]int{delivered, dead})
	for i := range rows {
		rows[i].Depth = qs.Depth[rows[i].Name]
		rows[i].LastDelivered = qs.LastDelivered[rows[i].Name]
		rows[i].Delivered = store.Sum(act.Delivered[rows[i].Name])
		rows[i].Dead = store.Sum(act.Dead[rows[i].Name])
	}
	orphans, err := d.orphanRows(r)
	if err != nil {
		return err
	}
	data.Destinations = append(rows, orphans...)
	d.render(w, r, http.StatusOK, "overview", "Overview", data)
	return nil
}

// destRows lists the configured destinations with pause state and the
// engine's view of their health.
func (d *Dashboard) destRows(r *http.Request) ([]destRow, error) {
	paused, err := d.opt.Store.Paused(r.Context())
	if err != nil {
		return nil, err
	}
	var health map[string]delivery.Health
	if d.opt.Health != nil {
		health = d.opt.Health()
	}
	rows := make([]destRow, 0, len(d.dests))
	for _, name := range d.dests {
		row := destRow{Name: name, Paused: paused[name]}
		row.Health, row.HasHealth = health[name]
		for _, src := range d.sources {
			if slices.Contains(d.opt.Sources[src], name) {
				row.Sources = append(row.Sources, src)
			}
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// orphanRows are the destinations the config does not name that still have
// unfinished deliveries (removed from the config, or not added yet in a
// rolling change): their deliveries wait untouched until a config names
// the destination again.
func (d *Dashboard) orphanRows(r *http.Request) ([]destRow, error) {
	qs, err := d.opt.Store.QueueStats(r.Context(), nil)
	if err != nil {
		return nil, err
	}
	var rows []destRow
	for _, name := range slices.Sorted(maps.Keys(qs.Depth)) {
		if !slices.Contains(d.dests, name) {
			rows = append(rows, destRow{Name: name, Orphaned: true, Depth: qs.Depth[name]})
		}
	}
	return rows, nil
}

// GET /destinations
func (d *Dashboard) destinations(w http.ResponseWriter, r *http.Request) error {
	rows, err := d.destRows(r)
	if err != nil {
		return err
	}
	qs, err := d.opt.Store.QueueStats(r.Context(), d.dests)
	if err != nil {
		return err
	}
	for i := range rows {
		rows[i].Depth = qs.Depth[rows[i].Name]
		rows[i].LastDelivered = qs.LastDelivered[rows[i].Name]
	}
	orphans, err := d.orphanRows(r)
	if err != nil {
		return err
	}
	rows = append(rows, orphans...)
	d.render(w, r, http.StatusOK, "destinations", "Destinations", struct {
		Rows     []destRow
		Statuses []anyhook.DeliveryStatus
	}{rows, store.UnfinishedStatuses})
	return nil
}

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
}

// eventFilter reads the list's query parameters.
func eventFilter(v url.Values) (store.EventFilter, error) {
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
	return f, nil
}

// GET /events?source=&status=&q=&type=&cursor=  (X-AnyHook-Partial: rows only)
func (d *Dashboard) events(w http.ResponseWriter, r *http.Request) error {
	f, err := eventFilter(r.URL.Query())
	if err != nil {
		return err
	}
	partial := r.Header.Get("X-AnyHook-Partial") != ""
	// The search box takes whichever id a person has: the event id (what
	// a handler logs as X-AnyHook-Delivery), a delivery id, or the
	// provider's event id. One match opens the event.
	var evs []anyhook.Event
	var next string
	ev, found, err := store.SearchByID(r.Context(), d.opt.Store, f)
	if err != nil {
		return err
	}
	if found {
		evs = []anyhook.Event{ev}
	} else if evs, next, err = d.listEvents(r, f); err != nil {
		return err
	}
	if f.Q != "" && f.Cursor == "" && !partial && len(evs) == 1 && next == "" {
		http.Redirect(w, r, "/events/"+url.PathEscape(evs[0].ID), http.StatusSeeOther)
		return nil
	}
	data := eventsData{Source: f.Source, Status: string(f.Status), Q: f.Q, Type: f.Type, Sources: d.sources,
		Statuses: statusOrder, Paged: f.Cursor != ""}
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
	for k, v := range map[string]string{"source": f.Source, "status": string(f.Status), "q": f.Q, "type": f.Type} {
		if v != "" {
			q.Set(k, v)
		}
	}
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
	d.render(w, r, http.StatusOK, "events", "Events", data)
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

type headerLine struct {
	Name  string
	Value string
}

type attemptView struct {
	anyhook.Attempt
	Response         string
	ResponseEncoding string
}

type deliveryView struct {
	anyhook.Delivery
	Attempts []attemptView
}

// destSummary is what happened to an event at one destination, counted
// from its deliveries and their attempts: how often it was tried, how,
// how often nothing answered, and how often the destination answered 2xx.
type destSummary struct {
	Destination string
	Sent        int // attempts started, over the delivery and its replays
	Original    int // attempts of the delivery made at ingest
	Replays     int // replay deliveries
	Replayed    int // attempts of the replay deliveries
	Lost        int // attempts whose outcome is unknown (a crash or a stall)
	NoAnswer    int // attempts that got no HTTP answer (refused, timed out…)
	OK          int // attempts answered 2xx
	Marked      int // deliveries a person marked delivered
	Skipped     bool
}

func summarize(ds []anyhook.Delivery) []destSummary {
	var out []destSummary
	at := map[string]int{}
	for _, d := range ds {
		i, ok := at[d.Destination]
		if !ok {
			i = len(out)
			at[d.Destination] = i
			out = append(out, destSummary{Destination: d.Destination})
		}
		s := &out[i]
		s.Sent += d.AttemptCount
		if d.Replay {
			s.Replays++
			s.Replayed += d.AttemptCount
		} else {
			s.Original += d.AttemptCount
		}
		if d.Status == anyhook.StatusSkipped {
			s.Skipped = true
		}
		if d.Resolution.Kind == anyhook.ResolvedMarkedDelivered {
			s.Marked++
		}
		for _, a := range d.Attempts {
			switch {
			case store.Lost(a):
				s.Lost++
			case a.StatusCode == 0:
				s.NoAnswer++
			case a.StatusCode >= 200 && a.StatusCode < 300:
				s.OK++
			}
		}
	}
	slices.SortFunc(out, func(a, b destSummary) int { return cmp.Compare(a.Destination, b.Destination) })
	return out
}

// actionView is one entry of the event's audit trail.
type actionView struct {
	anyhook.Action
	What string
}

type eventData struct {
	Event        anyhook.Event
	Headers      []headerLine
	Body         string
	BodyEncoding string
	Pretty       string // the body as indented JSON, when it is JSON
	ReplayTo     []string
	Deliveries   []deliveryView
	Summaries    []destSummary
	Actions      []actionView
	Back         string
	Arrived      arrivedView
}

// encodeBytes is b as text: itself when valid UTF-8, else base64, as the
// admin API shows bodies.
func encodeBytes(b []byte) (string, string) {
	if utf8.Valid(b) {
		return string(b), "utf-8"
	}
	return base64.StdEncoding.EncodeToString(b), "base64"
}

// GET /events/{id}
func (d *Dashboard) event(w http.ResponseWriter, r *http.Request) error {
	ev, err := d.opt.Store.Event(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	data := eventData{Event: ev, Back: r.URL.RequestURI(), Arrived: arrivedOf(ev)}
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range ev.Header {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, v := range ev.Header[name] {
			data.Headers = append(data.Headers, headerLine{name, v})
		}
	}
	data.Body, data.BodyEncoding = encodeBytes(ev.Body)
	if data.BodyEncoding == "utf-8" && json.Valid(ev.Body) {
		var buf bytes.Buffer
		if json.Indent(&buf, ev.Body, "", "  ") == nil && buf.String() != data.Body {
			data.Pretty = buf.String()
		}
	}
	targets := slices.Clone(d.opt.Sources[ev.Source])
	for _, dl := range ev.Deliveries {
		if !slices.Contains(targets, dl.Destination) && slices.Contains(d.dests, dl.Destination) {
			targets = append(targets, dl.Destination)
		}
	}
	slices.Sort(targets)
	data.ReplayTo = targets
	if err := store.FillWaitsBehind(r.Context(), d.opt.Store, ev.Deliveries, d.inOrder); err != nil {
		return err
	}
	for _, dl := range ev.Deliveries {
		v := deliveryView{Delivery: dl}
		for _, a := range dl.Attempts {
			body, enc := encodeBytes(a.ResponseBody)
			v.Attempts = append(v.Attempts, attemptView{Attempt: a, Response: body, ResponseEncoding: enc})
		}
		data.Deliveries = append(data.Deliveries, v)
	}
	data.Summaries = summarize(ev.Deliveries)
	for _, a := range ev.Actions {
		what := map[string]string{store.ActionReplay: "replayed to " + a.Destination, store.ActionResend: "resent",
			store.ActionMarkDelivered: "marked delivered", store.ActionDiscard: "discarded"}[a.Kind]
		data.Actions = append(data.Actions, actionView{Action: a, What: cmp.Or(what, a.Kind)})
	}
	d.render(w, r, http.StatusOK, "event", "Event "+ev.ID, data)
	return nil
}

// queueRow is a delivery with what the queues show beside it.
type queueRow struct {
	anyhook.Delivery
	store.QueueRow
}

// LastError is the latest attempt's outcome in words: its error (the
// HTTP status or the transport error), "" when it had none.
func (r queueRow) LastError() string {
	switch {
	case r.Last.Number == 0:
		return ""
	case r.Last.Error != "":
		return r.Last.Error
	case r.Last.StatusCode != 0 && (r.Last.StatusCode < 200 || r.Last.StatusCode > 299):
		return fmt.Sprintf("HTTP %d", r.Last.StatusCode)
	}
	return ""
}

type deliveriesData struct {
	Status      anyhook.DeliveryStatus
	Destination string
	Dests       []string
	Orphans     []string // destinations not in the config with unfinished deliveries
	Statuses    []anyhook.DeliveryStatus
	Rows        []queueRow
	NextURL     string
	Back        string
	Resolvable  bool
	Total       int // of Status (and Destination), when known
	HaveTotal   bool
}

// NavKey marks the dead and held queues in the navigation.
func (d deliveriesData) NavKey() string { return string(d.Status) }

// GET /deliveries?status=&destination=&cursor=
func (d *Dashboard) deliveries(w http.ResponseWriter, r *http.Request) error {
	v := r.URL.Query()
	f := store.DeliveryFilter{
		Status:      anyhook.DeliveryStatus(strings.TrimSpace(v.Get("status"))),
		Destination: strings.TrimSpace(v.Get("destination")),
		Cursor:      strings.TrimSpace(v.Get("cursor")),
		Limit:       100,
	}
	if f.Status == "" {
		f.Status = anyhook.StatusHeld
	}
	if !f.Status.Valid() {
		return &pageError{http.StatusBadRequest, fmt.Sprintf("unknown status %q", f.Status)}
	}
	ds, next, err := d.opt.Store.ListDeliveries(r.Context(), f)
	if err != nil {
		return err
	}
	if err := store.FillWaitsBehind(r.Context(), d.opt.Store, ds, d.inOrder); err != nil {
		return err
	}
	data := deliveriesData{Status: f.Status, Destination: f.Destination, Dests: d.dests, Statuses: statusOrder,
		Back: r.URL.RequestURI(), Resolvable: f.Status == anyhook.StatusHeld || f.Status == anyhook.StatusDead}
	data.Rows = make([]queueRow, len(ds))
	ids := make([]string, len(ds))
	for i, dl := range ds {
		data.Rows[i].Delivery, ids[i] = dl, dl.ID
	}
	if len(ids) > 0 {
		extra, err := d.opt.Store.QueueRows(r.Context(), ids)
		if err != nil {
			return err
		}
		for i := range data.Rows {
			data.Rows[i].QueueRow = extra[data.Rows[i].ID]
		}
	}
	// Every destination's, as the list below: also those the config no
	// longer names (orphaned), which the filter offers too.
	qs, err := d.opt.Store.QueueStats(r.Context(), nil)
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(qs.Depth)) {
		if !slices.Contains(d.dests, name) {
			data.Orphans = append(data.Orphans, name)
		}
	}
	if slices.Contains(store.UnfinishedStatuses, f.Status) {
		data.Total = qs.Total(f.Status)
		if f.Destination != "" {
			data.Total = qs.Depth[f.Destination][f.Status]
		}
		data.HaveTotal = true
	}
	if f.Destination != "" && !slices.Contains(d.dests, f.Destination) && !slices.Contains(data.Orphans, f.Destination) {
		data.Orphans = append(data.Orphans, f.Destination) // keep the filter showing what was asked
	}
	if next != "" {
		q := url.Values{"status": {string(f.Status)}, "cursor": {next}}
		if f.Destination != "" {
			q.Set("destination", f.Destination)
		}
		data.NextURL = "/deliveries?" + q.Encode()
	}
	title := map[anyhook.DeliveryStatus]string{anyhook.StatusDead: "Dead", anyhook.StatusHeld: "Held"}[f.Status]
	if title == "" {
		title = strings.ToUpper(string(f.Status[:1])) + string(f.Status[1:])
	}
	d.render(w, r, http.StatusOK, "deliveries", title+" deliveries", data)
	return nil
}
