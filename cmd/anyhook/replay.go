package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/route"
	"github.com/anyhook/anyhook/internal/store"
)

const replayUsage = `usage: anyhook replay [--config FILE] --event ID [--source S] [--destination D] [--ignore-filters] [--reason TEXT] [--dry-run] [--json]
       anyhook replay [--config FILE] --status STATUS [--source S] [--destination D]
                      [--since T] [--until T] [--reason TEXT] [--dry-run] [--json]

Marks events for redelivery: each replay is a new delivery carrying the
same X-AnyHook-Delivery and X-AnyHook-Replay: true.

--event takes whichever id you have: the AnyHook event id (the
X-AnyHook-Delivery a handler sees), a delivery id (then only that
delivery's destination is replayed), or the provider's event id (evt_… for
Stripe; with --source when several sources have an event with that id).
It replays to every destination of the event's source whose filter
accepts the event now (every one with --ignore-filters), or to
--destination whatever its filter says.

--status replays one delivery per (event, destination) among the
deliveries in that status (e.g. dead), filtered by --source,
--destination and creation time (--since, --until: an RFC 3339 time or a
duration ago such as 24h).

Each replay takes the held and dead deliveries of its event and
destination out of their queues (status resolved: the replay carries the
work), so --status dead run twice replays nothing the second time. The
event's actions record it, by "cli", with --reason.

--dry-run prints what would be replayed and changes nothing. Exit 1: no
such event; exit 2: bad flags or config, an ambiguous provider event id,
an unreachable database.`

// replayItem is one (event, destination) a replay delivers (or would).
type replayItem struct {
	EventID     string `json:"event_id"`
	Destination string `json:"destination"`
	DeliveryID  string `json:"delivery_id,omitempty"` // the new delivery; not in a dry run
}

// replayReport is what replay prints with --json.
type replayReport struct {
	DryRun bool `json:"dry_run"`
	// Count is the number of replay deliveries created (or, in a dry run,
	// that would be).
	Count int `json:"count"`
	// With --event: the event, and which of its ids --event matched
	// (event_id, delivery_id or provider_event_id).
	EventID         string `json:"event_id,omitempty"`
	Source          string `json:"source,omitempty"`
	ProviderEventID string `json:"provider_event_id,omitempty"`
	Matched         string `json:"matched,omitempty"`
	// Filtered are the destinations of the source whose filter does not
	// accept the event (--event without --destination or
	// --ignore-filters): not replayed to.
	Filtered []string `json:"filtered,omitempty"`
	// Deliveries lists them, except for a --status replay that was carried
	// out (the store creates those in one statement and counts them).
	Deliveries []replayItem `json:"deliveries,omitempty"`
	// Skipped are the selected events a --status replay left alone:
	// retention pruned their bodies, so they can no longer be sent.
	Skipped []skippedItem `json:"skipped,omitempty"`
}

// skippedItem is an event a replay skipped, and why ("pruned").
type skippedItem struct {
	EventID string `json:"event_id"`
	Reason  string `json:"reason"`
}

// replayError is what replay prints with --json when it fails.
type replayError struct {
	Error string `json:"error"`
	Exit  int    `json:"exit"`
	// The report so far, when there is one: a replay that skipped every
	// selected event lists them.
	Skipped []skippedItem `json:"skipped,omitempty"`
}

type replayOptions struct {
	cfgPath, event, status, source, dest, since, until, reason string
	dryRun, json, ignoreFilters                                bool
}

