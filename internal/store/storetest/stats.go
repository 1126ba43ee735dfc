package storetest

import (
	"net/http"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// runStats holds a backend's store.StatsReader (the dashboard's and the
// metrics' aggregates) to the same behaviour.
func runStats(t *testing.T, open Open) {
	runTable(t, []named[storeTest]{
		{"QueueAndActivity", testStats},
		{"LastDeliveredIsTheLatestFinish", testLastDelivered},
	}, withStore(open))
}

// testLastDelivered: a destination's last success is when its latest
// delivery finished, not when its newest one did: an older delivery
// retried can finish later.
func testLastDelivered(t *testing.T, s store.Store) {
	ingest(t, s, newEvent("stripe", "evt_l1", "billing"), newEvent("stripe", "evt_l2", "billing"))
	cs := claim(t, s, "billing", 2, time.Minute)
	if len(cs) != 2 {
		t.Fatalf("claimed %d, want 2", len(cs))
	}
	if cs[0].Delivery.ID > cs[1].Delivery.ID {
		cs[0], cs[1] = cs[1], cs[0]
	}
	finish(t, s, delivered(cs[1])) // the newer first
	time.Sleep(5 * time.Millisecond)
	before := time.Now()
	time.Sleep(5 * time.Millisecond)
	finish(t, s, delivered(cs[0]))
	qs, err := s.QueueStats(t.Context(), []string{"billing"})
	if err != nil {
		t.Fatal(err)
	}
	if got := qs.LastDelivered["billing"]; got.Before(before) {
		t.Errorf("last delivered %v, before the older delivery finished (after %v)", got, before)
	}
}

func testStats(t *testing.T, s store.Store) {
	ctx := t.Context()
	dests := []string{"billing", "ci"}
	empty, err := s.QueueStats(ctx, dests)
	if err != nil {
		t.Fatal(err)
	}
	if len(empty.Depth) != 0 || !empty.OldestPending.IsZero() || len(empty.LastDelivered) != 0 || empty.OldestPendingAge() != 0 {
		t.Fatalf("empty store: %+v", empty)
	}
	ev := func(src, key string, dests ...string) store.NewEvent {
		return store.NewEvent{Event: anyhook.Event{ID: store.NewID(), Source: src, DedupKey: key, ReceivedAt: time.Now(),
			Method: "POST", Path: "/webhooks/" + src, Header: http.Header{}, Body: []byte("{}")}, Destinations: dests}
	}
	evs := []store.NewEvent{ev("stripe", "a", "billing"), ev("stripe", "b", "billing"), ev("github", "c", "ci")}
	if _, err := s.Ingest(ctx, evs[:1]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ingest(ctx, evs[1:]); err != nil {
		t.Fatal(err)
	}
	finish := func(dest string, status anyhook.DeliveryStatus) {
		t.Helper()
		cs, err := s.Claim(ctx, dest, 1, time.Minute)
		if err != nil || len(cs) != 1 {
			t.Fatalf("claim %s: %v, %d claims", dest, err, len(cs))
		}
		_, err = s.Finish(ctx, []store.Outcome{{DeliveryID: cs[0].Delivery.ID, Attempt: cs[0].Delivery.AttemptCount, Status: status,
			Result: anyhook.Attempt{Number: 1, StartedAt: time.Now(), StatusCode: 200}}})
		if err != nil {
			t.Fatal(err)
		}
	}
	finish("billing", anyhook.StatusDelivered) // the oldest (a) goes first
	finish("ci", anyhook.StatusDead)

	qs, err := s.QueueStats(ctx, dests)
	if err != nil {
		t.Fatal(err)
	}
	if got := qs.Depth["billing"][anyhook.StatusPending]; got != 1 {
		t.Errorf("billing pending = %d, want 1", got)
	}
	if got := qs.Depth["ci"][anyhook.StatusDead]; got != 1 {
		t.Errorf("ci dead = %d, want 1", got)
	}
	// A destination not asked about (removed from the config: its
	// deliveries are orphaned) is counted all the same; only its last
	// delivery and due time are not looked up.
	if billingOnly, err := s.QueueStats(ctx, []string{"billing"}); err != nil {
		t.Fatal(err)
	} else if got := billingOnly.Depth["ci"][anyhook.StatusDead]; got != 1 || billingOnly.Total(anyhook.StatusDead) != 1 {
		t.Errorf("asked about billing only: ci dead = %d (depth %v), want 1: every destination's deliveries count", got, billingOnly.Depth)
	}
	if qs.Total(anyhook.StatusPending) != 1 || qs.Total(anyhook.StatusDelivered) != 0 {
		t.Errorf("totals: %+v (delivered deliveries are not counted)", qs.Depth)
	}
	if qs.OldestPending.IsZero() || qs.OldestPendingAge() < 0 || qs.OldestPendingAge() > time.Hour {
		t.Errorf("oldest pending %v (age %v) at %v", qs.OldestPending, qs.OldestPendingAge(), qs.Now)
	}
	if _, ok := qs.LastDelivered["billing"]; !ok {
		t.Error("billing has no last delivery")
	}
	if _, ok := qs.LastDelivered["ci"]; ok {
		t.Error("ci never delivered but has a last delivery")
	}
	// billing's second delivery is due and nobody has claimed it; ci has
	// nothing due.
	if _, ok := qs.DueSince["billing"]; !ok || qs.OverdueFor("billing") < 0 || qs.OverdueFor("billing") > time.Hour {
		t.Errorf("billing due since %v (overdue %v) at %v, want its pending delivery", qs.DueSince["billing"], qs.OverdueFor("billing"), qs.Now)
	}
	if _, ok := qs.DueSince["ci"]; ok || qs.OverdueFor("ci") != 0 {
		t.Errorf("ci has nothing due but DueSince = %v", qs.DueSince["ci"])
	}
	// A paused destination's deliveries wait on purpose: not overdue.
	if err := s.SetPaused(ctx, "billing", true); err != nil {
		t.Fatal(err)
	}
	paused, err := s.QueueStats(ctx, dests)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := paused.DueSince["billing"]; ok {
		t.Errorf("paused billing is reported overdue since %v", paused.DueSince["billing"])
	}
	// Its waiting delivery is shown paused, not pending, and is not the
	// oldest pending one: a deliberate pause fires no oldest-pending alert.
	if d := paused.Depth["billing"]; d[anyhook.StatusPaused] != 1 || d[anyhook.StatusPending] != 0 {
		t.Errorf("paused billing depth = %v, want 1 paused, 0 pending", d)
	}
	if !paused.OldestPending.IsZero() || paused.OldestPendingAge() != 0 {
		t.Errorf("oldest pending while the only pending delivery's destination is paused: %v", paused.OldestPending)
	}
	states, err := s.DeliveryStates(ctx, []string{evs[1].Event.ID})
	if err != nil || len(states[evs[1].Event.ID]) != 1 || states[evs[1].Event.ID][0].Status != anyhook.StatusPaused {
		t.Errorf("delivery states of paused billing's event = %+v, %v; want paused", states, err)
	}
	if err := s.SetPaused(ctx, "billing", false); err != nil {
		t.Fatal(err)
	}
	// A retry that is not due yet is not overdue either.
	cs, err := s.Claim(ctx, "billing", 1, time.Minute)
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim billing: %v, %d claims", err, len(cs))
	}
	if _, err := s.Finish(ctx, []store.Outcome{{DeliveryID: cs[0].Delivery.ID, Attempt: cs[0].Delivery.AttemptCount, Status: anyhook.StatusPending,
		RetryIn: time.Hour, Result: anyhook.Attempt{Number: 1, StartedAt: time.Now(), StatusCode: 500, Error: "HTTP 500"}}}); err != nil {
		t.Fatal(err)
	}
	later, err := s.QueueStats(ctx, dests)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := later.DueSince["billing"]; ok {
		t.Errorf("a retry due in an hour is reported overdue since %v", later.DueSince["billing"])
	}

	act, err := s.Activity(ctx, store.ActivityQuery{Window: time.Hour, Bucket: time.Minute, Destinations: dests})
	if err != nil {
		t.Fatal(err)
	}
	if len(act.Received) != 60 || act.Bucket != time.Minute {
		t.Fatalf("activity has %d buckets of %v, want 60 of 1m", len(act.Received), act.Bucket)
	}
	if store.Sum(act.Received) != 3 || store.Sum(act.Delivered["billing"]) != 1 || store.Sum(act.Dead["ci"]) != 1 || store.Sum(act.Dead["billing"]) != 0 {
		t.Errorf("activity: received %d, billing delivered %d, ci dead %d",
			store.Sum(act.Received), store.Sum(act.Delivered["billing"]), store.Sum(act.Dead["ci"]))
	}
	if last := act.Received[len(act.Received)-1] + act.Received[len(act.Received)-2]; last != 3 {
		t.Errorf("the events are not in the newest buckets: %v", act.Received)
	}
	if got := store.Merge(act.Delivered, 60); store.Sum(got) != 1 {
		t.Errorf("merged delivered %v", got)
	}

	ids := []string{evs[0].Event.ID, evs[2].Event.ID, "no-such-event"}
	states, err = s.DeliveryStates(ctx, ids)
	if err != nil {
		t.Fatal(err)
	}
	if a := states[ids[0]]; len(a) != 1 || a[0].Destination != "billing" || a[0].Status != anyhook.StatusDelivered {
		t.Errorf("states of a: %+v", a)
	}
	if c := states[ids[1]]; len(c) != 1 || c[0].Destination != "ci" || c[0].Status != anyhook.StatusDead {
		t.Errorf("states of c: %+v", c)
	}
	if len(states["no-such-event"]) != 0 {
		t.Error("states of an unknown event")
	}

	// Stale events over the window: one skipped, one delivered flagged.
	if act.Stale != 0 || act.Skipped != 0 {
		t.Errorf("stale %d, skipped %d before any stale event", act.Stale, act.Skipped)
	}
	versioned := func(key, version string, skip bool) store.NewEvent {
		ne := ev("shop", key, "billing")
		ne.Event.Object, ne.Event.Version, ne.StaleSkip = "order-1", version, skip
		return ne
	}
	for _, ne := range []store.NewEvent{versioned("v2", "2", true), versioned("v1-skip", "1", true), versioned("v1-flag", "1", false)} {
		if _, err := s.Ingest(ctx, []store.NewEvent{ne}); err != nil {
			t.Fatal(err)
		}
	}
	act, err = s.Activity(ctx, store.ActivityQuery{Window: time.Hour, Bucket: time.Minute, Destinations: dests})
	if err != nil {
		t.Fatal(err)
	}
	if act.Stale != 2 || act.Skipped != 1 {
		t.Errorf("stale %d, skipped %d; want 2 stale events, 1 of them skipped", act.Stale, act.Skipped)
	}

	// What happened stays as it happened: ci's dead delivery, replayed, is
	// resolved and leaves the queue, yet the minute in which it went dead
	// still counts it; the replay and billing's failed attempt count where
	// they happened.
	if _, err := s.Replay(ctx, evs[2].Event.ID, []string{"ci"}, store.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	act, err = s.Activity(ctx, store.ActivityQuery{Window: time.Hour, Bucket: time.Minute, Destinations: dests})
	if err != nil {
		t.Fatal(err)
	}
	if store.Sum(act.Dead["ci"]) != 1 || store.Sum(act.Replayed["ci"]) != 1 || store.Sum(act.Failed["billing"]) != 1 {
		t.Errorf("after the replay: ci dead %d, replayed %d, billing failed attempts %d; want 1 each",
			store.Sum(act.Dead["ci"]), store.Sum(act.Replayed["ci"]), store.Sum(act.Failed["billing"]))
	}
	if qs, err := s.QueueStats(ctx, dests); err != nil || qs.Depth["ci"][anyhook.StatusDead] != 0 {
		t.Errorf("after the replay ci's queue holds %v, %v; want no dead delivery", qs.Depth["ci"], err)
	}
	// A wider bucket adds the same minutes up.
	wide, err := s.Activity(ctx, store.ActivityQuery{Window: 24 * time.Hour, Bucket: time.Hour, Destinations: dests})
	if err != nil || len(wide.Received) != 24 || store.Sum(wide.Received) != store.Sum(act.Received) || store.Sum(wide.Dead["ci"]) != 1 {
		t.Errorf("a day by the hour: %d buckets, %d received (want %d), ci dead %d; %v",
			len(wide.Received), store.Sum(wide.Received), store.Sum(act.Received), store.Sum(wide.Dead["ci"]), err)
	}
	// A person marking a delivery delivered is not a delivery: the
	// gateway saw no 2xx.
	ingest(t, s, newEvent("stripe", "evt_marked", "vault"))
	c := expiredClaim(t, s, "vault")
	rescue(t, s, rule(anyhook.Hold, 8))
	if _, err := s.Resolve(ctx, c.Delivery.ID, store.ActionMarkDelivered, store.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	if act, err := s.Activity(ctx, store.ActivityQuery{Window: time.Hour, Bucket: time.Minute, Destinations: []string{"vault"}}); err != nil || store.Sum(act.Delivered["vault"]) != 0 {
		t.Errorf("a delivery marked delivered counts %d delivered (%v); want 0", store.Sum(act.Delivered["vault"]), err)
	}
}
