package storetest

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// ListFilters: the lists' filters that may select few rows far from the
// newest — a source with few events, a time window — page newest first
// through exactly what they select, alone and combined. A backend may
// answer them by walking its lists in order or by reading the few rows
// and sorting them; its own tests run this with the choice forced each
// way.
func ListFilters(t *testing.T, s store.Store) {
	// 30 events an hour apart, the oldest first (time-ordered ids): two
	// from a rare source, one without deliveries.
	source := map[string]string{}
	var evIDs []string
	for i := range 30 {
		src := "stripe"
		if i == 4 || i == 17 {
			src = "rare"
		}
		ne := newEvent(src, fmt.Sprint("evt_w", i), "billing")
		if i%7 == 0 {
			ne.Destinations = append(ne.Destinations, "ledger")
		}
		if i == 9 {
			ne.Destinations = nil
		}
		ne.Event.ReceivedAt = received.Add(time.Duration(i-30) * time.Hour)
		ingest(t, s, ne)
		source[ne.Event.ID] = src
		evIDs = append(evIDs, ne.Event.ID)
	}
	// One recorded last (the largest id) but received within the window
	// below, between events 12 and 13: a list with a time window is in
	// receive time order (store.EventsByTime).
	late := newEvent("stripe", "evt_w_late")
	late.Event.ReceivedAt = received.Add(-18*time.Hour + 30*time.Minute)
	ingest(t, s, late)
	source[late.Event.ID] = "stripe"
	all, _, err := s.ListDeliveries(ctx(t), store.DeliveryFilter{Limit: 500})
	if err != nil || len(all) < 30 {
		t.Fatalf("all deliveries: %d, %v", len(all), err)
	}
	walkD := func(f store.DeliveryFilter) []string { return deliveryIDs(walkDeliveries(t, s, f)) }
	// Windows by the deliveries' own creation times (the store stamps
	// them): whatever the clocks, they split the list.
	from, to := all[20].CreatedAt, all[5].CreatedAt
	for _, f := range []store.DeliveryFilter{
		{Source: "rare"},
		{Source: "stripe"},
		{Source: "nosuch"},
		{Source: "rare", Destination: "billing"},
		{Source: "stripe", Destination: "ledger"},
		{Source: "rare", Destination: "ledger"}, // rare never sent to ledger
		{Source: "nosuch", Destination: "billing"},
		{Source: "rare", Status: anyhook.StatusPending},
		{Source: "stripe", Destination: "billing", Since: from},
		{Source: "rare", Destination: "billing", Until: to},
		{Since: from, Until: to},
		{Until: to},
		{Since: from},
		{Source: "stripe", Since: from, Until: to},
		{Destination: "ledger", Until: to},
		{Status: anyhook.StatusPending, Since: from, Until: to},
		{Status: anyhook.StatusHeld, Since: from},
		{Status: anyhook.StatusPending, Destination: "ledger", Until: to},
	} {
		var want []string
		for _, d := range all {
			if (f.Source == "" || source[d.EventID] == f.Source) && (f.Destination == "" || d.Destination == f.Destination) &&
				(f.Status == "" || d.Status == f.Status) &&
				(f.Since.IsZero() || !d.CreatedAt.Before(f.Since)) && (f.Until.IsZero() || d.CreatedAt.Before(f.Until)) {
				want = append(want, d.ID)
			}
		}
		f.Limit = 3
		if got := walkD(f); !slices.Equal(got, want) {
			t.Errorf("deliveries %+v: %d %q, want %d %q", f, len(got), got, len(want), want)
		}
	}

	walkE := func(f store.EventFilter) []string { return walkEvents(t, s, f) }
	at := func(i int) time.Time { return received.Add(time.Duration(i-30) * time.Hour) }
	for _, c := range []struct {
		f        store.EventFilter
		from, to int // want the events from..to-1
		onlyRare bool
	}{
		{store.EventFilter{Since: at(10), Until: at(20)}, 10, 20, false},
		{store.EventFilter{Until: at(8)}, 0, 8, false},
		{store.EventFilter{Since: at(25)}, 25, 30, false},
		{store.EventFilter{Source: "rare", Since: at(3), Until: at(18)}, 3, 18, true},
		{store.EventFilter{Type: "nothing.*", Until: at(8)}, 0, 0, false},
		{store.EventFilter{Type: "nothing.here", Since: at(3)}, 0, 0, false},
		{store.EventFilter{Status: anyhook.StatusPending, Until: at(8)}, 0, 8, false},
		{store.EventFilter{Status: anyhook.StatusPending, Since: at(20)}, 20, 30, false},
		{store.EventFilter{Status: anyhook.StatusHeld, Since: at(3)}, 0, 0, false},
		{store.EventFilter{Status: anyhook.StatusPending, Source: "rare"}, 0, 30, true},
		{store.EventFilter{Status: anyhook.StatusPending, Source: "rare", Until: at(10)}, 0, 10, true},
		{store.EventFilter{Status: anyhook.StatusPending, Type: "nothing.here"}, 0, 0, false},
	} {
		var want []string
		for i := c.to - 1; i >= c.from; i-- {
			if !c.onlyRare || source[evIDs[i]] == "rare" {
				want = append(want, evIDs[i])
			}
			if i == 13 && c.from <= 12 && c.to > 13 && !c.onlyRare {
				want = append(want, late.Event.ID)
			}
		}
		c.f.Limit = 3
		if got := walkE(c.f); !slices.Equal(got, want) {
			t.Errorf("events %+v: %d %q, want %d %q", c.f, len(got), got, len(want), want)
		}
	}
	// A provider event id within a window: its own index, not the window's.
	if got := walkE(store.EventFilter{Q: "evt_w15", Until: at(20), Limit: 3}); !slices.Equal(got, []string{evIDs[15]}) {
		t.Errorf("q=evt_w15 until event 20: %q, want event 15", got)
	}
	if got := walkE(store.EventFilter{Q: "evt_w15", Until: at(15), Limit: 3}); len(got) != 0 {
		t.Errorf("q=evt_w15 until event 15: %q, want none", got)
	}
	if got := walkE(store.EventFilter{Q: "evt_w15", Status: anyhook.StatusPending, Limit: 3}); !slices.Equal(got, []string{evIDs[15]}) {
		t.Errorf("q=evt_w15 pending: %q, want event 15", got)
	}
	if got := walkE(store.EventFilter{Q: "evt_w15", Status: anyhook.StatusPending, Since: at(16), Limit: 3}); len(got) != 0 {
		t.Errorf("q=evt_w15 pending since event 16: %q, want none", got)
	}
}