func replay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("replay")
	var o replayOptions
	fs.StringVar(&o.cfgPath, "config", "", "config `file` (default $ANYHOOK_CONFIG, else ./anyhook.yaml)")
	fs.StringVar(&o.event, "event", "", "replay this event: its AnyHook event `id`, a delivery id or the provider's event id")
	fs.StringVar(&o.status, "status", "", "replay the deliveries in this `status` (e.g. dead)")
	fs.StringVar(&o.source, "source", "", "only this `source` (with --event: the source of a provider event id)")
	fs.StringVar(&o.dest, "destination", "", "only this `destination`")
	fs.StringVar(&o.since, "since", "", "with --status: deliveries created at or after `T`, an RFC 3339 time or a duration ago (e.g. 24h)")
	fs.StringVar(&o.until, "until", "", "with --status: deliveries created before `T`, an RFC 3339 time or a duration ago")
	fs.StringVar(&o.reason, "reason", "", "why, recorded with the replay in the event's actions (one line)")
	fs.BoolVar(&o.ignoreFilters, "ignore-filters", false, "with --event and no --destination: replay to every destination of the source, whatever their filters say")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print what would be replayed; change nothing")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	if code := parse(fs, args, stdout, stderr, replayUsage); code >= 0 {
		return code
	}
	// With --json every outcome is a JSON object on stdout, a failure too.
	bad := func(code int, err error, skipped ...skippedItem) int {
		if o.json {
			return failJSON(stdout, code, err, skipped)
		}
		return fail(stderr, code, err)
	}
	if (o.event == "") == (o.status == "") {
		return bad(exitUsage, errors.New("replay: give either --event ID or --status STATUS (anyhook replay --help)"))
	}
	reason, err := store.CheckReason(o.reason)
	if err != nil {
		return bad(exitUsage, fmt.Errorf("replay: --reason: %w", err))
	}
	o.reason = reason
	// No stored id or name has bytes that are not text; PostgreSQL would
	// fail the lookup where SQLite finds nothing.
	for _, v := range []struct{ flag, value string }{{"--event", o.event}, {"--source", o.source}, {"--destination", o.dest}} {
		if p := store.TextProblem(v.value); p != "" {
			return bad(exitUsage, fmt.Errorf("replay: %s %s", v.flag, p))
		}
	}
	var f store.DeliveryFilter
	if o.status != "" {
		f = store.DeliveryFilter{Status: anyhook.DeliveryStatus(o.status), Source: o.source, Destination: o.dest}
		if !f.Status.Valid() {
			return bad(exitUsage, fmt.Errorf("replay: --status %q is not a delivery status", o.status))
		}
		if f.Status == anyhook.StatusResolved {
			return bad(exitUsage, errors.New("replay: --status resolved: a bulk replay never selects resolved deliveries (a person replayed or discarded them); replay one event with --event ID"))
		}
		now := time.Now()
		for _, t := range []struct {
			flag, value string
			to          *time.Time
		}{{"--since", o.since, &f.Since}, {"--until", o.until, &f.Until}} {
			if t.value == "" {
				continue
			}
			v, err := parseSince(t.value, now)
			if err != nil {
				return bad(exitUsage, fmt.Errorf("replay: %s: %w", t.flag, err))
			}
			*t.to = v
		}
		if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
			return bad(exitUsage, errors.New("replay: --since must be before --until"))
		}
	} else if o.since != "" || o.until != "" {
		return bad(exitUsage, errors.New("replay: --since and --until go with --status"))
	}
	cfg, err := loadConfig(o.cfgPath, stderr, "replay", "database", "destinations.*.sources", "destinations.*.filter")
	if err != nil {
		return bad(exitUsage, err)
	}
	if o.dest != "" && cfg.Destinations[o.dest] == nil {
		// No dispatcher would ever take such a delivery.
		return bad(exitUsage, fmt.Errorf("replay: --destination %q is not in %s (known: %s)", o.dest, cfg.Path, strings.Join(cfg.DestinationOrder, ", ")))
	}
	if o.status != "" && o.dest == "" {
		// Only destinations a dispatcher takes: a replay queued for one the
		// config no longer names would wait for ever.
		f.Destinations = cfg.DestinationOrder
	}
	st, err := openStore(ctx, cfg, "replay")
	if err != nil {
		return bad(exitUsage, err)
	}
	defer st.Close()
	var rep replayReport
	var code int
	if o.event != "" {
		rep, code, err = replayEvent(ctx, st, cfg, o)
	} else {
		rep, code, err = replayStatus(ctx, st, f, o)
	}
	if err != nil {
		if !o.json {
			rep.printSkipped(stderr)
		}
		return bad(code, err, rep.Skipped...)
	}
	if o.json {
		b, _ := json.Marshal(rep)
		fmt.Fprintf(stdout, "%s\n", b)
		return exitOK
	}
	rep.print(stdout)
	return exitOK
}

