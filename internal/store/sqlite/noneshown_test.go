package sqlite_test

import (
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

// seedShown ingests two events of source github to g and ci, and has one
// of g's deliveries retrying (due in a century): g has one untried and
// one retrying delivery, ci two pending (paused while ci is held back).
func seedShown(t *testing.T, s *sqlite.Store) {
	t.Helper()
	for i := range 2 {
		ne := store.NewEvent{Event: anyhook.Event{ID: store.NewID(), Source: "github", DedupKey: "seed" + string(rune('a'+i)), ReceivedAt: time.Now(),
			Method: "POST", Path: "/webhooks/github", Body: []byte(`{}`)}, Destinations: []string{"g", "ci"}}
		if res, err := s.Ingest(t.Context(), []store.NewEvent{ne}); err != nil || res[0].Err != nil {
			t.Fatal(err, res)
		}
	}
	cs, err := s.Claim(t.Context(), "g", 1, time.Minute)
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim g: %v %d", err, len(cs))
	}
	if _, err := s.Finish(t.Context(), []store.Outcome{{DeliveryID: cs[0].Delivery.ID, Attempt: cs[0].Delivery.AttemptCount, Status: anyhook.StatusPending,
		RetryIn: 100 * 365 * 24 * time.Hour, Result: anyhook.Attempt{Number: 1, StartedAt: time.Now(), StatusCode: 500, Error: "HTTP 500"}}}); err != nil {
		t.Fatal(err)
	}
}

// TestListsNoneShown: a list of a status derived from the pause that the
// delivery counters show none in runs no query. A destination paused
// with a backlog of untried deliveries, and none untried elsewhere (the
// usual state: the running destinations keep up), made
// /api/events?status=pending walk the whole backlog in
// deliveries_waiting to find none, and /api/deliveries?status=pending
// read it twice (the count choosing the walk, then the walk): 86 and 132
// ms at a million events with 300,000 waiting, growing with the backlog.
func TestListsNoneShown(t *testing.T) {
	t.Parallel()
	s, _ := openFile(t)
	seedShown(t, s)
	if err := s.SetPaused(t.Context(), "ci", true); err != nil {
		t.Fatal(err)
	}
	// g's untried delivery is claimed: none untried but ci's, held back.
	if cs, err := s.Claim(t.Context(), "g", 1, time.Hour); err != nil || len(cs) != 1 {
		t.Fatalf("claim g: %v %d", err, len(cs))
	}
	for _, f := range []store.EventFilter{{Status: anyhook.StatusPending}, {Status: anyhook.StatusPending, Source: "github"},
		{Status: anyhook.StatusPending, Since: time.Now().Add(-time.Hour)}} {
		if q, _, err := sqlite.EventsSQL(s, t.Context(), f); err != nil || q != "" {
			t.Errorf("events %+v: want no query (no delivery shown pending), got %v:\n%s", f, err, q)
		}
	}
	for _, f := range []store.DeliveryFilter{{Status: anyhook.StatusPending}, {Status: anyhook.StatusPending, Source: "github"},
		{Status: anyhook.StatusPending, Destination: "g"}, {Status: anyhook.StatusRetrying, Destination: "h"}} {
		if q, _, err := sqlite.DeliveriesSQL(s, t.Context(), f); err != nil || q != "" {
			t.Errorf("deliveries %+v: want no query (none shown in the status), got %v:\n%s", f, err, q)
		}
	}
	// Shown ones are still listed.
	for _, st := range []anyhook.DeliveryStatus{anyhook.StatusRetrying, anyhook.StatusPaused} {
		ds, _, err := s.ListDeliveries(t.Context(), store.DeliveryFilter{Status: st})
		if err != nil || len(ds) == 0 {
			t.Errorf("deliveries %s: %v, %d rows, want some", st, err, len(ds))
		}
		evs, _, err := s.ListEvents(t.Context(), store.EventFilter{Status: st})
		if err != nil || len(evs) == 0 {
			t.Errorf("events %s: %v, %d rows, want some", st, err, len(evs))
		}
	}
}
