package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/admin"
	"github.com/anyhook/anyhook/internal/cli"
	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/route"
	"github.com/anyhook/anyhook/internal/store"
)

const replayUsage = `usage: anyhook replay [--config FILE] --event ID [--source S] [--destination D] [--ignore-filters] [--reason TEXT] [--dry-run] [--json]
       anyhook replay [--config FILE] --status STATUS [--source S] [--destination D]
                      [--since T] [--until T] [--reason TEXT] [--yes] [--dry-run] [--json]
       anyhook replay [--config FILE] (--filter EXPR [--source S] [--status STATUS] | --search NAME)
                      --since T [--until T] [--destination D] [--reason TEXT] [--yes] [--dry-run] [--json]

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

--filter replays the deliveries of the events a CEL expression accepts
(a destination's filter language: body.data.object.customer == "cus_1"),
among those received from --since (required) to --until (default now);
--search does so for a saved search of the dashboard or the API (by its
name; its q must be body: or filter:, and it brings its own source). It
reads the body of every event in that window, so it is bounded as the
API's bulk replay is: at most 20,000 events (48 MiB of bodies, a filter
cost of 80 evaluations at the cost limit) read and 5,000 matched; a
window holding more is refused whole (exit 2), saying where the reading
stopped: replay from there to --until first. --dry-run first, and give
the replay the same --until.

Each replay takes the held and dead deliveries of its event and
destination out of their queues (status resolved: the replay carries the
work), so --status dead run twice replays nothing the second time. The
event's actions record it, by "cli", with --reason.

--status takes dead, held, delivered or skipped. Pending, retrying,
delivering and paused deliveries are refused: each is still to be sent, and a replay
would send its event twice. A --status, --filter or --search replay into a destination that is
paused, or whose latest attempt failed with none succeeding since, asks
first (on a terminal; elsewhere it exits 2 naming them): the replays
would spend their attempts there and go dead again. --yes replays
without asking; an --event replay only says so.

--dry-run prints what would be replayed and changes nothing: a store
whose schema is older than this binary is refused (exit 2), not
upgraded, and a database with no store is not given one; without it,
replay applies the migrations this binary has and the store lacks, and
says so on stderr. Exit 1: no such event or saved search, or not
confirmed; exit 2: bad flags or config, an ambiguous provider event id,
an unreachable database, a store the dry run refuses, a paused or
failing destination without --yes.`

// replayItem is one (event, destination) a replay delivers (or would).
type replayItem struct {
	EventID     string `json:"event_id"`
	Destination string `json:"destination"`
	DeliveryID  string `json:"delivery_id,omitempty"` // the new delivery; not in a dry run
}

// replayReport is what replay prints with --json.
type replayReport struct {
	DryRun bool `json:"dry_run"`
	// Matched is how many events --filter or --search accepted.
	MatchedEvents *int `json:"matched_events,omitempty"`
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
	// Troubled are the destinations the replay sends (or would send) into
	// while they are paused or failing, as the API names them.
	Troubled []admin.TroubledDestination `json:"troubled,omitempty"`
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
	// selected event lists them, one refused without --yes the
	// destinations it would send into while they fail.
	Skipped  []skippedItem               `json:"skipped,omitempty"`
	Troubled []admin.TroubledDestination `json:"troubled,omitempty"`
}

type replayOptions struct {
	cfgPath, event, status, source, dest, since, until, reason string
	filter, search                                             string
	dryRun, json, ignoreFilters, yes                           bool
}

