package store

import (
	"cmp"
	"context"
	"slices"
	"strings"

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
