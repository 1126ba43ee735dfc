package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
)

// ReplayLister is what DryRunReplay reads.
type ReplayLister interface {
	Event(ctx context.Context, id string) (anyhook.Event, error)
	ListDeliveries(ctx context.Context, f DeliveryFilter) ([]anyhook.Delivery, string, error)
}

// DryRunReplay is what store.ReplayDeliveries would do with f, read
// without changing anything: the (event, destination) pairs it would
// replay, in (event id, destination) order, and the events it would skip
// because retention pruned their bodies.
func DryRunReplay(ctx context.Context, st ReplayLister, f DeliveryFilter) (DryRun, error) {
	f.Limit = 500
	type pair struct{ event, dest string }
	seen := map[pair]bool{}
	var pairs []pair
	// Only an event all of whose deliveries are done can have lost its
	// body (sqlstore.NeedsBody): one with a selected delivery still to send
	// or to resolve has it.
	needs := map[string]bool{}
	for {
		ds, next, err := st.ListDeliveries(ctx, f)
		if err != nil {
			return DryRun{}, err
		}
		for _, d := range ds {
			if d.Status == anyhook.StatusResolved {
				continue // never selected: a person dealt with it
			}
			if p := (pair{d.EventID, d.Destination}); !seen[p] {
				seen[p] = true
				pairs = append(pairs, p)
			}
			if d.Status != anyhook.StatusDelivered && d.Status != anyhook.StatusSkipped {
				needs[d.EventID] = true
			}
		}
		if next == "" {
			break
		}
		f.Cursor = next
	}
	slices.SortFunc(pairs, func(a, b pair) int { return cmp.Or(strings.Compare(a.event, b.event), strings.Compare(a.dest, b.dest)) })
	var out DryRun
	pruned := map[string]bool{}
	// As ReplayDeliveries (sqlstore.NotResolved): never a pair with a
	// delivery still to send, which the replay would send twice.
	unfinished := map[pair]bool{}
	for i, p := range pairs {
		if i > 0 && pairs[i-1].event == p.event {
			continue
		}
		ev, err := st.Event(ctx, p.event)
		if err != nil {
			return DryRun{}, err
		}
		for _, d := range ev.Deliveries {
			if d.Status == anyhook.StatusPending || d.Status == anyhook.StatusRetrying || d.Status == anyhook.StatusPaused || d.Status == anyhook.StatusDelivering {
				unfinished[pair{d.EventID, d.Destination}] = true
			}
		}
	}
	pairs = slices.DeleteFunc(pairs, func(p pair) bool { return unfinished[p] })
	for i, p := range pairs {
		if i == 0 || pairs[i-1].event != p.event {
			if !needs[p.event] {
				ev, err := st.Event(ctx, p.event)
				if err != nil {
					return DryRun{}, err
				}
				if ev.BodyPruned {
					pruned[p.event] = true
					out.Pruned = append(out.Pruned, p.event)
				}
			}
		}
		if !pruned[p.event] {
			out.Pairs = append(out.Pairs, [2]string{p.event, p.dest})
		}
	}
	out.Count = len(out.Pairs)
	return out, nil
}

// DryRun is what a bulk replay would do.
type DryRun struct {
	BulkReplay
	Pairs [][2]string // (event id, destination) it would replay
}

// ReplayStatuses are the statuses a bulk replay selects by: deliveries
// that are done (delivered, skipped) or wait for a person (dead, held).
var ReplayStatuses = []anyhook.DeliveryStatus{anyhook.StatusDead, anyhook.StatusHeld, anyhook.StatusDelivered, anyhook.StatusSkipped}

// ReplayRefusal says why a bulk replay does not select deliveries in
// status s, for the command line and the API to refuse it with; "" when
// it does. A delivery still to be sent (pending, retrying, delivering, paused)
// would go out twice: once as itself, once as the replay.
func ReplayRefusal(s anyhook.DeliveryStatus) string {
	switch s {
	case anyhook.StatusResolved:
		return "a bulk replay never selects resolved deliveries (a person replayed or discarded them)"
	case anyhook.StatusPending:
		return "a bulk replay never selects pending deliveries: each is still to be sent, at its next attempt, so a replay would send its event twice; those that ran out of attempts are dead, and replayed with status dead"
	case anyhook.StatusDelivering:
		return "a bulk replay never selects delivering deliveries: each is being sent now, so a replay would send its event twice"
	case anyhook.StatusPaused:
		return "a bulk replay never selects paused deliveries: each is sent once its destination is resumed, so a replay would send its event twice; resume the destination instead"
	case anyhook.StatusRetrying:
		return "a bulk replay never selects retrying deliveries: each is sent again at its next attempt, so a replay would send its event twice; those that run out of attempts are dead, and replayed with status dead"
	}
	return ""
}

// Troubled is a destination a replay would send into while it cannot
// take the deliveries: paused (they wait), or failing (each attempt is
// spent, and a delivery that runs out of them is dead again).
type Troubled struct {
	Destination string
	Paused      bool
	Breaker     string // Paused by its breaker (auto_pause): why it tripped
	Failing     string // how it fails, in words; "" when it is not known to
}