// replayEvent replays the one event --event names.
func replayEvent(ctx context.Context, st store.Store, cfg *config.Config, o replayOptions) (replayReport, int, error) {
	ev, matched, viaDelivery, code, err := resolveEvent(ctx, st, o.event, o.source, cfg.SourceOrder)
	if err != nil {
		return replayReport{}, code, err
	}
	rep := replayReport{DryRun: o.dryRun, EventID: ev.ID, Source: ev.Source, ProviderEventID: ev.DedupKey, Matched: matched}
	var dests []string
	switch {
	case o.dest != "":
		dests = []string{o.dest}
	case viaDelivery != nil:
		dests = []string{viaDelivery.Destination}
	case cfg.Sources[ev.Source] == nil:
		return rep, exitFail, fmt.Errorf("replay: event %s is from source %q, which is no longer configured; name a --destination", ev.ID, ev.Source)
	default:
		dests = cfg.Sources[ev.Source].Destinations
		if !o.ignoreFilters {
			filters, err := gateway.Filters(cfg, dests)
			if err != nil {
				return rep, exitUsage, err
			}
			dests, rep.Filtered = route.Split(filters, route.NewInput(route.FromEvent(&ev)), dests, nil)
			if len(dests) == 0 {
				return rep, exitFail, fmt.Errorf("replay: no destination's filter accepts event %s (%s); name a --destination or pass --ignore-filters", ev.ID, strings.Join(rep.Filtered, ", "))
			}
		}
	}
	if !o.dryRun {
		ds, err := st.Replay(ctx, ev.ID, dests, cliActor(o))
		if err != nil {
			return rep, exitFail, fmt.Errorf("replay: %w", err)
		}
		for _, d := range ds {
			rep.Deliveries = append(rep.Deliveries, replayItem{EventID: d.EventID, Destination: d.Destination, DeliveryID: d.ID})
		}
	} else {
		if ev.BodyPruned { // what the real run would answer
			return rep, exitFail, fmt.Errorf("replay: %w", store.PrunedError(ev.ID))
		}
		for _, d := range dests {
			rep.Deliveries = append(rep.Deliveries, replayItem{EventID: ev.ID, Destination: d})
		}
	}
	rep.Count = len(rep.Deliveries)
	return rep, exitOK, nil
}

// replayStatus replays (or, in a dry run, lists) one delivery per
// (event, destination) among the deliveries f selects, as
// store.ReplayDeliveries does: never a resolved one, and skipping (and
// listing) the events whose bodies retention pruned. When it skipped some
// and replayed none, it fails (exit 1) with the report.
func replayStatus(ctx context.Context, st store.Store, f store.DeliveryFilter, o replayOptions) (replayReport, int, error) {
	rep := replayReport{DryRun: o.dryRun}
	var pruned []string
	if !o.dryRun {
		res, err := st.ReplayDeliveries(ctx, f, cliActor(o))
		if err != nil {
			return rep, exitFail, fmt.Errorf("replay: %w", err)
		}
		rep.Count, pruned = res.Count, res.Pruned
	} else {
		res, err := store.DryRunReplay(ctx, st, f)
		if err != nil {
			return rep, exitFail, fmt.Errorf("replay: %w", err)
		}
		for _, p := range res.Pairs {
			rep.Deliveries = append(rep.Deliveries, replayItem{EventID: p[0], Destination: p[1]})
		}
		rep.Count, pruned = res.Count, res.Pruned
	}
	for _, id := range pruned {
		rep.Skipped = append(rep.Skipped, skippedItem{EventID: id, Reason: "pruned"})
	}
	if rep.Count == 0 && len(pruned) > 0 {
		return rep, exitFail, fmt.Errorf("replay: %w", store.PrunedManyError(len(pruned), pruned[0]))
	}
	return rep, exitOK, nil
}

// cliActor is who a replay from the command line is recorded as.
func cliActor(o replayOptions) store.Actor { return store.Actor{Name: "cli", Reason: o.reason} }

// resolveEvent finds the event id names: an AnyHook event id, a delivery
// id (whose delivery it also returns) or a provider event id, in that
// order; source, when set, is the source the event must be from, and
// sources are the configured ones, asked first for a provider id. matched
// says which id it was (event_id, delivery_id, provider_event_id). A
// provider event id found in several sources is an error listing them.
func resolveEvent(ctx context.Context, st store.Store, id, source string, sources []string) (ev anyhook.Event, matched string, viaDelivery *anyhook.Delivery, code int, err error) {
	check := func(ev anyhook.Event, what string) error {
		if source != "" && ev.Source != source {
			return fmt.Errorf("replay: %s %s is of an event from source %q, not --source %q", what, id, ev.Source, source)
		}
		return nil
	}
	ev, err = st.Event(ctx, id)
	switch {
	case err == nil:
		return ev, "event_id", nil, exitUsage, check(ev, "event id")
	case !errors.Is(err, anyhook.ErrNotFound):
		return ev, "", nil, exitUsage, fmt.Errorf("replay: %w", err)
	}
	d, err := st.Delivery(ctx, id)
	switch {
	case err == nil:
		if ev, err = st.Event(ctx, d.EventID); err != nil {
			return ev, "", nil, exitFail, fmt.Errorf("replay: %w", err)
		}
		return ev, "delivery_id", &d, exitUsage, check(ev, "delivery id")
	case !errors.Is(err, anyhook.ErrNotFound):
		return ev, "", nil, exitUsage, fmt.Errorf("replay: %w", err)
	}
	evs, err := findProviderID(ctx, st, id, source, sources)
	if err != nil {
		return ev, "", nil, exitUsage, fmt.Errorf("replay: %w", err)
	}
	switch len(evs) {
	case 0:
		where := ""
		if source != "" {
			where = " in source " + source
		}
		return ev, "", nil, exitFail, fmt.Errorf("replay: no event has %q as its AnyHook event id, a delivery id or its provider event id%s", id, where)
	case 1:
		ev, err = st.Event(ctx, evs[0].ID)
		if err != nil {
			return ev, "", nil, exitFail, fmt.Errorf("replay: %w", err)
		}
		return ev, "provider_event_id", nil, exitOK, nil
	}
	var matches, in []string
	for _, e := range evs {
		matches = append(matches, fmt.Sprintf("%s in source %s (received %s)", e.ID, e.Source, e.ReceivedAt.UTC().Format(time.RFC3339)))
		if !slices.Contains(in, e.Source) {
			in = append(in, e.Source)
		}
	}
	hint := "add --source " + strings.Join(in, " or --source ")
	if len(in) == 1 {
		hint = "give the AnyHook event id"
	}
	return ev, "", nil, exitUsage, fmt.Errorf("replay: provider event id %q matches %d events: %s; %s", id, len(evs), strings.Join(matches, ", "), hint)
}

