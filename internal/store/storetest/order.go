package storetest

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// objectEvent is newEvent about object at version.
func objectEvent(key, object, version string, dests ...string) store.NewEvent {
	ne := newEvent("stripe", key, dests...)
	ne.Event.Object, ne.Event.Version = object, version
	return ne
}

func claimInOrder(t *testing.T, s store.Store, dest string, limit int, lease time.Duration) []store.Claim {
	t.Helper()
	cs, err := s.ClaimInOrder(ctx(t), dest, limit, lease)
	if err != nil {
		t.Fatalf("ClaimInOrder: %v", err)
	}
	return cs
}

// keys are the dedup keys of the claims' events, sorted.
func keys(cs []store.Claim) []string {
	var ks []string
	for _, c := range cs {
		ks = append(ks, c.Event.DedupKey)
	}
	slices.Sort(ks)
	return ks
}

func wantKeys(t *testing.T, what string, cs []store.Claim, want ...string) {
	t.Helper()
	if got := keys(cs); !slices.Equal(got, want) {
		t.Fatalf("%s: claimed %v, want %v", what, got, want)
	}
}

func dead(c store.Claim) store.Outcome {
	o := retry(c, 0)
	o.Status = anyhook.StatusDead
	return o
}

// testOrderByVersion: one object's events arrive out of order and are
// claimed one at a time in version order (integers as numbers, equal
// versions in arrival order); another object flows alongside, and an
// event without an object is never held back.
func testOrderByVersion(t *testing.T, s store.Store) {
	ingest(t, s,
		objectEvent("v3", "in_1", "3", "billing"),
		objectEvent("v10", "in_1", "10", "billing"),
		objectEvent("v1", "in_1", "1", "billing"),
		objectEvent("v2a", "in_1", "2", "billing"),
		objectEvent("w1", "in_2", "2026-01-02T00:00:00Z", "billing"),
	)
	ingest(t, s, objectEvent("v2b", "in_1", "2", "billing"))
	ingest(t, s, objectEvent("w0", "in_2", "2026-01-01T23:00:00-02:00", "billing")) // later than w1: 01:00Z on the 2nd
	ingest(t, s, newEvent("stripe", "loose", "billing"))

	var got []string
	first := claimInOrder(t, s, "billing", 10, time.Minute)
	wantKeys(t, "first round", first, "loose", "v1", "w1")
	for _, c := range first {
		finish(t, s, delivered(c))
	}
	got = append(got, "v1")
	for {
		cs := claimInOrder(t, s, "billing", 10, time.Minute)
		if len(cs) == 0 {
			break
		}
		var mine []store.Claim
		for _, c := range cs {
			if c.Event.Object == "in_1" {
				mine = append(mine, c)
			}
			finish(t, s, delivered(c))
		}
		if len(mine) > 1 {
			t.Fatalf("claimed %d deliveries of one object at once", len(mine))
		}
		for _, c := range mine {
			got = append(got, c.Event.DedupKey)
		}
	}
	if want := []string{"v1", "v2a", "v2b", "v3", "v10"}; !slices.Equal(got, want) {
		t.Fatalf("in_1 claimed in the order %v, want %v", got, want)
	}
	// Claim, without order, takes any due delivery: both stay usable.
	ingest(t, s, objectEvent("u2", "in_3", "2", "audit"), objectEvent("u1", "in_3", "1", "audit"))
	wantKeys(t, "unordered claim", claim(t, s, "audit", 10, time.Minute), "u1", "u2")
}

// testOrderFailingHeadBlocksOnlyItsObject: a head waiting for its retry
// holds back its object's later deliveries, and nobody else's; the waiting
// delivery says what it waits behind.
func testOrderFailingHeadBlocksOnlyItsObject(t *testing.T, s store.Store) {
	res := ingest(t, s,
		objectEvent("a1", "in_a", "1", "billing"),
		objectEvent("a2", "in_a", "2", "billing"),
		objectEvent("b1", "in_b", "1", "billing"),
	)
	cs := claimInOrder(t, s, "billing", 10, time.Minute)
	wantKeys(t, "first", cs, "a1", "b1")
	var a1 store.Claim
	for _, c := range cs {
		if c.Event.DedupKey == "a1" {
			a1 = c
			finish(t, s, retry(c, time.Hour))
		} else {
			finish(t, s, delivered(c))
		}
	}
	ingest(t, s, objectEvent("b2", "in_b", "2", "billing"))
	wantKeys(t, "while a1 waits for its retry", claimInOrder(t, s, "billing", 10, time.Minute), "b2")
	if cs := claimInOrder(t, s, "billing", 10, time.Minute); len(cs) != 0 {
		t.Fatalf("claimed %v behind a head waiting for its retry", keys(cs))
	}
	a2 := event(t, s, res[1].ID).Deliveries[0]
	behind, err := s.WaitsBehind(ctx(t), []string{a2.ID, a1.Delivery.ID})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]store.Blocker{a2.ID: {DeliveryID: a1.Delivery.ID, EventID: a1.Event.ID, Version: "1"}}
	if len(behind) != 1 || behind[a2.ID] != want[a2.ID] {
		t.Fatalf("WaitsBehind = %v, want %v", behind, want)
	}
}

