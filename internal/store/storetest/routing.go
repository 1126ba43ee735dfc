package storetest

import (
	"fmt"
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

// testTypeGlobPages: a type glob pages newest first through the events of
// every type it matches (the stores answer it one type at a time, merged),
// with other filters and cursors, and a glob whose prefix allows more than
// sqlstore.MaxGlobTypes types (answered by a walk instead) alike.
func testTypeGlobPages(t *testing.T, s store.Store) {
	types := []string{"invoice.paid", "Invoice.Created", "invoice.voided", "charge.succeeded", "invoices", "invoice"}
	var evs []store.NewEvent
	want := map[string][]string{} // glob → ids, oldest first
	matches := func(glob string, ne store.NewEvent) {
		want[glob] = append(want[glob], ne.Event.ID)
	}
	for i := range 30 {
		src := "stripe"
		if i%3 == 0 {
			src = "shop"
		}
		ne := newEvent(src, fmt.Sprint("evt_", i), "billing")
		ne.Event.Type = types[i%len(types)]
		evs = append(evs, ne)
		if ne.Event.Type != "charge.succeeded" && ne.Event.Type != "invoice" && ne.Event.Type != "invoices" {
			matches("invoice.*", ne)
			if src == "shop" {
				matches("shop invoice.*", ne)
			}
		}
		if ne.Event.Type == "Invoice.Created" || ne.Event.Type == "invoice.voided" || ne.Event.Type == "charge.succeeded" {
			matches("*.*ED", ne)
		}
	}
	// The ids are time-ordered: ingesting one at a time keeps them in order.
	for _, ne := range evs {
		ingest(t, s, ne)
	}
	// Many types under one prefix: more than a store answers one at a time.
	for i := range 40 {
		ne := newEvent("github", fmt.Sprint("gh_", i))
		ne.Event.Type = fmt.Sprintf("push.%02d", i)
		ingest(t, s, ne)
		if i%10 == 7 {
			matches("push.*7", ne)
		}
	}
	walk := func(f store.EventFilter) []string {
		t.Helper()
		var got []string
		for range 50 {
			evs, next, err := s.ListEvents(ctx(t), f)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) > f.Limit {
				t.Fatalf("type=%q: a page of %d, limit %d", f.Type, len(evs), f.Limit)
			}
			for _, ev := range evs {
				got = append(got, ev.ID)
			}
			if next == "" {
				return got
			}
			f.Cursor = next
		}
		t.Fatalf("type=%q: pages never end", f.Type)
		return nil
	}
	for _, c := range []struct {
		name string
		f    store.EventFilter
	}{
		{"invoice.*", store.EventFilter{Type: "INVOICE.*", Limit: 4}},
		{"invoice.*", store.EventFilter{Type: "invoice.*", Limit: 5}}, // pages end exactly at the last event
		{"shop invoice.*", store.EventFilter{Type: "invoice.*", Source: "shop", Limit: 3}},
		{"*.*ED", store.EventFilter{Type: "*.*ED", Limit: 2}},
		{"push.*7", store.EventFilter{Type: "push.*7", Limit: 3}},
		{"none", store.EventFilter{Type: "nothing.*", Limit: 3}},
	} {
		exp := slices.Clone(want[c.name])
		slices.Reverse(exp)
		if got := walk(c.f); !slices.Equal(got, exp) {
			t.Errorf("%s (type=%q source=%q limit %d): %d events %q, want %d %q", c.name, c.f.Type, c.f.Source, c.f.Limit, len(got), got, len(exp), exp)
		}
	}
}