// findProviderID returns the events whose provider event id is id: in
// source when it is set, else in each configured source (through its
// (source, dedup_key) index), else, when none has it, in any source (a
// source since removed from the config; a scan).
func findProviderID(ctx context.Context, st store.Store, id, source string, sources []string) ([]anyhook.Event, error) {
	if source != "" {
		evs, _, err := st.ListEvents(ctx, store.EventFilter{Source: source, Q: id, Limit: 20})
		return evs, err
	}
	var out []anyhook.Event
	for _, src := range sources {
		evs, _, err := st.ListEvents(ctx, store.EventFilter{Source: src, Q: id, Limit: 20})
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	if len(out) > 0 {
		return out, nil
	}
	evs, _, err := st.ListEvents(ctx, store.EventFilter{Q: id, Limit: 20})
	return evs, err
}

func (r replayReport) print(w io.Writer) {
	verb := "replaying"
	if r.DryRun {
		verb = "would replay"
	}
	if r.EventID != "" {
		var dests []string
		for _, d := range r.Deliveries {
			dests = append(dests, d.Destination)
		}
		what := "event " + r.EventID + " (source " + r.Source
		if r.ProviderEventID != "" {
			what += ", provider event id " + r.ProviderEventID
		}
		what += ")"
		fmt.Fprintf(w, "%s %s to %s: %d %s\n", verb, what, strings.Join(dests, ", "), r.Count, plural(r.Count, "delivery", "deliveries"))
		if len(r.Filtered) > 0 {
			fmt.Fprintf(w, "not to %s: its filter does not accept the event (--ignore-filters to send anyway)\n", strings.Join(r.Filtered, ", "))
		}
	} else {
		fmt.Fprintf(w, "%s %d %s\n", verb, r.Count, plural(r.Count, "delivery", "deliveries"))
		for _, d := range r.Deliveries {
			fmt.Fprintf(w, "  event %s to %s\n", d.EventID, d.Destination)
		}
	}
	r.printSkipped(w)
	if r.DryRun {
		fmt.Fprintln(w, "dry run: nothing was changed")
	}
}

func (r replayReport) printSkipped(w io.Writer) {
	if len(r.Skipped) == 0 {
		return
	}
	verb := "skipped"
	if r.DryRun {
		verb = "would skip"
	}
	fmt.Fprintf(w, "%s %d %s: retention pruned %s body (log.retention), so %s can no longer be sent\n",
		verb, len(r.Skipped), plural(len(r.Skipped), "event", "events"), plural(len(r.Skipped), "its", "their"), plural(len(r.Skipped), "it", "they"))
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "  event %s\n", s.EventID)
	}
}

// failJSON prints err as a JSON object on stdout (--json) and returns
// code.
func failJSON(stdout io.Writer, code int, err error, skipped []skippedItem) int {
	b, _ := json.Marshal(replayError{Error: strings.TrimPrefix(err.Error(), "replay: "), Exit: code, Skipped: skipped})
	fmt.Fprintf(stdout, "%s\n", b)
	return code
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// parseSince reads an RFC 3339 time, or a duration meaning that long
// before now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time nor a duration", s)
	}
	return t, nil
}
