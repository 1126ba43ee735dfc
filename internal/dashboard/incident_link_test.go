package dashboard_test

import (
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/store"
)

// TestIncidentLinksWhereDeliveriesAre: the incident page links the dead
// deliveries of its destination, but while the destination is paused
// (by a person or by its breaker) its failing deliveries wait as
// paused, and the page links that list, saying who paused it.
func TestIncidentLinksWhereDeliveriesAre(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.login()
	ev := f.seed("stripe", "evt_inc", []byte(`{}`))
	now := time.Now()
	cs, err := f.store.RecordIncidents(t.Context(), []store.IncidentAttempt{
		{Destination: "billing", Kind: "refused", EventID: ev, Error: "connection refused", At: now},
	}, store.IncidentPolicy{ResolveAfter: time.Minute})
	if err != nil || len(cs) != 1 {
		t.Fatalf("%v, %v", cs, err)
	}
	page := "/incidents/" + cs[0].Incident.ID
	dead := `id="affected" href="/deliveries?destination=billing&amp;status=dead"`
	paused := `id="affected" href="/deliveries?destination=billing&amp;status=paused"`

	mustContain(t, f.get(page), dead, "Dead deliveries to billing")
	if err := f.store.SetPaused(t.Context(), "billing", true); err != nil {
		t.Fatal(err)
	}
	mustContain(t, f.get(page), paused, "paused by a person")
	if err := f.store.SetPaused(t.Context(), "billing", false); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.TripBreaker(t.Context(), "billing", now, "20 consecutive failed attempts", now.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	mustContain(t, f.get(page), paused, "paused by its breaker")
}

// TestOverviewLinksEveryQueue: each of a destination's nonzero counts on
// the overview opens its deliveries in that status, paused and pending
// too (they were plain numbers), and the paused tile opens the paused
// deliveries.
func TestOverviewLinksEveryQueue(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.login()
	f.seed("stripe", "evt_q1", []byte(`{}`))
	mustContain(t, f.get("/"), `href="/deliveries?status=pending&amp;destination=billing"`)
	if err := f.store.SetPaused(t.Context(), "billing", true); err != nil {
		t.Fatal(err)
	}
	mustContain(t, f.get("/"), `href="/deliveries?status=paused&amp;destination=billing"`, `href="/deliveries?status=paused"`)
}
