package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// ListStatusSourceType: the events of a source and a type with a delivery
// in a status, and a source's deliveries in a status, page newest first
// through exactly what they select, with and without a time window —
// pairs that never occur, pairs none of whose events has a delivery in
// the status, types named in another case, events without a type, and a
// replay's delivery, which keeps its event's source and type as an
// ingested one does. A backend may answer them from the deliveries' own
// source and type or by probing the events; its own tests run this with
// its choice forced each way.
func ListStatusSourceType(t *testing.T, s store.Store) {
	CheckStatusSourceType(t, s, SeedStatusSourceType(t, s))
}

// SeedStatusSourceType records ListStatusSourceType's events and
// outcomes in s and returns the events' ids, oldest first: a backend's
// upgrade test seeds a store, takes it back to before the deliveries kept
// their type (migration 0043), opens it again and checks it with
// CheckStatusSourceType.
func SeedStatusSourceType(t *testing.T, s store.Store) []string {
	t.Helper()
	types := []string{"Charge.Failed", "charge.succeeded", "", "push"}
	var ids []string
	for i := range 24 {
		src := "stripe"
		if i%2 == 1 {
			src = "github"
		}
		ne := newEvent(src, fmt.Sprint("evt_st", i), "billing")
		ne.Event.Type = types[i%len(types)]
		if i%5 == 0 {
			ne.Destinations = append(ne.Destinations, "ledger")
		}
		ne.Event.ReceivedAt = received.Add(time.Duration(i-24) * time.Hour)
		ingest(t, s, ne)
		ids = append(ids, ne.Event.ID)
	}
	// billing: every third event's delivery dies, the rest are delivered. Event 0's is then replayed and dies again.
	var outs []store.Outcome
	for _, c := range claim(t, s, "billing", 100, time.Minute) {
		i := slices.Index(ids, c.Event.ID)
		if i%3 == 0 {
			outs = append(outs, dead(c))
		} else {
			outs = append(outs, delivered(c))
		}
	}
	finish(t, s, outs...)
	if _, err := s.Replay(ctx(t), ids[0], []string{"billing"}, tester); err != nil {
		t.Fatal(err)
	}
	cs := claim(t, s, "billing", 100, time.Minute)
	if len(cs) != 1 || cs[0].Event.ID != ids[0] {
		t.Fatalf("claimed %d after the replay, want event 0's", len(cs))
	}
	finish(t, s, dead(cs[0]))
	// ledger: the deliveries of events 0 and 15 die too, so that each
	// has two dead deliveries (a list of the events must name it once,
	// and still fill its page); the rest are retrying.
	outs = nil
	for _, c := range claim(t, s, "ledger", 100, time.Minute) {
		if i := slices.Index(ids, c.Event.ID); i%15 == 0 {
			outs = append(outs, dead(c))
		} else {
			outs = append(outs, retry(c, time.Hour))
		}
	}
	finish(t, s, outs...)
	return ids
}

// CheckStatusSourceType checks the lists of ListStatusSourceType on the
// events ids that SeedStatusSourceType recorded.
func CheckStatusSourceType(t *testing.T, s store.Store, ids []string) {
	t.Helper()
	evs := map[string]anyhook.Event{}
	for _, id := range ids {
		ev, err := s.Event(ctx(t), id)
		if err != nil {
			t.Fatal(err)
		}
		evs[id] = ev
	}
	at := func(i int) time.Time { return received.Add(time.Duration(i-24) * time.Hour) }
	for _, st := range []anyhook.DeliveryStatus{anyhook.StatusDead, anyhook.StatusDelivered, anyhook.StatusResolved, anyhook.StatusPending, anyhook.StatusRetrying} {
		for _, src := range []string{"stripe", "github", ""} {
			for _, typ := range []string{"charge.failed", "CHARGE.FAILED", "charge.succeeded", "push", "nothing.here", ""} {
				for _, w := range [][3]int{{0, 24, 1}, {0, 24, 2}, {5, 24, 2}, {0, 18, 2}} {
					f := store.EventFilter{Status: st, Source: src, Type: typ, Limit: w[2]}
					if w[0] > 0 {
						f.Since = at(w[0])
					}
					if w[1] < 24 {
						f.Until = at(w[1])
					}
					var want []string
					for i := w[1] - 1; i >= w[0]; i-- {
						ev := evs[ids[i]]
						if (src == "" || ev.Source == src) && (typ == "" || strings.EqualFold(ev.Type, typ)) &&
							slices.ContainsFunc(ev.Deliveries, func(d anyhook.Delivery) bool { return d.Status == st }) {
							want = append(want, ev.ID)
						}
					}
					if got := walkEvents(t, s, f); !slices.Equal(got, want) {
						t.Errorf("events %s of %s, type %q, events %d..%d: %d %q, want %d %q", st, src, typ, w[0], w[1], len(got), got, len(want), want)
					}
				}
			}
			// The source's deliveries in the status.
			var want []string
			for _, d := range walkDeliveries(t, s, store.DeliveryFilter{Limit: 500}) {
				if (src == "" || evs[d.EventID].Source == src) && d.Status == st {
					want = append(want, d.ID)
				}
			}
			if got := deliveryIDs(walkDeliveries(t, s, store.DeliveryFilter{Status: st, Source: src, Limit: 2})); !slices.Equal(got, want) {
				t.Errorf("deliveries %s of %s: %q, want %q", st, src, got, want)
			}
		}
	}
	// The replayed event is listed dead by its type: its replay delivery
	// kept the event's type.
	if got := walkEvents(t, s, store.EventFilter{Status: anyhook.StatusDead, Source: "stripe", Type: "charge.failed"}); !slices.Contains(got, ids[0]) {
		t.Errorf("dead charge.failed of stripe: %q, want event 0 (its replay died)", got)
	}
}
