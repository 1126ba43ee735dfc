package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

func testClaimAndFinish(t *testing.T, s store.Store) {
	ne := newEvent("stripe", "evt_1", "billing", "audit")
	ingest(t, s, ne)
	cs := claim(t, s, "billing", 10, time.Minute)
	if len(cs) != 1 {
		t.Fatalf("claimed %d, want 1", len(cs))
	}
	c := cs[0]
	if c.Delivery.Status != anyhook.StatusDelivering || c.Delivery.AttemptCount != 1 || c.Delivery.Destination != "billing" {
		t.Fatalf("claim = %+v", c.Delivery)
	}
	if c.Event.ID != ne.Event.ID || string(c.Event.Body) != string(ne.Event.Body) || c.Event.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("claimed event = %+v", c.Event)
	}
	if more := claim(t, s, "billing", 10, time.Minute); len(more) != 0 {
		t.Fatalf("claimed a delivery twice: %+v", more)
	}
	if lost := finish(t, s, delivered(c)); len(lost) != 0 {
		t.Fatalf("lost = %v", lost)
	}
	ev := event(t, s, ne.Event.ID)
	var d anyhook.Delivery
	for _, x := range ev.Deliveries {
		if x.Destination == "billing" {
			d = x
		}
	}
	if d.Status != anyhook.StatusDelivered || len(d.Attempts) != 1 {
		t.Fatalf("delivery = %+v", d)
	}
	a := d.Attempts[0]
	if a.Number != 1 || a.StatusCode != 200 || string(a.ResponseBody) != "ok" || a.Duration != 12*time.Millisecond || !a.StartedAt.Equal(received) {
		t.Fatalf("attempt = %+v", a)
	}
	if audit := claim(t, s, "audit", 10, time.Minute); len(audit) != 1 {
		t.Fatalf("audit claims = %d, want 1", len(audit))
	}
}

// testClaimLimitNotPositive: a claim of at most 0 (or -1) deliveries
// leases none (SQLite read LIMIT -1 as "no limit" and leased every due
// delivery of the destination).
func testClaimLimitNotPositive(t *testing.T, s store.Store) {
	ingest(t, s, newEvent("stripe", "evt_1", "billing"), newEvent("stripe", "evt_2", "billing"), newEvent("stripe", "evt_3", "billing"))
	for _, limit := range []int{0, -1} {
		if cs := claim(t, s, "billing", limit, time.Minute); len(cs) != 0 {
			t.Fatalf("Claim(limit %d) leased %d deliveries, want none", limit, len(cs))
		}
	}
	if cs := claim(t, s, "billing", 2, time.Minute); len(cs) != 2 {
		t.Fatalf("Claim(limit 2) after them = %d, want 2: nothing was left leased", len(cs))
	}
}

func testRetryIsNotDueEarly(t *testing.T, s store.Store) {
	ingest(t, s, newEvent("stripe", "evt_1", "billing"))
	c := claim(t, s, "billing", 1, time.Minute)[0]
	finish(t, s, retry(c, time.Hour))
	if cs := claim(t, s, "billing", 10, time.Minute); len(cs) != 0 {
		t.Fatalf("claimed a delivery an hour early: %+v", cs)
	}
	ingest(t, s, newEvent("stripe", "evt_2", "billing"))
	c2 := claim(t, s, "billing", 1, time.Minute)[0]
	finish(t, s, retry(c2, 0))
	again := claim(t, s, "billing", 1, time.Minute)
	if len(again) != 1 || again[0].Delivery.ID != c2.Delivery.ID || again[0].Delivery.AttemptCount != 2 {
		t.Fatalf("retry now: claims = %+v, want %s at attempt 2", again, c2.Delivery.ID)
	}
}

func testFinishFencedByAttempt(t *testing.T, s store.Store) {
	ingest(t, s, newEvent("stripe", "evt_1", "billing"))
	c := claim(t, s, "billing", 1, time.Minute)[0]
	stale := delivered(c)
	stale.Attempt = c.Delivery.AttemptCount + 1
	if lost := finish(t, s, stale); !slices.Equal(lost, []string{c.Delivery.ID}) {
		t.Fatalf("lost = %v, want the mismatched attempt", lost)
	}
	if lost := finish(t, s, delivered(c)); len(lost) != 0 {
		t.Fatalf("lost = %v", lost)
	}
	if lost := finish(t, s, delivered(c)); len(lost) != 1 {
		t.Fatalf("finishing twice: lost = %v, want the second refused", lost)
	}

	// The same in one batch: of two outcomes for one claim the first is
	// recorded and the second lost, whatever else the batch holds.
	ingest(t, s, newEvent("stripe", "evt_2", "billing"), newEvent("stripe", "evt_3", "billing"))
	cs := claim(t, s, "billing", 2, time.Minute)
	if len(cs) != 2 {
		t.Fatalf("claimed %d, want 2", len(cs))
	}
	second := retry(cs[1], time.Hour)
	lost := finish(t, s, delivered(cs[1]), delivered(cs[0]), second, stale)
	slices.Sort(lost)
	want := []string{c.Delivery.ID, cs[1].Delivery.ID}
	slices.Sort(want)
	if !slices.Equal(lost, want) {
		t.Fatalf("a batch with two outcomes for one claim and one finished long ago: lost = %v, want %v", lost, want)
	}
	for _, x := range cs {
		d := event(t, s, x.Event.ID).Deliveries[0]
		if d.Status != anyhook.StatusDelivered || len(d.Attempts) != 1 || d.Attempts[0].StatusCode != 200 {
			t.Fatalf("%s after the batch: %s with %d attempts, want delivered by the first outcome", d.ID, d.Status, len(d.Attempts))
		}
	}
}