// testOrderDeadReleasesNext: a head that ends dead lets the next go.
func testOrderDeadReleasesNext(t *testing.T, s store.Store) {
	ingest(t, s, objectEvent("a1", "in_a", "1", "billing"), objectEvent("a2", "in_a", "2", "billing"))
	cs := claimInOrder(t, s, "billing", 10, time.Minute)
	wantKeys(t, "head", cs, "a1")
	finish(t, s, dead(cs[0]))
	wantKeys(t, "after the head died", claimInOrder(t, s, "billing", 10, time.Minute), "a2")
}

// testOrderHeldBlocks: a held head blocks its object until a person
// resolves it: a replay goes first (its version is the earliest), a
// discard lets the next go. A reclaimed head (its lease ran out: the
// process died) is claimed again before the next.
func testOrderHeldBlocks(t *testing.T, s store.Store) {
	res := ingest(t, s,
		objectEvent("a1", "in_a", "1", "billing"),
		objectEvent("a2", "in_a", "2", "billing"),
		objectEvent("a3", "in_a", "3", "billing"),
	)
	c := claimInOrder(t, s, "billing", 10, -time.Hour)
	wantKeys(t, "head", c, "a1")
	rescue(t, s, rule(anyhook.Reclaim, 8))
	c = claimInOrder(t, s, "billing", 10, -time.Hour)
	wantKeys(t, "after a reclaim", c, "a1")
	if c[0].Delivery.AttemptCount != 2 {
		t.Fatalf("reclaimed head at attempt %d, want 2", c[0].Delivery.AttemptCount)
	}
	rescue(t, s, rule(anyhook.Hold, 8))
	ingest(t, s, objectEvent("b1", "in_b", "1", "billing"))
	wantKeys(t, "while a1 is held", claimInOrder(t, s, "billing", 10, time.Minute), "b1")
	if cs := claimInOrder(t, s, "billing", 10, time.Minute); len(cs) != 0 {
		t.Fatalf("claimed %v behind a held head", keys(cs))
	}
	a2 := event(t, s, res[1].ID).Deliveries[0]
	behind, err := s.WaitsBehind(ctx(t), []string{a2.ID})
	if err != nil || behind[a2.ID].DeliveryID != c[0].Delivery.ID {
		t.Fatalf("WaitsBehind = %v, %v; want the held %s", behind, err, c[0].Delivery.ID)
	}
	if _, err := s.Replay(ctx(t), res[0].ID, []string{"billing"}, tester); err != nil {
		t.Fatal(err)
	}
	r := claimInOrder(t, s, "billing", 10, -time.Hour)
	wantKeys(t, "after the replay", r, "a1")
	if !r[0].Delivery.Replay {
		t.Fatalf("claimed %+v, want the replay delivery", r[0].Delivery)
	}
	rescue(t, s, rule(anyhook.Hold, 8))
	if _, err := s.Resolve(ctx(t), r[0].Delivery.ID, store.ActionDiscard, tester); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, "after the discard", claimInOrder(t, s, "billing", 10, time.Minute), "a2")
}

func testOrderPaused(t *testing.T, s store.Store) {
	ingest(t, s, objectEvent("a1", "in_a", "1", "billing"))
	if err := s.SetPaused(ctx(t), "billing", true); err != nil {
		t.Fatal(err)
	}
	if cs := claimInOrder(t, s, "billing", 10, time.Minute); len(cs) != 0 {
		t.Fatalf("claimed %v from a paused destination", keys(cs))
	}
}

func testOrderConcurrentClaims(t *testing.T, s store.Store) {
	var batch []store.NewEvent
	for o := range 4 {
		for v := 4; v >= 1; v-- { // newest first: out of order
			obj, ver := "in_"+strconv.Itoa(o), strconv.Itoa(v)
			batch = append(batch, objectEvent(obj+"_"+ver, obj, ver, "billing"))
		}
	}
	ingest(t, s, batch...)
	ClaimInOrderRace(t, []store.Store{s}, "billing", 4, 4, 4)
}

