package storetest

import (
	"errors"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// runLookup checks the lookups by id: store.DeliveryReader (a delivery is
// found by its id, an unknown id is ErrNotFound), store.QueueReader and
// store.DestinationDiscarder.
func runLookup(t *testing.T, open Open) {
	t.Run("Delivery", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		res := ingest(t, s, newEvent("stripe", "evt_lookup", "billing", "crm"))
		ev := event(t, s, res[0].ID)
		for _, want := range ev.Deliveries {
			got, err := s.Delivery(ctx(t), want.ID)
			if err != nil {
				t.Fatalf("Delivery(%s): %v", want.ID, err)
			}
			if got.ID != want.ID || got.EventID != ev.ID || got.Destination != want.Destination || got.Status != anyhook.StatusPending {
				t.Errorf("Delivery(%s) = %+v, want %+v", want.ID, got, want)
			}
		}
		if _, err := s.Delivery(ctx(t), ev.ID); !errors.Is(err, anyhook.ErrNotFound) {
			t.Errorf("Delivery(an event id) = %v, want ErrNotFound", err)
		}
	})
	t.Run("QueueRows", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		ev := event(t, s, ingest(t, s, newEvent("stripe", "evt_queue", "billing", "crm"))[0].ID)
		// billing: two failed attempts, the second a transport error; crm: none.
		c := claim(t, s, "billing", 1, time.Minute)
		finish(t, s, retry(c[0], 0))
		c = claim(t, s, "billing", 1, time.Minute)
		o := retry(c[0], 0)
		o.Status, o.Result.StatusCode, o.Result.Error = anyhook.StatusDead, 0, "dial tcp 127.0.0.1:9: connection refused"
		o.Result.Outcome = anyhook.OutcomeNotSent
		finish(t, s, o)
		var billing, crm string
		for _, d := range ev.Deliveries {
			if d.Destination == "billing" {
				billing = d.ID
			} else {
				crm = d.ID
			}
		}
		rows, err := s.QueueRows(ctx(t), []string{billing, crm, "nope"})
		if err != nil {
			t.Fatal(err)
		}
		b := rows[billing]
		if len(rows) != 2 || b.ProviderEventID != "evt_queue" || b.Last.Number != 2 || b.Last.StatusCode != 0 ||
			b.Last.Error != "dial tcp 127.0.0.1:9: connection refused" || !b.Last.StartedAt.Equal(received) || b.Last.Outcome != anyhook.OutcomeNotSent {
			t.Errorf("QueueRows = %+v; want billing's second attempt (a transport error), crm's none", rows)
		}
		if r := rows[crm]; r.ProviderEventID != "evt_queue" || r.Last.Number != 0 {
			t.Errorf("QueueRows(crm) = %+v; want no attempt", r)
		}
	})
	t.Run("DiscardDestination", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		// gone: one pending, one dead, one delivering, one delivered;
		// kept: one pending.
		var evs []string
		for i := range 4 {
			evs = append(evs, ingest(t, s, newEvent("stripe", fmt.Sprint("evt_orphan_", i), "gone", "kept"))[0].ID)
		}
		c := claim(t, s, "gone", 1, time.Minute)
		o := retry(c[0], 0)
		o.Status = anyhook.StatusDead
		finish(t, s, o)
		c = claim(t, s, "gone", 1, time.Minute)
		finish(t, s, delivered(c[0]))
		delivering := claim(t, s, "gone", 1, time.Minute)[0].Delivery.ID
		by := store.Actor{Name: "api", Reason: "billing-v1 was retired"}
		n, err := s.DiscardDestination(ctx(t), "gone", by)
		if err != nil || n != 2 {
			t.Fatalf("DiscardDestination = %d, %v; want 2 (the pending and the dead)", n, err)
		}
		statuses := map[anyhook.DeliveryStatus]int{}
		actions := 0
		for _, id := range evs {
			ev := event(t, s, id)
			for _, d := range ev.Deliveries {
				if d.Destination == "kept" {
					if d.Status != anyhook.StatusPending {
						t.Errorf("kept's delivery %s is %s", d.ID, d.Status)
					}
					continue
				}
				statuses[d.Status]++
				if d.Status == anyhook.StatusResolved && (d.Resolution.Kind != anyhook.ResolvedDiscarded || d.Resolution.By != "api" || d.Resolution.Reason != by.Reason) {
					t.Errorf("discarded delivery %s: %+v", d.ID, d.Resolution)
				}
				if d.ID == delivering && d.Status != anyhook.StatusDelivering {
					t.Errorf("the delivering delivery became %s", d.Status)
				}
			}
			for _, a := range ev.Actions {
				if a.Kind == store.ActionDiscard && a.Destination == "gone" && a.Actor == "api" && a.Reason == by.Reason {
					actions++
				}
			}
		}
		want := map[anyhook.DeliveryStatus]int{anyhook.StatusResolved: 2, anyhook.StatusDelivering: 1, anyhook.StatusDelivered: 1}
		if !maps.Equal(statuses, want) || actions != 2 {
			t.Errorf("after the discard: %v, %d discard actions; want %v and 2", statuses, actions, want)
		}
		if n, err := s.DiscardDestination(ctx(t), "gone", by); err != nil || n != 0 {
			t.Errorf("DiscardDestination again = %d, %v; want 0", n, err)
		}
	})
	t.Run("ExpirePending", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		// pull: three pending (one of them retrying), one delivering, one
		// delivered; other: five pending.
		var evs []string
		for i := range 5 {
			evs = append(evs, ingest(t, s, newEvent("stripe", fmt.Sprint("evt_expire_", i), "pull", "other"))[0].ID)
		}
		c := claim(t, s, "pull", 1, time.Minute)
		finish(t, s, retry(c[0], time.Hour))
		c = claim(t, s, "pull", 1, time.Minute)
		finish(t, s, delivered(c[0]))
		delivering := claim(t, s, "pull", 1, time.Minute)[0].Delivery.ID
		if got, err := s.ExpirePending(ctx(t), "pull", time.Now().Add(-time.Hour), 10, "too old"); err != nil || len(got) != 0 {
			t.Fatalf("ExpirePending of what is older than an hour = %d, %v; want none", len(got), err)
		}
		first, err := s.ExpirePending(ctx(t), "pull", time.Now().Add(time.Hour), 1, "too old")
		if err != nil || len(first) != 1 {
			t.Fatalf("ExpirePending limit 1 = %d, %v", len(first), err)
		}
		rest, err := s.ExpirePending(ctx(t), "pull", time.Now().Add(time.Hour), 10, "too old")
		if err != nil || len(rest) != 2 {
			t.Fatalf("ExpirePending of the rest = %d, %v; want the other two pending", len(rest), err)
		}
		for _, d := range append(first, rest...) {
			if d.Status != anyhook.StatusDead || d.Destination != "pull" || d.Note != "too old" {
				t.Errorf("expired %+v", d)
			}
		}
		statuses := map[anyhook.DeliveryStatus]int{}
		for _, id := range evs {
			for _, d := range event(t, s, id).Deliveries {
				if d.Destination == "other" {
					if d.Status != anyhook.StatusPending {
						t.Errorf("other's delivery %s is %s", d.ID, d.Status)
					}
					continue
				}
				statuses[d.Status]++
				if d.ID == delivering && d.Status != anyhook.StatusDelivering {
					t.Errorf("the delivering delivery became %s", d.Status)
				}
			}
		}
		want := map[anyhook.DeliveryStatus]int{anyhook.StatusDead: 3, anyhook.StatusDelivering: 1, anyhook.StatusDelivered: 1}
		if !maps.Equal(statuses, want) {
			t.Errorf("after expiring: %v, want %v", statuses, want)
		}
	})

}