// testFinishRefusesOtherStatuses: an outcome is delivered, pending or dead;
// a call with any other status is refused whole with ErrInvalid and
// records nothing (SQLite wrote the status as given: "" left the delivery
// in no state at all, never claimed, rescued or resolvable again).
func testFinishRefusesOtherStatuses(t *testing.T, s store.Store) {
	res := ingest(t, s, newEvent("stripe", "evt_1", "billing"), newEvent("stripe", "evt_2", "billing"))
	cs := claim(t, s, "billing", 2, time.Minute)
	if len(cs) != 2 {
		t.Fatalf("claimed %d, want 2", len(cs))
	}
	for _, st := range []anyhook.DeliveryStatus{"", anyhook.StatusHeld, anyhook.StatusSkipped, anyhook.StatusDelivering, "sent"} {
		bad := delivered(cs[1])
		bad.Status = st
		if lost, err := s.Finish(ctx(t), []store.Outcome{delivered(cs[0]), bad}); !errors.Is(err, anyhook.ErrInvalid) {
			t.Fatalf("Finish with status %q = %v, %v; want ErrInvalid", st, lost, err)
		}
	}
	for _, r := range res {
		if d := event(t, s, r.ID).Deliveries[0]; d.Status != anyhook.StatusDelivering || len(d.Attempts) != 0 {
			t.Fatalf("after refused outcomes: %s with %d attempts, want delivering with none", d.Status, len(d.Attempts))
		}
	}
	if lost := finish(t, s, delivered(cs[0]), delivered(cs[1])); len(lost) != 0 {
		t.Fatalf("lost = %v", lost)
	}
}

func testConcurrentClaimsAreExclusive(t *testing.T, s store.Store) {
	const events = 60
	var batch []store.NewEvent
	for i := range events {
		batch = append(batch, newEvent("stripe", "evt_"+strconv.Itoa(i), "billing"))
	}
	ingest(t, s, batch...)
	ClaimEachOnce(t, []store.Store{s}, "billing", 6, 7, events)
}

