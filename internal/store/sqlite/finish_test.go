package sqlite_test

import (
	"slices"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// TestFinishTwoOutcomesOfOneDelivery: Finish writes a batch's outcomes in
// multi-row statements; a second outcome of the same attempt in one call
// is lost, as it would be written after the first, and records no second
// attempt. (The engine's finisher never sends two; the store's contract
// holds anyway.)
func TestFinishTwoOutcomesOfOneDelivery(t *testing.T) {
	s := open(t)
	now := time.Now()
	var evs []store.NewEvent
	for range 3 {
		id := store.NewID()
		evs = append(evs, store.NewEvent{Event: anyhook.Event{ID: id, Source: "s", DedupKey: id, ReceivedAt: now, Body: []byte(`{}`)},
			Destinations: []string{"d"}})
	}
	if _, err := s.Ingest(t.Context(), evs); err != nil {
		t.Fatal(err)
	}
	cs, err := s.Claim(t.Context(), "d", 3, time.Hour)
	if err != nil || len(cs) != 3 {
		t.Fatalf("claimed %d: %v", len(cs), err)
	}
	out := func(c store.Claim, status anyhook.DeliveryStatus) store.Outcome {
		return store.Outcome{DeliveryID: c.Delivery.ID, Attempt: c.Delivery.AttemptCount, Status: status,
			Result: anyhook.Attempt{Number: c.Delivery.AttemptCount, StartedAt: now, StatusCode: 200}}
	}
	outs := []store.Outcome{out(cs[0], anyhook.StatusDelivered), out(cs[1], anyhook.StatusDelivered), out(cs[0], anyhook.StatusDead), out(cs[2], anyhook.StatusDelivered)}
	lost, err := s.Finish(t.Context(), outs)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(lost, []string{cs[0].Delivery.ID}) {
		t.Fatalf("lost %v, want the second outcome of %s", lost, cs[0].Delivery.ID)
	}
	for _, c := range cs {
		ev, err := s.Event(t.Context(), c.Event.ID)
		if err != nil || len(ev.Deliveries) != 1 {
			t.Fatalf("event %s: %d deliveries, %v", c.Event.ID, len(ev.Deliveries), err)
		}
		if d := ev.Deliveries[0]; d.Status != anyhook.StatusDelivered || len(d.Attempts) != 1 {
			t.Errorf("delivery %s: %s with %d attempts, want delivered with 1", d.ID, d.Status, len(d.Attempts))
		}
	}
}