// Reason is "paused" or "failing".
func (t Troubled) Reason() string {
	if t.Paused {
		return "paused"
	}
	return "failing"
}

func (t Troubled) String() string {
	if t.Paused && t.Breaker != "" {
		return t.Destination + " is paused by its breaker (auto_pause: " + t.Breaker + "): the replays wait until a probe succeeds or it is resumed"
	}
	if t.Paused {
		return t.Destination + " is paused: the replays wait until it is resumed"
	}
	return t.Destination + " is failing: " + t.Failing
}

// TroubleReader reads what Trouble and LatestFailure need.
type TroubleReader interface {
	Paused(ctx context.Context) (map[string]bool, error)
	Breakers(ctx context.Context) (map[string]Breaker, error)
	ListDeliveries(ctx context.Context, f DeliveryFilter) ([]anyhook.Delivery, string, error)
	QueueStats(ctx context.Context, destinations []string) (QueueStats, error)
	QueueReader
}

// Trouble returns those of dests that are paused or failing, in the order
// of dests. failing says whether and how a destination fails ("" when it
// does not); nil asks the store (LatestFailure).
func Trouble(ctx context.Context, st TroubleReader, dests []string, failing func(ctx context.Context, dest string) (string, error)) ([]Troubled, error) {
	if failing == nil {
		failing = func(ctx context.Context, dest string) (string, error) { return LatestFailure(ctx, st, dest) }
	}
	paused, err := st.Paused(ctx)
	if err != nil {
		return nil, err
	}
	breakers, err := st.Breakers(ctx)
	if err != nil {
		return nil, err
	}
	var out []Troubled
	for _, d := range dests {
		if paused[d] {
			out = append(out, Troubled{Destination: d, Paused: true})
			continue
		}
		if b, ok := breakers[d]; ok {
			out = append(out, Troubled{Destination: d, Paused: true, Breaker: b.Reason})
			continue
		}
		how, err := failing(ctx, d)
		if err != nil {
			return nil, err
		}
		if how != "" {
			out = append(out, Troubled{Destination: d, Failing: how})
		}
	}
	return out, nil
}

// recentDeliveries bounds how many of a destination's newest deliveries
// LatestFailure reads the last attempts of.
const recentDeliveries = 20

// LatestFailure says, from what the store holds, whether destination is
// failing: the latest attempt among its newest deliveries failed, and no
// delivery to it succeeded after that attempt began. It says how ("" when
// not: the latest succeeded, or nothing was attempted). It reads a page
// of deliveries and their last attempts, not the whole history; a process
// that sends knows better (delivery.Engine's health) and is asked first
// where there is one.
func LatestFailure(ctx context.Context, st TroubleReader, destination string) (string, error) {
	ds, _, err := st.ListDeliveries(ctx, DeliveryFilter{Destination: destination, Limit: recentDeliveries})
	if err != nil {
		return "", err
	}
	var ids []string
	for _, d := range ds {
		if d.AttemptCount > 0 {
			ids = append(ids, d.ID)
		}
	}
	if len(ids) == 0 {
		return "", nil
	}
	rows, err := st.QueueRows(ctx, ids)
	if err != nil {
		return "", err
	}
	var last anyhook.Attempt
	for _, r := range rows {
		if r.Last.Number > 0 && r.Last.StartedAt.After(last.StartedAt) {
			last = r.Last
		}
	}
	// A lost attempt (LostError) says nothing of the destination: its
	// worker stopped, the destination may be fine.
	if last.Number == 0 || last.Error == "" || last.Error == LostError {
		return "", nil
	}
	qs, err := st.QueueStats(ctx, []string{destination})
	if err != nil {
		return "", err
	}
	if ok := qs.LastDelivered[destination]; !ok.IsZero() && !ok.Before(last.StartedAt) {
		return "", nil
	}
	what := last.Error // "HTTP 500", "dial tcp …: connection refused"
	return fmt.Sprintf("its latest attempt, at %s, failed (%s), and none has succeeded since", last.StartedAt.UTC().Format(time.RFC3339), what), nil
}

// Selected returns those of dests whose deliveries f selects (Destination
// and Destinations aside): where a bulk replay by f would send.
func Selected(ctx context.Context, st ReplayLister, f DeliveryFilter, dests []string) ([]string, error) {
	var out []string
	for _, d := range dests {
		g := f
		g.Destination, g.Destinations, g.Limit, g.Cursor = d, nil, 50, ""
		for {
			ds, next, err := st.ListDeliveries(ctx, g)
			if err != nil {
				return nil, err
			}
			if slices.ContainsFunc(ds, func(d anyhook.Delivery) bool { return d.Status != anyhook.StatusResolved }) {
				out = append(out, d)
				break
			}
			if next == "" {
				break
			}
			g.Cursor = next
		}
	}
	return out, nil
}