// ClaimInOrderRace has workers claim from dest with ClaimInOrder (worker i
// uses stores[i%len(stores)]) and deliver each claim at once,
// concurrently, while stores[0] records, one by one, an event of each
// object at versions -1, -2, … (lower than any before: each arrives as
// its object's new head). The caller recorded objects objects "in_0"…
// of versions 1…versions each, for dest. It fails t if two deliveries of
// one object were claimed at once, or versions 1…versions of an object
// were claimed out of order.
func ClaimInOrderRace(t *testing.T, stores []store.Store, dest string, workers, objects, versions int) {
	t.Helper()
	const late = 4 // per object
	var mu sync.Mutex
	// A worker that claimed nothing waits for progress: a new event, a
	// finished delivery or the end.
	progress, gen := sync.NewCond(&mu), 0
	step := func() {
		mu.Lock()
		gen++
		progress.Broadcast()
		mu.Unlock()
	}
	held := map[string]string{}   // object → the dedup key claimed and not yet finished
	seen := map[string][]string{} // object → versions ≥ 1, in claim order
	total, want := 0, objects*(versions+late)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		for v := 1; v <= late; v++ {
			for o := range objects {
				obj, ver := "in_"+strconv.Itoa(o), strconv.Itoa(-v)
				ne := objectEvent(obj+"_"+ver, obj, ver, dest)
				if res, err := stores[0].Ingest(ctx, []store.NewEvent{ne}); err != nil || res[0].Err != nil {
					t.Errorf("Ingest: %v %v", err, res)
					return
				}
				step()
			}
		}
	})
	for w := range workers {
		wg.Go(func() {
			s := stores[w%len(stores)]
			for ctx.Err() == nil {
				mu.Lock()
				before := gen
				mu.Unlock()
				cs, err := s.ClaimInOrder(ctx, dest, 3, time.Minute)
				if err != nil {
					if ctx.Err() == nil {
						t.Errorf("ClaimInOrder: %v", err)
					}
					return
				}
				mu.Lock()
				for _, c := range cs {
					obj := c.Event.Object
					if other, ok := held[obj]; ok {
						t.Errorf("%s claimed while %s of the same object is held", c.Event.DedupKey, other)
					}
					held[obj] = c.Event.DedupKey
					if v, _ := strconv.Atoi(c.Event.Version); v > 0 {
						seen[obj] = append(seen[obj], c.Event.Version)
					}
				}
				mu.Unlock()
				for _, c := range cs {
					mu.Lock()
					delete(held, c.Event.Object)
					mu.Unlock()
					if _, err := s.Finish(ctx, []store.Outcome{delivered(c)}); err != nil {
						t.Errorf("Finish: %v", err)
						return
					}
				}
				mu.Lock()
				total += len(cs)
				if total >= want {
					cancel()
				}
				for len(cs) == 0 && gen == before && ctx.Err() == nil {
					progress.Wait()
				}
				gen++
				progress.Broadcast()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if total != want {
		t.Fatalf("claimed %d deliveries, want %d", total, want)
	}
	for obj, vs := range seen {
		want := make([]string, versions)
		for i := range want {
			want[i] = strconv.Itoa(i + 1)
		}
		if !slices.Equal(vs, want) {
			t.Errorf("%s claimed in version order %v, want %v", obj, vs, want)
		}
	}
}

// testOrderReplayKeepsArrivalOrder: equal versions go in the order their
// events arrived, so the replay of a held head goes before a later event
// of the same version, as the head itself would have (a replay delivery
// is newer than that event's delivery, its event is not).
func testOrderReplayKeepsArrivalOrder(t *testing.T, s store.Store) {
	res := ingest(t, s, objectEvent("a1", "in_a", "5", "billing"))
	ingest(t, s, objectEvent("a2", "in_a", "5", "billing"))
	wantKeys(t, "head", claimInOrder(t, s, "billing", 10, -time.Hour), "a1")
	rescue(t, s, rule(anyhook.Hold, 8))
	if _, err := s.Replay(ctx(t), res[0].ID, []string{"billing"}, tester); err != nil {
		t.Fatal(err)
	}
	wantKeys(t, "after the replay of the held head", claimInOrder(t, s, "billing", 10, time.Minute), "a1")
}
