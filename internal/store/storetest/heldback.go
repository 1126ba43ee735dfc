package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// HeldBackLists: the lists of a status derived from a pause (pending,
// retrying, paused), which compare the deliveries' destination with the
// held-back destinations' names, page through exactly what a per-row
// reading of each delivery's shown status selects, with none, one and
// several destinations held back (by a person and by a breaker), names
// with quotes and commas, and every filter of the lists.
func HeldBackLists(t *testing.T, s store.Store) {
	odd := `o'brien "x", y`
	routes := map[string][]string{
		"stripe": {"billing", odd},
		"github": {"ci", "ledger"},
		"rare":   {"ledger"},
	}
	srcs := []string{"stripe", "github", "rare", "stripe", "github"}
	type evInfo struct {
		source, typ string
		at          time.Time
		key         string
	}
	evs := map[string]evInfo{}
	for i := range 40 {
		src := srcs[i%len(srcs)]
		key := fmt.Sprint("evt_h", i)
		ne := newEvent(src, key, routes[src]...)
		ne.Event.Type = []string{"invoice.paid", "push", "charge.failed"}[i%3]
		ne.Event.ReceivedAt = received.Add(time.Duration(i-40) * time.Hour)
		if i == 11 {
			ne.Destinations = nil
		}
		ingest(t, s, ne)
		evs[ne.Event.ID] = evInfo{src, ne.Event.Type, ne.Event.ReceivedAt, key}
	}
	// Some of each destination's deliveries retry (due in a century),
	// some are delivered.
	for _, dest := range []string{"billing", odd, "ci", "ledger"} {
		for i, c := range claim(t, s, dest, 5, time.Minute) {
			if i%2 == 0 {
				finish(t, s, retry(c, hundredYears))
			} else {
				finish(t, s, delivered(c))
			}
		}
	}
	walkD := func(f store.DeliveryFilter) []anyhook.Delivery { return walkDeliveries(t, s, f) }
	walkE := func(f store.EventFilter) []string { return walkEvents(t, s, f) }
	ids := deliveryIDs
	all := walkD(store.DeliveryFilter{Limit: 7})
	from, to := all[len(all)*3/4].CreatedAt, all[len(all)/4].CreatedAt
	at := func(i int) time.Time { return received.Add(time.Duration(i-40) * time.Hour) }
	check := func(held string) {
		t.Helper()
		// The brute force: every delivery with its status as shown.
		all := walkD(store.DeliveryFilter{Limit: 500})
		for _, st := range []anyhook.DeliveryStatus{anyhook.StatusPending, anyhook.StatusRetrying, anyhook.StatusPaused, anyhook.StatusDelivered} {
			for _, f := range []store.DeliveryFilter{
				{}, {Source: "stripe"}, {Source: "github"}, {Source: "rare"}, {Source: "nosuch"},
				{Destination: odd}, {Destination: "ci"}, {Destination: "ledger"}, {Source: "github", Destination: "ci"},
				{Since: from}, {Until: to}, {Since: from, Until: to}, {Source: "stripe", Since: from}, {Source: "github", Until: to},
				{Destination: "ci", Since: from},
			} {
				f.Status = st
				var want []string
				for _, d := range all {
					e := evs[d.EventID]
					if d.Status == st && (f.Source == "" || e.source == f.Source) && (f.Destination == "" || d.Destination == f.Destination) &&
						(f.Since.IsZero() || !d.CreatedAt.Before(f.Since)) && (f.Until.IsZero() || d.CreatedAt.Before(f.Until)) {
						want = append(want, d.ID)
					}
				}
				for _, limit := range []int{2, 500} {
					f.Limit = limit
					got := walkD(f)
					for _, d := range got {
						if d.Status != st {
							t.Errorf("held back %s: deliveries %+v: %s shown %s", held, f, d.ID, d.Status)
						}
					}
					if g := ids(got); !slices.Equal(g, want) {
						t.Errorf("held back %s: deliveries %+v: %d %q, want %d %q", held, f, len(g), g, len(want), want)
					}
				}
			}
			for _, f := range []store.EventFilter{
				{}, {Source: "stripe"}, {Source: "github"}, {Source: "rare"}, {Type: "push"}, {Q: "evt_h7"}, {Q: "evt_h11"},
				{Since: at(10)}, {Until: at(30)}, {Since: at(5), Until: at(25)}, {Source: "github", Since: at(12)},
				{Source: "stripe", Until: at(20)}, {Type: "invoice.paid", Since: at(3)}, {Type: "invoice.*"},
			} {
				f.Status = st
				var want []string
				type ev struct {
					id string
					at time.Time
				}
				var wantEvs []ev
				for id, e := range evs {
					if (f.Source != "" && e.source != f.Source) || (f.Type != "" && f.Type != "invoice.*" && e.typ != f.Type) ||
						(f.Type == "invoice.*" && e.typ != "invoice.paid") || (f.Q != "" && e.key != f.Q) ||
						(!f.Since.IsZero() && e.at.Before(f.Since)) || (!f.Until.IsZero() && !e.at.Before(f.Until)) {
						continue
					}
					if slices.ContainsFunc(all, func(d anyhook.Delivery) bool { return d.EventID == id && d.Status == st }) {
						wantEvs = append(wantEvs, ev{id, e.at})
					}
				}
				// Newest first (received in the order of their ids).
				slices.SortFunc(wantEvs, func(a, b ev) int { return b.at.Compare(a.at) })
				for _, e := range wantEvs {
					want = append(want, e.id)
				}
				for _, limit := range []int{2, 500} {
					f.Limit = limit
					if got := walkE(f); !slices.Equal(got, want) {
						t.Errorf("held back %s: events %+v: %d %q, want %d %q", held, f, len(got), got, len(want), want)
					}
				}
			}
		}
	}
	check("none")
	if err := s.SetPaused(ctx(t), odd, true); err != nil {
		t.Fatal(err)
	}
	check("odd")
	trip(t, s, "ci", received, received.Add(time.Hour))
	check("odd, ci (breaker)")
	if err := s.SetPaused(ctx(t), "ledger", true); err != nil {
		t.Fatal(err)
	}
	check("odd, ci (breaker), ledger")
	if err := s.SetPaused(ctx(t), odd, false); err != nil {
		t.Fatal(err)
	}
	check("ci (breaker), ledger")
}
