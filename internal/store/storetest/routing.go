package storetest

import (
	"slices"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/store"
)

// testEventTypeAndNotRouted: an event's type and the destinations a filter
// kept it from are stored and read back by Event, lists and claims; the
// type glob selects events in either store alike.
func testEventTypeAndNotRouted(t *testing.T, s store.Store) {
	mk := func(key, typ string, notRouted ...string) string {
		ne := newEvent("stripe", key, "billing")
		ne.Event.Type, ne.Event.NotRouted = typ, notRouted
		return ingest(t, s, ne)[0].ID
	}
	paid := mk("evt_1", "invoice.paid", "audit", "crm")
	created := mk("evt_2", "Invoice.Created")
	charge := mk("evt_3", "charge.refunded", "audit")
	untyped := mk("evt_4", "")
	odd := mk("evt_5", "a_b%c")

	ev := event(t, s, paid)
	if ev.Type != "invoice.paid" || !slices.Equal(ev.NotRouted, []string{"audit", "crm"}) {
		t.Fatalf("Event: type %q not_routed %q", ev.Type, ev.NotRouted)
	}
	if ev := event(t, s, created); ev.NotRouted != nil {
		t.Fatalf("routed everywhere: not_routed %q, want nil", ev.NotRouted)
	}
	cs := claim(t, s, "billing", 10, time.Minute)
	types := map[string]string{}
	for _, c := range cs {
		types[c.Event.ID] = c.Event.Type
	}
	if types[charge] != "charge.refunded" || types[untyped] != "" {
		t.Fatalf("claimed types %v", types)
	}
	for glob, want := range map[string][]string{
		"invoice.*":       {created, paid},
		"invoice.paid":    {paid},
		"*.refunded":      {charge},
		"*":               {odd, untyped, charge, created, paid},
		"a_b%c":           {odd},
		"a?b*":            nil,
		"axb%c":           nil,
		"charge":          nil,
		"CHARGE.REFUNDED": {charge},
	} {
		evs, _, err := s.ListEvents(ctx(t), store.EventFilter{Type: glob})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, ev := range evs {
			got = append(got, ev.ID)
			if ev.ID == paid && !slices.Equal(ev.NotRouted, []string{"audit", "crm"}) {
				t.Errorf("list: not_routed %q", ev.NotRouted)
			}
		}
		if glob == "*" {
			// * matches every type, the empty one too.
			slices.Sort(got)
			want = slices.Clone(want)
			slices.Sort(want)
		}
		if !slices.Equal(got, want) {
			t.Errorf("type=%q: %q, want %q", glob, got, want)
		}
	}
}
