package storetest

import (
	"testing"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// CheckMigration6 holds event e1, which a backend's migration test wrote
// with the schema before migration 0006 (deliveries d1 to d7, as both
// backends' TestMigrate6EmptiesTheQueues seed them), to what 0006 makes of
// its deliveries: the discarded, replayed and marked-delivered ones are
// resolved by "before 0006", the others keep their status; d5's attempt,
// recorded before migration 0020, reads outcome unknown.
func CheckMigration6(t *testing.T, s store.Store) {
	t.Helper()
	ev, err := s.Event(t.Context(), "e1")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]struct {
		status anyhook.DeliveryStatus
		kind   string
	}{
		"d1": {anyhook.StatusResolved, anyhook.ResolvedDiscarded},
		"d2": {anyhook.StatusResolved, anyhook.ResolvedReplayed}, // by d3
		"d3": {anyhook.StatusDelivered, ""},
		"d4": {anyhook.StatusDelivered, anyhook.ResolvedMarkedDelivered},
		"d5": {anyhook.StatusDead, ""},
		"d6": {anyhook.StatusHeld, ""},
		"d7": {anyhook.StatusDelivered, ""},
	}
	for _, d := range ev.Deliveries {
		w := want[d.ID]
		r := d.Resolution
		if d.Status != w.status || r.Kind != w.kind || (w.kind != "" && (r.By != "before 0006" || r.At.IsZero())) ||
			(w.kind == anyhook.ResolvedReplayed) != (r.ReplayedBy != "") || (w.kind == anyhook.ResolvedReplayed && r.ReplayedBy != "d3") {
			t.Errorf("%s after the upgrade: %s %+v; want %s %s", d.ID, d.Status, r, w.status, w.kind)
		}
	}
	for _, d := range ev.Deliveries {
		if d.ID == "d5" && (len(d.Attempts) != 1 || d.Attempts[0].Outcome != anyhook.OutcomeUnknown) {
			t.Errorf("d5's attempts after the upgrade: %+v; want one, outcome unknown", d.Attempts)
		}
	}
	if len(ev.Deliveries) != len(want) {
		t.Fatalf("deliveries: %+v", ev.Deliveries)
	}
}

// CheckMigrationSource holds the deliveries of a store that a backend's
// migration test wrote before migration 0039 (d1 to d7 of event e1, from
// stripe, and d8 of event e2, from github, to billing) to the source each
// got from its event: the deliveries list's source filter finds them.
func CheckMigrationSource(t *testing.T, s store.Store) {
	t.Helper()
	for _, c := range []struct {
		f    store.DeliveryFilter
		want int
	}{
		{store.DeliveryFilter{Source: "stripe"}, 7},
		{store.DeliveryFilter{Source: "github"}, 1},
		{store.DeliveryFilter{Source: "stripe", Destination: "billing"}, 1},
		{store.DeliveryFilter{Source: "github", Destination: "billing"}, 1},
		{store.DeliveryFilter{Source: "github", Destination: "crm"}, 0},
		{store.DeliveryFilter{Source: ""}, 8},
	} {
		ds, _, err := s.ListDeliveries(t.Context(), c.f)
		if err != nil || len(ds) != c.want {
			t.Errorf("deliveries %+v after the upgrade: %d, %v; want %d", c.f, len(ds), err, c.want)
		}
	}
}