func replay(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("replay")
	var o replayOptions
	fs.StringVar(&o.cfgPath, "config", "", "config `file` (default $ANYHOOK_CONFIG, else ./anyhook.yaml)")
	fs.StringVar(&o.event, "event", "", "replay this event: its AnyHook event `id`, a delivery id or the provider's event id")
	fs.StringVar(&o.status, "status", "", "replay the deliveries in this `status`: dead, held, delivered or skipped")
	fs.StringVar(&o.source, "source", "", "only this `source` (with --event: the source of a provider event id)")
	fs.StringVar(&o.dest, "destination", "", "only this `destination`")
	fs.StringVar(&o.filter, "filter", "", "replay the deliveries of the events this CEL `expression` accepts, received from --since to --until")
	fs.StringVar(&o.search, "search", "", "replay the deliveries of the events the saved search of this `name` finds, received from --since to --until")
	fs.StringVar(&o.since, "since", "", "with --status: deliveries created at or after `T`, an RFC 3339 time or a duration ago (e.g. 24h); with --filter, --search: events received")
	fs.StringVar(&o.until, "until", "", "with --status: deliveries created before `T`, an RFC 3339 time or a duration ago; with --filter, --search: events received")
	fs.StringVar(&o.reason, "reason", "", "why, recorded with the replay in the event's actions (one line)")
	fs.BoolVar(&o.ignoreFilters, "ignore-filters", false, "with --event and no --destination: replay to every destination of the source, whatever their filters say")
	fs.BoolVar(&o.dryRun, "dry-run", false, "print what would be replayed; change nothing")
	fs.BoolVar(&o.yes, "yes", false, "with --status: replay into destinations that are paused or failing without asking")
	fs.BoolVar(&o.json, "json", false, "print the result as JSON")
	if code := parse(fs, args, stdout, stderr, replayUsage); code >= 0 {
		return code
	}
	// With --json every outcome is a JSON object on stdout, a failure too.
	bad := func(code int, err error, rep ...replayReport) int {
		if o.json {
			var r replayReport
			if len(rep) > 0 {
				r = rep[0]
			}
			return failJSON(stdout, code, err, r)
		}
		return fail(stderr, code, err)
	}
	o.filter, o.search = strings.TrimSpace(o.filter), strings.TrimSpace(o.search)
	bySel := o.filter != "" || o.search != ""
	switch {
	case (o.event != "") == (o.status != "" || bySel):
		return bad(exitUsage, errors.New("replay: give either --event ID, --status STATUS, --filter EXPR or --search NAME (anyhook replay --help)"))
	case o.filter != "" && o.search != "":
		return bad(exitUsage, errors.New("replay: give --filter or --search, not both"))
	case o.search != "" && (o.source != "" || o.status != ""):
		return bad(exitUsage, errors.New("replay: --search selects the events itself: give --search or --source/--status, not both"))
	case bySel && o.since == "":
		return bad(exitUsage, errors.New("replay: --filter and --search need --since: they read the body of every event received from --since to --until"))
	}
	reason, err := store.CheckReason(o.reason)
	if err != nil {
		return bad(exitUsage, fmt.Errorf("replay: --reason: %w", err))
	}
	o.reason = reason
	// No stored id or name has bytes that are not text; PostgreSQL would
	// fail the lookup where SQLite finds nothing.
	for _, v := range []struct{ flag, value string }{{"--event", o.event}, {"--source", o.source}, {"--destination", o.dest}, {"--search", o.search}} {
		if p := store.TextProblem(v.value); p != "" {
			return bad(exitUsage, fmt.Errorf("replay: %s %s", v.flag, p))
		}
	}
	var f store.DeliveryFilter
	if o.status != "" || bySel {
		f = store.DeliveryFilter{Status: anyhook.DeliveryStatus(o.status), Source: o.source, Destination: o.dest}
		if f.Status != "" && !f.Status.Valid() {
			msg := fmt.Sprintf("replay: --status %q is not a delivery status; a replay takes %s", o.status, statusList(store.ReplayStatuses))
			if st := cli.Suggest(o.status, statusNames(store.ReplayStatuses)); st != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", st)
			}
			return bad(exitUsage, errors.New(msg))
		}
		if why := store.ReplayRefusal(f.Status); f.Status != "" && why != "" {
			if f.Status == anyhook.StatusResolved {
				why += "; replay one event with --event ID"
			}
			return bad(exitUsage, fmt.Errorf("replay: --status %s: %s", f.Status, why))
		}
		now := time.Now()
		for _, t := range []struct {
			flag, value string
			to          *time.Time
		}{{"--since", o.since, &f.Since}, {"--until", o.until, &f.Until}} {
			if t.value == "" {
				continue
			}
			v, err := store.ParseWhen(t.value, now)
			if err != nil {
				return bad(exitUsage, fmt.Errorf("replay: %s: %w", t.flag, err))
			}
			*t.to = v
		}
		if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
			return bad(exitUsage, errors.New("replay: --since must be before --until"))
		}
	} else if o.since != "" || o.until != "" {
		return bad(exitUsage, errors.New("replay: --since and --until go with --status, --filter or --search"))
	}
	var sel admin.EventSelection
	if o.filter != "" {
		var perr *admin.Error
		if sel, perr = admin.FilterSelection(o.source, o.filter); perr != nil {
			return bad(exitUsage, fmt.Errorf("replay: --%s", perr.Message))
		}
	}
	cfg, err := loadConfig(o.cfgPath, stderr, "replay", "database", "destinations.*.sources", "destinations.*.filter")
	if err != nil {
		return bad(exitUsage, err)
	}
	if o.dest != "" && cfg.Destinations[o.dest] == nil {
		// No dispatcher would ever take such a delivery.
		return bad(exitUsage, fmt.Errorf("replay: --destination %q is not in %s (known: %s)", o.dest, cfg.Path, strings.Join(cfg.DestinationOrder, ", ")))
	}
	if (o.status != "" || bySel) && o.dest == "" {
		// Only destinations a dispatcher takes: a replay queued for one the
		// config no longer names would wait for ever.
		f.Destinations = cfg.DestinationOrder
	}
	st, err := openStore(ctx, cfg, "replay", !o.dryRun, stderr)
	if err != nil {
		return bad(exitUsage, err)
	}
	defer st.Close()
	var rep replayReport
	var code int
	switch {
	case o.event != "":
		rep, code, err = replayEvent(ctx, st, cfg, o)
	case bySel:
		rep, code, err = replaySelected(ctx, st, f, sel, o, stderr)
	default:
		rep, code, err = replayStatus(ctx, st, f, o, stderr)
	}
	if err != nil {
		if !o.json {
			rep.printSkipped(stderr)
		}
		return bad(code, err, rep)
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
	// One event is replayed without asking; where it goes while it
	// cannot take it is said all the same.
	troubled, err := store.Trouble(ctx, st, dests, nil)
	if err != nil {
		return rep, exitUsage, fmt.Errorf("replay: %w", err)
	}
	rep.Troubled = admin.TroubledDestinations(troubled)
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
func replayStatus(ctx context.Context, st store.Store, f store.DeliveryFilter, o replayOptions, stderr io.Writer) (replayReport, int, error) {
	rep := replayReport{DryRun: o.dryRun}
	troubled, err := replayTrouble(ctx, st, f)
	if err != nil {
		return rep, exitUsage, fmt.Errorf("replay: %w", err)
	}
	rep.Troubled = admin.TroubledDestinations(troubled)
	if len(troubled) > 0 && !o.dryRun && !o.yes {
		if code, err := confirmTrouble(troubled, o.json, stderr); err != nil {
			return rep, code, err
		}
	}
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

// replaySelected replays, as replayStatus does, the deliveries f selects
// of the events --filter (sel) or the saved search --search selects,
// read as the API's bulk replay reads them (admin.FilterEvents): refused
// whole past its bounds.
func replaySelected(ctx context.Context, st store.Store, f store.DeliveryFilter, sel admin.EventSelection, o replayOptions, stderr io.Writer) (replayReport, int, error) {
	if o.search != "" {
		var err error
		if sel, err = admin.SearchSelection(ctx, st, o.search); err != nil {
			return replayReport{}, selectionExit(err), flagError(err)
		}
		f.Source, f.Status = sel.Source, sel.Status
	}
	ids, err := admin.FilterEvents(ctx, st, sel, f.Since, f.Until, time.Now())
	if err != nil {
		return replayReport{}, selectionExit(err), flagError(err)
	}
	// The window is the events' receive time; the deliveries are those
	// of the events selected, whenever created.
	f.EventIDs, f.Since, f.Until = ids, time.Time{}, time.Time{}
	rep, code, err := replayStatus(ctx, st, f, o, stderr)
	n := len(ids)
	rep.MatchedEvents = &n
	return rep, code, err
}

// selectionExit is the exit code of err from admin.SearchSelection or
// FilterEvents: 1 for no saved search of that name (as for no such
// event), 2 for the rest (flags to change).
func selectionExit(err error) int {
	var e *admin.Error
	if errors.As(err, &e) && e.Status == http.StatusNotFound {
		return exitFail
	}
	return exitUsage
}

// flagError words an admin.Error, whose message names the API's field
// (search, filter, since), for the flag of that name.
func flagError(err error) error {
	var e *admin.Error
	if errors.As(err, &e) {
		return fmt.Errorf("replay: --%s", e.Message)
	}
	return fmt.Errorf("replay: %w", err)
}

// statusNames are ss as strings.
func statusNames(ss []anyhook.DeliveryStatus) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}

// statusList names statuses for a message: "dead, held or delivered".
func statusList(ss []anyhook.DeliveryStatus) string {
	names := statusNames(ss)
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// replayTrouble returns the destinations a bulk replay by f sends into
// that are paused or failing, as the store holds them: a destination
// whose latest attempt failed with none succeeding since
// (store.LatestFailure). The running gateway knows no more than the
// store when it has not attempted them since.
func replayTrouble(ctx context.Context, st store.Store, f store.DeliveryFilter) ([]store.Troubled, error) {
	dests := f.Destinations
	if f.Destination != "" {
		dests = []string{f.Destination}
	}
	ts, err := store.Trouble(ctx, st, dests, nil)
	if err != nil || len(ts) == 0 {
		return nil, err
	}
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Destination
	}
	selected, err := store.Selected(ctx, st, f, names)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(ts, func(t store.Troubled) bool { return !slices.Contains(selected, t.Destination) }), nil
}

// confirmTrouble asks, on a terminal, whether to replay into troubled
// destinations all the same; elsewhere (a script, --json) it refuses and
// says how to go on (--yes). It returns nil to go on.
func confirmTrouble(ts []store.Troubled, asJSON bool, stderr io.Writer) (int, error) {
	var says []string
	for _, t := range ts {
		says = append(says, t.String())
	}
	why := "the replay cannot be delivered now: " + strings.Join(says, "; ")
	const spends = "a failing destination spends the replays' attempts, and they go dead again"
	if asJSON || !interactive() {
		return exitUsage, fmt.Errorf("replay: %s (%s): fix or resume it first, or pass --yes to replay anyway", why, spends)
	}
	fmt.Fprintf(stderr, "%s (%s).\nReplay anyway? [y/N] ", why, spends)
	answer, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	if a := strings.ToLower(strings.TrimSpace(answer)); a == "y" || a == "yes" {
		return exitOK, nil
	}
	return exitFail, errors.New("replay: not confirmed: nothing was replayed")
}

// interactive says whether stdin is a terminal a person answers at (not
// /dev/null, a pipe or a file: a script).
func interactive() bool { return term.IsTerminal(int(os.Stdin.Fd())) }

// cliActor is who a replay from the command line is recorded as.
func cliActor(o replayOptions) store.Actor { return store.Actor{Name: "cli", Reason: o.reason} }

// resolveEvent finds the event id names, as the API's replay does
// (store.Resolve): an AnyHook event id, a delivery id (whose delivery it
// also returns) or a provider event id; source, when set, is the source
// the event must be from, and sources are the configured ones, asked
// first for a provider id. matched says which id it was (event_id,
// delivery_id, provider_event_id). A provider event id found in several
// sources is an error listing them, with the flag that picks one.
func resolveEvent(ctx context.Context, st store.Store, id, source string, sources []string) (ev anyhook.Event, matched string, viaDelivery *anyhook.Delivery, code int, err error) {
	found, err := store.Resolve(ctx, st, id, source, sources)
	var wrong *store.WrongSourceError
	var amb *store.AmbiguousError
	switch {
	case err == nil:
		return found.Event, found.Matched, found.Via, exitOK, nil
	case errors.As(err, &wrong):
		return ev, "", nil, exitUsage, fmt.Errorf("replay: %s--source %q", strings.TrimSuffix(wrong.Error(), strconv.Quote(wrong.Want)), wrong.Want)
	case errors.As(err, &amb):
		hint := "add --source " + strings.Join(amb.Sources(), " or --source ")
		if len(amb.Sources()) == 1 {
			hint = "give the AnyHook event id"
		}
		return ev, "", nil, exitUsage, fmt.Errorf("replay: %s; %s", amb, hint)
	case errors.Is(err, anyhook.ErrNotFound):
		return ev, "", nil, exitFail, fmt.Errorf("replay: %s", strings.TrimSuffix(err.Error(), ": "+anyhook.ErrNotFound.Error()))
	}
	return ev, "", nil, exitUsage, fmt.Errorf("replay: %w", err)
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
		fmt.Fprintf(w, "%s %d %s", verb, r.Count, plural(r.Count, "delivery", "deliveries"))
		if r.MatchedEvents != nil {
			fmt.Fprintf(w, " of the %d %s matched", *r.MatchedEvents, plural(*r.MatchedEvents, "event", "events"))
		}
		fmt.Fprintln(w)
		for _, d := range r.Deliveries {
			fmt.Fprintf(w, "  event %s to %s\n", d.EventID, d.Destination)
		}
	}
	r.printSkipped(w)
	for _, t := range r.Troubled {
		fmt.Fprintf(w, "mind: %s\n", t.Detail)
	}
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

// failJSON prints err as a JSON object on stdout (--json), with what rep
// has to say, and returns code.
func failJSON(stdout io.Writer, code int, err error, rep replayReport) int {
	b, _ := json.Marshal(replayError{Error: strings.TrimPrefix(err.Error(), "replay: "), Exit: code, Skipped: rep.Skipped, Troubled: rep.Troubled})
	fmt.Fprintf(stdout, "%s\n", b)
	return code
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