// ClaimEachOnce has workers claim batches of limit from the stores (worker
// i uses stores[i%len(stores)]) concurrently until none is left, and fails
// t unless want distinct deliveries were claimed, each exactly once.
func ClaimEachOnce(t *testing.T, stores []store.Store, dest string, workers, limit, want int) {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for {
				cs, err := stores[w%len(stores)].Claim(context.Background(), dest, limit, time.Minute)
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				if len(cs) == 0 {
					return
				}
				mu.Lock()
				for _, c := range cs {
					seen[c.Delivery.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != want {
		t.Fatalf("claimed %d distinct deliveries, want %d", len(seen), want)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("delivery %s claimed %d times", id, n)
		}
	}
}

// An expired lease is made by claiming with a negative lease: the claim is
// stale at once, whatever the backend's clock.
func expiredClaim(t *testing.T, s store.Store, dest string) store.Claim {
	t.Helper()
	cs := claim(t, s, dest, 1, -time.Hour)
	if len(cs) != 1 {
		t.Fatalf("claimed %d, want 1", len(cs))
	}
	return cs[0]
}

func rule(p anyhook.StalePolicy, max int) func(string) (store.StaleRule, bool) {
	return func(string) (store.StaleRule, bool) { return store.StaleRule{Policy: p, MaxAttempts: max}, true }
}

func rescue(t *testing.T, s store.Store, r func(string) (store.StaleRule, bool)) []anyhook.Delivery {
	t.Helper()
	ds, err := s.Rescue(ctx(t), r)
	if err != nil {
		t.Fatalf("Rescue: %v", err)
	}
	return ds
}

func testRescueReclaim(t *testing.T, s store.Store) {
	res := ingest(t, s, newEvent("stripe", "evt_1", "billing"))
	c := expiredClaim(t, s, "billing")
	ds := rescue(t, s, rule(anyhook.Reclaim, 8))
	if len(ds) != 1 || ds[0].ID != c.Delivery.ID || ds[0].Status != anyhook.StatusPending {
		t.Fatalf("rescued = %+v", ds)
	}
	again := claim(t, s, "billing", 1, time.Minute)
	if len(again) != 1 || again[0].Delivery.ID != c.Delivery.ID || again[0].Delivery.AttemptCount != 2 {
		t.Fatalf("reclaimed = %+v, want attempt 2 of the same delivery", again)
	}
	if lost := finish(t, s, delivered(c)); len(lost) != 1 {
		t.Fatalf("zombie attempt 1 finished over attempt 2: lost = %v", lost)
	}
	finish(t, s, delivered(again[0]))
	d := event(t, s, res[0].ID).Deliveries[0]
	if d.Status != anyhook.StatusDelivered || len(d.Attempts) != 2 {
		t.Fatalf("delivery = %+v", d)
	}
	if d.Attempts[0].Number != 1 || d.Attempts[0].Error == "" || d.Attempts[0].StatusCode != 0 {
		t.Fatalf("lost attempt = %+v, want an unknown outcome recorded", d.Attempts[0])
	}
	if rescue(t, s, rule(anyhook.Reclaim, 8)) != nil {
		t.Fatal("rescued a finished delivery")
	}
}

func testRescueHold(t *testing.T, s store.Store) {
	ingest(t, s, newEvent("stripe", "evt_1", "charges"))
	c := expiredClaim(t, s, "charges")
	ds := rescue(t, s, rule(anyhook.Hold, 8))
	if len(ds) != 1 || ds[0].Status != anyhook.StatusHeld {
		t.Fatalf("rescued = %+v, want held", ds)
	}
	if cs := claim(t, s, "charges", 10, time.Minute); len(cs) != 0 {
		t.Fatalf("held delivery claimed again: %+v", cs)
	}
	if lost := finish(t, s, delivered(c)); len(lost) != 1 {
		t.Fatal("finish after hold was accepted")
	}
	held, _, err := s.ListDeliveries(ctx(t), store.DeliveryFilter{Status: anyhook.StatusHeld})
	if err != nil || len(held) != 1 {
		t.Fatalf("held list = %v, %v", held, err)
	}
	// A lost attempt says nothing of the destination: a replay into it is
	// not refused as into a failing one.
	if how, err := store.LatestFailure(ctx(t), s, "charges"); err != nil || how != "" {
		t.Fatalf("LatestFailure after a lost attempt = %q, %v; want not failing", how, err)
	}
}

func testRescueReclaimPastMaxAttempts(t *testing.T, s store.Store) {
	ingest(t, s, newEvent("stripe", "evt_1", "billing"))
	expiredClaim(t, s, "billing")
	if ds := rescue(t, s, rule(anyhook.Reclaim, 1)); len(ds) != 1 || ds[0].Status != anyhook.StatusDead {
		t.Fatalf("rescued = %+v, want dead at max_attempts 1", ds)
	}
}

func testLiveLeaseNotRescued(t *testing.T, s store.Store) {
	ingest(t, s, newEvent("stripe", "evt_1", "billing"))
	claim(t, s, "billing", 1, time.Hour)
	if ds := rescue(t, s, rule(anyhook.Reclaim, 8)); len(ds) != 0 {
		t.Fatalf("rescued a live claim: %+v", ds)
	}
}

// testRescueLeavesUnknownDestination: a rescuer that does not know a
// destination's policy (a process whose config lacks it) leaves its expired
// claims alone; one that knows it handles them.
func testRescueLeavesUnknownDestination(t *testing.T, s store.Store) {
	ingest(t, s, newEvent("stripe", "evt_1", "charges"), newEvent("stripe", "evt_2", "billing"))
	c := expiredClaim(t, s, "charges")
	expiredClaim(t, s, "billing")
	onlyBilling := func(dest string) (store.StaleRule, bool) {
		return store.StaleRule{Policy: anyhook.Reclaim, MaxAttempts: 8}, dest == "billing"
	}
	ds := rescue(t, s, onlyBilling)
	if len(ds) != 1 || ds[0].Destination != "billing" {
		t.Fatalf("rescued = %+v, want only the billing claim", ds)
	}
	if d := event(t, s, c.Event.ID).Deliveries[0]; d.Status != anyhook.StatusDelivering || len(d.Attempts) != 0 {
		t.Fatalf("charges delivery = %+v, want it left delivering with no attempt recorded", d)
	}
	if ds := rescue(t, s, rule(anyhook.Hold, 8)); len(ds) != 1 || ds[0].ID != c.Delivery.ID || ds[0].Status != anyhook.StatusHeld {
		t.Fatalf("rescued by a process that knows charges = %+v, want it held", ds)
	}
}

func testReplay(t *testing.T, s store.Store) {
	res := ingest(t, s, newEvent("stripe", "evt_1", "billing"))
	ds, err := s.Replay(ctx(t), res[0].ID, []string{"billing"}, tester)
	if err != nil || len(ds) != 1 {
		t.Fatalf("Replay = %+v, %v", ds, err)
	}
	if !ds[0].Replay || ds[0].Status != anyhook.StatusPending || ds[0].EventID != res[0].ID || ds[0].AttemptCount != 0 {
		t.Fatalf("replay delivery = %+v", ds[0])
	}
	cs := claim(t, s, "billing", 10, time.Minute)
	if len(cs) != 2 {
		t.Fatalf("claims = %d, want the original and the replay", len(cs))
	}
	if _, err := s.Replay(ctx(t), "no-such-event", []string{"billing"}, tester); !errors.Is(err, anyhook.ErrNotFound) {
		t.Fatalf("Replay(unknown) err = %v, want ErrNotFound", err)
	}
}

func testReplayDeliveries(t *testing.T, s store.Store) {
	ingest(t, s, newEvent("stripe", "evt_1", "billing"), newEvent("stripe", "evt_2", "billing"), newEvent("github", "g1", "billing"))
	for _, c := range claim(t, s, "billing", 10, time.Minute) {
		o := retry(c, 0)
		if c.Event.Source == "stripe" {
			o.Status = anyhook.StatusDead
		}
		if c.Event.DedupKey == "evt_2" {
			o.Status = anyhook.StatusDelivered
		}
		finish(t, s, o)
	}
	n, err := bulkCount(s.ReplayDeliveries(ctx(t), store.DeliveryFilter{Status: anyhook.StatusDead, Source: "stripe"}, tester))
	if err != nil || n != 1 {
		t.Fatalf("ReplayDeliveries = %d, %v; want 1", n, err)
	}
	replays, _, err := s.ListDeliveries(ctx(t), store.DeliveryFilter{Status: anyhook.StatusPending, Source: "stripe"})
	if err != nil || len(replays) != 1 || !replays[0].Replay {
		t.Fatalf("replays = %+v, %v", replays, err)
	}
	// evt_1 now has two deliveries to billing (resolved, and its pending
	// replay): replaying the source again leaves it, its replay still to
	// be sent (another would send it twice), and replays evt_2 once.
	dry, err := store.DryRunReplay(ctx(t), s, store.DeliveryFilter{Source: "stripe", Destination: "billing"})
	if err != nil || dry.Count != 1 {
		t.Fatalf("DryRunReplay(source) = %+v, %v; want evt_2 alone", dry, err)
	}
	n, err = bulkCount(s.ReplayDeliveries(ctx(t), store.DeliveryFilter{Source: "stripe", Destination: "billing"}, tester))
	if err != nil || n != 1 {
		t.Fatalf("ReplayDeliveries(source) = %d, %v; want 1 (evt_2: evt_1's replay is still pending)", n, err)
	}
}

func testResolve(t *testing.T, s store.Store) {
	by := store.Actor{Name: "dashboard session 0a1b2c3d", Reason: "the charge went through (INC-42)"}
	for i, action := range []string{store.ActionResend, store.ActionMarkDelivered, store.ActionDiscard} {
		ingest(t, s, newEvent("stripe", fmt.Sprint("evt_", i), "charges"))
		c := expiredClaim(t, s, "charges")
		rescue(t, s, rule(anyhook.Hold, 8))
		d, err := s.Resolve(ctx(t), c.Delivery.ID, action, by)
		if err != nil {
			t.Fatalf("Resolve(%s): %v", action, err)
		}
		// A resend waits for its next attempt after one whose outcome was lost: retrying.
		want := map[string]anyhook.DeliveryStatus{store.ActionResend: anyhook.StatusRetrying, store.ActionMarkDelivered: anyhook.StatusDelivered, store.ActionDiscard: anyhook.StatusResolved}[action]
		wantKind := map[string]string{store.ActionMarkDelivered: anyhook.ResolvedMarkedDelivered, store.ActionDiscard: anyhook.ResolvedDiscarded}[action]
		if d.Status != want || !strings.Contains(d.Note, by.Name) || !strings.Contains(d.Note, by.Reason) {
			t.Fatalf("Resolve(%s) = %+v, want %s with a note naming the actor and the reason", action, d, want)
		}
		r := d.Resolution
		if r.Kind != wantKind || (wantKind != "" && (r.By != by.Name || r.Reason != by.Reason || r.At.IsZero() || r.ReplayedBy != "")) ||
			(wantKind == "" && r != (anyhook.Resolution{})) {
			t.Fatalf("Resolve(%s) resolution = %+v, want kind %q by %s", action, r, wantKind, by.Name)
		}
		ev := event(t, s, c.Event.ID)
		if got := ev.Deliveries[0]; got.Status != want || got.Resolution != d.Resolution {
			t.Fatalf("after Resolve(%s) the event shows %+v, want %+v", action, got, d)
		}
		if len(ev.Actions) != 1 {
			t.Fatalf("actions after Resolve(%s) = %+v, want 1", action, ev.Actions)
		}
		if a := ev.Actions[0]; a.Kind != action || a.DeliveryID != d.ID || a.Destination != "charges" || a.Actor != by.Name ||
			a.Reason != by.Reason || a.At.IsZero() || a.EventID != c.Event.ID || a.ID == "" {
			t.Fatalf("action of Resolve(%s) = %+v", action, a)
		}
		if action == store.ActionResend {
			cs := claim(t, s, "charges", 10, time.Minute)
			if len(cs) != 1 || cs[0].Delivery.AttemptCount != 2 {
				t.Fatalf("after resend: claims = %+v, want attempt 2", cs)
			}
			finish(t, s, delivered(cs[0]))
			continue
		}
		// Resolved for good: never again, whatever the action.
		for _, again := range []string{store.ActionResend, store.ActionMarkDelivered, store.ActionDiscard} {
			if _, err := s.Resolve(ctx(t), d.ID, again, by); !errors.Is(err, anyhook.ErrInvalid) {
				t.Fatalf("Resolve(%s) after %s: err = %v, want ErrInvalid", again, action, err)
			}
		}
	}
	ingest(t, s, newEvent("stripe", "evt_pending", "charges"))
	pending, _, _ := s.ListDeliveries(ctx(t), store.DeliveryFilter{Status: anyhook.StatusPending})
	if len(pending) != 1 {
		t.Fatalf("pending = %d", len(pending))
	}
	if _, err := s.Resolve(ctx(t), pending[0].ID, store.ActionResend, by); !errors.Is(err, anyhook.ErrInvalid) {
		t.Fatalf("resolving a pending delivery: err = %v, want ErrInvalid", err)
	}
	if _, err := s.Resolve(ctx(t), "nope", store.ActionResend, by); !errors.Is(err, anyhook.ErrNotFound) {
		t.Fatalf("resolving an unknown delivery: err = %v, want ErrNotFound", err)
	}
	dead, _, _ := s.ListDeliveries(ctx(t), store.DeliveryFilter{Status: anyhook.StatusResolved})
	if len(dead) != 1 || dead[0].Resolution.Kind != anyhook.ResolvedDiscarded {
		t.Fatalf("resolved list = %+v, want the discarded delivery", dead)
	}
}

// deadAndHeld makes an event whose billing delivery is dead and whose
// charges delivery is held, and an audit delivery that is delivered.
func deadAndHeld(t *testing.T, s store.Store, key string) (evID string, dead, held anyhook.Delivery) {
	t.Helper()
	evID = ingest(t, s, newEvent("stripe", key, "billing", "charges", "audit"))[0].ID
	c := claim(t, s, "billing", 1, time.Minute)[0]
	o := retry(c, 0)
	o.Status = anyhook.StatusDead
	finish(t, s, o)
	expiredClaim(t, s, "charges")
	rescue(t, s, func(dest string) (store.StaleRule, bool) {
		return store.StaleRule{Policy: anyhook.Hold}, dest == "charges"
	})
	finish(t, s, delivered(claim(t, s, "audit", 1, time.Minute)[0]))
	for _, d := range event(t, s, evID).Deliveries {
		switch d.Destination {
		case "billing":
			dead = d
		case "charges":
			held = d
		}
	}
	if dead.Status != anyhook.StatusDead || held.Status != anyhook.StatusHeld {
		t.Fatalf("setup: billing %s, charges %s", dead.Status, held.Status)
	}
	return evID, dead, held
}

// testReplayResolvesDeadAndHeld: a replay of an event to a destination
// takes every held or dead delivery of that pair out of its queue, for
// good (resolved, replayed by the new delivery), records who did it, when
// and why; deliveries to other destinations and in other states are left.
func testReplayResolvesDeadAndHeld(t *testing.T, s store.Store) {
	evID, dead, held := deadAndHeld(t, s, "evt_1")
	by := store.Actor{Name: "api", Reason: "billing fixed its TLS certificate"}
	ds, err := s.Replay(ctx(t), evID, []string{"billing", "audit"}, by)
	if err != nil || len(ds) != 2 {
		t.Fatalf("Replay = %+v, %v", ds, err)
	}
	ev := event(t, s, evID)
	byID := map[string]anyhook.Delivery{}
	for _, d := range ev.Deliveries {
		byID[d.ID] = d
	}
	got := byID[dead.ID]
	r := got.Resolution
	if got.Status != anyhook.StatusResolved || r.Kind != anyhook.ResolvedReplayed || r.ReplayedBy != ds[0].ID ||
		r.By != by.Name || r.Reason != by.Reason || r.At.IsZero() || !strings.Contains(got.Note, ds[0].ID) {
		t.Errorf("the dead billing delivery after the replay: %+v", got)
	}
	if got.AttemptCount != dead.AttemptCount || len(got.Attempts) != len(dead.Attempts) {
		t.Errorf("resolving changed the attempts: %+v", got)
	}
	if h := byID[held.ID]; h.Status != anyhook.StatusHeld || h.Resolution != (anyhook.Resolution{}) {
		t.Errorf("a replay to billing resolved the held charges delivery: %+v", h)
	}
	for _, d := range ev.Deliveries {
		if d.Destination == "audit" && !d.Replay && (d.Status != anyhook.StatusDelivered || d.Resolution != (anyhook.Resolution{})) {
			t.Errorf("a replay resolved a delivered delivery: %+v", d)
		}
	}
	if len(ev.Actions) != 2 {
		t.Fatalf("actions = %+v, want one per replay delivery", ev.Actions)
	}
	for i, a := range ev.Actions {
		if a.Kind != store.ActionReplay || a.DeliveryID != ds[i].ID || a.Destination != ds[i].Destination || a.Actor != by.Name || a.Reason != by.Reason {
			t.Errorf("action %d = %+v, want the replay to %s", i, a, ds[i].Destination)
		}
	}
	// The held one goes with a replay to its own destination.
	if _, err := s.Replay(ctx(t), evID, []string{"charges"}, store.Actor{}); err != nil {
		t.Fatal(err)
	}
	for _, d := range event(t, s, evID).Deliveries {
		if d.ID == held.ID && (d.Status != anyhook.StatusResolved || d.Resolution.By != "unknown" || d.Resolution.Reason != "") {
			t.Errorf("the held delivery after a replay to charges (no actor given): %+v", d)
		}
	}
	for _, st := range []anyhook.DeliveryStatus{anyhook.StatusDead, anyhook.StatusHeld} {
		if ds, _, err := s.ListDeliveries(ctx(t), store.DeliveryFilter{Status: st}); err != nil || len(ds) != 0 {
			t.Errorf("%s queue after the replays: %+v, %v; want empty", st, ds, err)
		}
	}
	if c, err := s.Counts(ctx(t)); err != nil || c[anyhook.StatusDead] != 0 || c[anyhook.StatusHeld] != 0 || c[anyhook.StatusResolved] != 2 {
		t.Errorf("Counts = %v, %v; want 2 resolved, no dead or held", c, err)
	}
}

// testBulkReplayTwiceReplaysOnce: a bulk replay of the dead deliveries
// takes them out of dead, so the same replay again finds nothing: `anyhook
// replay --status dead` run twice does not send an event twice.
func testBulkReplayTwiceReplaysOnce(t *testing.T, s store.Store) {
	evID, dead, held := deadAndHeld(t, s, "evt_1")
	by := store.Actor{Name: "cli", Reason: "after the outage"}
	f := store.DeliveryFilter{Status: anyhook.StatusDead}
	if n, err := bulkCount(s.ReplayDeliveries(ctx(t), f, by)); err != nil || n != 1 {
		t.Fatalf("ReplayDeliveries(dead) = %d, %v; want 1", n, err)
	}
	if n, err := bulkCount(s.ReplayDeliveries(ctx(t), f, by)); err != nil || n != 0 {
		t.Fatalf("ReplayDeliveries(dead) again = %d, %v; want 0: the first one resolved them", n, err)
	}
	ev := event(t, s, evID)
	var replays []anyhook.Delivery
	for _, d := range ev.Deliveries {
		if d.Replay {
			replays = append(replays, d)
		}
		if d.ID == dead.ID && (d.Status != anyhook.StatusResolved || d.Resolution.By != "cli" || d.Resolution.ReplayedBy == "") {
			t.Errorf("the dead delivery after the bulk replay: %+v", d)
		}
		if d.ID == held.ID && d.Status != anyhook.StatusHeld {
			t.Errorf("a bulk replay of dead deliveries to billing touched the held charges one: %+v", d)
		}
	}
	if len(replays) != 1 || replays[0].Destination != "billing" || replays[0].ID != event(t, s, evID).Deliveries[len(ev.Deliveries)-1].ID {
		t.Fatalf("replay deliveries = %+v, want one to billing", replays)
	}
	if len(ev.Actions) != 1 || ev.Actions[0].Kind != store.ActionReplay || ev.Actions[0].DeliveryID != replays[0].ID || ev.Actions[0].Actor != "cli" {
		t.Fatalf("actions = %+v", ev.Actions)
	}
	// A bulk replay selecting the held one resolves it too.
	if n, err := bulkCount(s.ReplayDeliveries(ctx(t), store.DeliveryFilter{Status: anyhook.StatusHeld}, by)); err != nil || n != 1 {
		t.Fatalf("ReplayDeliveries(held) = %d, %v; want 1", n, err)
	}
	if n, err := bulkCount(s.ReplayDeliveries(ctx(t), store.DeliveryFilter{Status: anyhook.StatusHeld}, by)); err != nil || n != 0 {
		t.Fatalf("ReplayDeliveries(held) again = %d, %v; want 0", n, err)
	}
}

// testLostAttemptStartsAtClaim: the attempt a crash lost is recorded as
// started when it was claimed (it was sent then), not when the rescuer
// found the expired lease.
func testLostAttemptStartsAtClaim(t *testing.T, s store.Store) {
	res := ingest(t, s, newEvent("stripe", "evt_1", "billing"))
	c := expiredClaim(t, s, "billing")
	if c.Delivery.ClaimedAt.IsZero() {
		t.Fatalf("claim = %+v, want its claim time", c.Delivery)
	}
	// Wait (a signal, not a duration) until the store's clock has moved
	// on from the claim, so that the rescue happens at a later time.
	for {
		qs, err := s.QueueStats(ctx(t), nil)
		if err != nil {
			t.Fatal(err)
		}
		if qs.Now.After(c.Delivery.ClaimedAt) {
			break
		}
		runtime.Gosched()
	}
	ds := rescue(t, s, rule(anyhook.Reclaim, 8))
	if len(ds) != 1 || !ds[0].UpdatedAt.After(c.Delivery.ClaimedAt) {
		t.Fatalf("rescued = %+v, want it changed after the claim at %v", ds, c.Delivery.ClaimedAt)
	}
	d := event(t, s, res[0].ID).Deliveries[0]
	if len(d.Attempts) != 1 {
		t.Fatalf("attempts = %+v", d.Attempts)
	}
	a := d.Attempts[0]
	if !a.StartedAt.Equal(c.Delivery.ClaimedAt) || a.Error != store.LostError || a.Duration != 0 || a.StatusCode != 0 || a.Outcome != anyhook.OutcomeUnknown {
		t.Fatalf("lost attempt = %+v, want started at the claim %v (the rescue was at %v), outcome unknown",
			a, c.Delivery.ClaimedAt, ds[0].UpdatedAt)
	}
	if !d.ClaimedAt.Equal(c.Delivery.ClaimedAt) {
		t.Fatalf("delivery claimed at %v, want %v", d.ClaimedAt, c.Delivery.ClaimedAt)
	}
}

func testPause(t *testing.T, s store.Store) {
	ingest(t, s, newEvent("stripe", "evt_1", "billing", "audit"))
	if err := s.SetPaused(ctx(t), "billing", true); err != nil {
		t.Fatal(err)
	}
	if cs := claim(t, s, "billing", 10, time.Minute); len(cs) != 0 {
		t.Fatalf("claimed from a paused destination: %+v", cs)
	}
	if cs := claim(t, s, "audit", 10, time.Minute); len(cs) != 1 {
		t.Fatalf("pausing billing stopped audit: %d claims", len(cs))
	}
	if p, err := s.Paused(ctx(t)); err != nil || !p["billing"] || p["audit"] {
		t.Fatalf("Paused = %v, %v", p, err)
	}
	if err := s.SetPaused(ctx(t), "billing", false); err != nil {
		t.Fatal(err)
	}
	if cs := claim(t, s, "billing", 10, time.Minute); len(cs) != 1 {
		t.Fatalf("after resume: %d claims, want 1", len(cs))
	}
}

// testPausedShownEverywhere: while a destination is paused its waiting
// deliveries are paused wherever a status is shown or filtered — the
// event, the lists, the filters, the counts — whether they were waiting
// already, arrive new, come back for a retry or a reclaim, or are replayed
// or resent; one delivering when the pause lands finishes; resume makes
// them pending again, with their due times.
func testPausedShownEverywhere(t *testing.T, s store.Store) {
	_, _, held := deadAndHeld(t, s, "evt_held")
	waiting := ingest(t, s, newEvent("stripe", "evt_waiting", "billing", "audit"))[0].ID
	ingest(t, s, newEvent("stripe", "evt_inflight", "billing"))
	ingest(t, s, newEvent("stripe", "evt_crash", "billing"))
	cs := claim(t, s, "billing", 2, time.Hour) // evt_waiting and evt_inflight, in flight
	crash := expiredClaim(t, s, "billing")     // evt_crash: its worker died
	if len(cs) != 2 {
		t.Fatalf("claimed %d, want 2", len(cs))
	}
	if err := s.SetPaused(ctx(t), "billing", true); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPaused(ctx(t), "charges", true); err != nil {
		t.Fatal(err)
	}
	finish(t, s, delivered(cs[0]))           // an attempt in flight at the pause finishes
	finish(t, s, retry(cs[1], -time.Minute)) // and its retry, due at once, waits
	rescue(t, s, rule(anyhook.Reclaim, 8))   // so does a reclaim
	fresh := ingest(t, s, newEvent("stripe", "evt_new", "billing", "audit"))[0].ID
	replayed, err := s.Replay(ctx(t), waiting, []string{"billing"}, tester)
	if err != nil || len(replayed) != 1 || replayed[0].Status != anyhook.StatusPaused {
		t.Fatalf("Replay to a paused destination = %+v, %v; want paused", replayed, err)
	}
	resent, err := s.Resolve(ctx(t), held.ID, store.ActionResend, tester)
	if err != nil || resent.Status != anyhook.StatusPaused {
		t.Fatalf("resend to a paused destination = %+v, %v; want paused", resent, err)
	}
	if got := claim(t, s, "billing", 10, time.Minute); len(got) != 0 {
		t.Fatalf("claimed from a paused destination: %+v", got)
	}
	// billing: evt_inflight's retry, evt_crash's reclaim, evt_new, the
	// replay; charges: the resent one.
	want := map[string]bool{cs[1].Delivery.ID: true, crash.Delivery.ID: true, replayed[0].ID: true, held.ID: true}
	for _, d := range event(t, s, fresh).Deliveries {
		if d.Destination == "billing" {
			want[d.ID] = true
		} else if d.Status != anyhook.StatusPending {
			t.Errorf("evt_new to audit (not paused) is %s, want pending", d.Status)
		}
	}
	check := func(st anyhook.DeliveryStatus, wantIDs map[string]bool) {
		t.Helper()
		list, _, err := s.ListDeliveries(ctx(t), store.DeliveryFilter{Status: st, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, d := range list {
			got[d.ID] = true
			if d.Status != st {
				t.Errorf("ListDeliveries(%s) lists %s as %s", st, d.ID, d.Status)
			}
			if full, err := s.Event(ctx(t), d.EventID); err == nil {
				for _, x := range full.Deliveries {
					if x.ID == d.ID && x.Status != st {
						t.Errorf("delivery %s is %s in the list, %s on its event", d.ID, st, x.Status)
					}
				}
			}
		}
		for id := range wantIDs {
			if !got[id] {
				t.Errorf("ListDeliveries(%s) lacks %s", st, id)
			}
		}
		if len(got) != len(wantIDs) {
			t.Errorf("ListDeliveries(%s) = %d deliveries, want %d", st, len(got), len(wantIDs))
		}
		evs, _, err := s.ListEvents(ctx(t), store.EventFilter{Status: st})
		if err != nil {
			t.Fatal(err)
		}
		wantEvents := map[string]bool{}
		for _, d := range list {
			wantEvents[d.EventID] = true
		}
		if len(evs) != len(wantEvents) {
			t.Errorf("ListEvents(%s) = %d events, want %d", st, len(evs), len(wantEvents))
		}
	}
	audits := map[string]bool{}
	for _, id := range []string{waiting, fresh} {
		for _, d := range event(t, s, id).Deliveries {
			if d.Destination == "audit" {
				audits[d.ID] = true
			}
		}
	}
	check(anyhook.StatusPaused, want)
	check(anyhook.StatusPending, audits)
	counts, err := s.Counts(ctx(t))
	if err != nil || counts[anyhook.StatusPaused] != len(want) || counts[anyhook.StatusPending] != len(audits) {
		t.Errorf("Counts = %v, %v; want %d paused, %d pending", counts, err, len(want), len(audits))
	}
	if n, err := bulkCount(s.ReplayDeliveries(ctx(t), store.DeliveryFilter{Status: anyhook.StatusPending, Destination: "billing"}, tester)); err != nil || n != 0 {
		t.Errorf("bulk replay of pending billing deliveries while billing is paused = %d, %v; want 0 (they are paused)", n, err)
	}

	// Resume: the same deliveries are pending, and claimed.
	for _, dest := range []string{"billing", "charges"} {
		if err := s.SetPaused(ctx(t), dest, false); err != nil {
			t.Fatal(err)
		}
	}
	// Those with an attempt behind them are retrying, the others pending.
	retrying := map[string]bool{}
	for id := range want {
		if d, err := s.Delivery(ctx(t), id); err == nil && d.AttemptCount > 0 {
			retrying[id] = true
		} else {
			audits[id] = true
		}
	}
	check(anyhook.StatusPending, audits)
	check(anyhook.StatusRetrying, retrying)
	check(anyhook.StatusPaused, nil)
	if got := claim(t, s, "billing", 10, time.Minute); len(got) != 4 {
		t.Fatalf("after resume claimed %d billing deliveries, want 4", len(got))
	}
}

// bulkCount is the count of a bulk replay, for the tests that expect no
// pruned events.
func bulkCount(b store.BulkReplay, err error) (int, error) { return b.Count, err }

// testAttemptErrorKeptAlike: an attempt's error text (a destination's or
// the network's words) that is not UTF-8 or holds a NUL is kept as the
// same text on both stores, each bad byte as U+FFFD, for one outcome and
// for a batch of them.
func testAttemptErrorKeptAlike(t *testing.T, s store.Store) {
	ingest(t, s, newEvent("stripe", "evt_1", "billing"), newEvent("stripe", "evt_2", "billing"), newEvent("stripe", "evt_3", "billing"))
	cs := claim(t, s, "billing", 10, time.Minute)
	if len(cs) != 3 {
		t.Fatalf("claimed %d, want 3", len(cs))
	}
	const raw, want = "reset by \xff peer\x00", "reset by \uFFFD peer\uFFFD"
	for _, outs := range [][]store.Outcome{{retry(cs[0], time.Hour)}, {retry(cs[1], time.Hour), retry(cs[2], time.Hour)}} {
		for i := range outs {
			outs[i].Result.Error = raw
		}
		if lost := finish(t, s, outs...); len(lost) != 0 {
			t.Fatalf("lost = %v", lost)
		}
	}
	for _, c := range cs {
		d := event(t, s, c.Event.ID).Deliveries[0]
		if len(d.Attempts) != 1 || d.Attempts[0].Error != want {
			t.Errorf("event %s: attempts %+v, want one with error %q", c.Event.ID, d.Attempts, want)
		}
	}
}

// testAttemptOutcomeKept: each attempt reads back with the outcome it was
// recorded with, one outcome per delivery of one batch; an attempt that
// names none reads unknown.
func testAttemptOutcomeKept(t *testing.T, s store.Store) {
	outcomes := []string{anyhook.OutcomeAnswered, anyhook.OutcomeNoAnswer, anyhook.OutcomeNotSent, ""}
	var ids []string
	for i := range outcomes {
		ids = append(ids, ingest(t, s, newEvent("stripe", fmt.Sprintf("evt_%d", i), "billing"))[0].ID)
	}
	cs := claim(t, s, "billing", len(outcomes), time.Minute)
	if len(cs) != len(outcomes) {
		t.Fatalf("claimed %d, want %d", len(cs), len(outcomes))
	}
	want := map[string]string{}
	var outs []store.Outcome
	for i, c := range cs {
		o := retry(c, time.Hour)
		o.Result.Outcome = outcomes[i]
		outs = append(outs, o)
		want[c.Event.ID] = cmp.Or(outcomes[i], anyhook.OutcomeUnknown)
	}
	if lost := finish(t, s, outs...); len(lost) != 0 {
		t.Fatalf("lost = %v", lost)
	}
	for _, id := range ids {
		as := event(t, s, id).Deliveries[0].Attempts
		if len(as) != 1 || as[0].Outcome != want[id] {
			t.Errorf("event %s: attempts %+v, want one with outcome %q", id, as, want[id])
		}
	}
}
