package storetest

import (
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// release gives cs back and returns the ids Release says it released,
// sorted.
func release(t *testing.T, s store.Store, cs ...store.Claim) []string {
	t.Helper()
	rs := make([]store.Release, len(cs))
	for i, c := range cs {
		rs[i] = store.Release{DeliveryID: c.Delivery.ID, Attempt: c.Delivery.AttemptCount}
	}
	ids, err := s.Release(ctx(t), rs)
	if err != nil {
		t.Fatalf("Release: %v", err)
	}
	slices.Sort(ids)
	return ids
}

// wantReleased fails t unless Release released exactly the deliveries of
// want.
func wantReleased(t *testing.T, what string, got []string, want ...store.Claim) {
	t.Helper()
	var ids []string
	for _, c := range want {
		ids = append(ids, c.Delivery.ID)
	}
	slices.Sort(ids)
	if !slices.Equal(got, ids) {
		t.Fatalf("%s: released %v, want %v", what, got, ids)
	}
}

// wantUnclaimed fails t unless delivery id of event evID to dest is
// pending (retrying after an attempt), due, at attempt count attempts and claimed at claimedAt (zero:
// never), with no lease and rows attempt rows.
func wantUnclaimed(t *testing.T, s store.Store, evID, dest string, attempts int, claimedAt time.Time, rows int) {
	t.Helper()
	d := delivery(t, s, evID, dest)
	want := anyhook.StatusPending
	if attempts > 0 {
		want = anyhook.StatusRetrying // an attempt before the released one failed
	}
	if d.Status != want || d.AttemptCount != attempts || !d.LeaseUntil.IsZero() || !d.ClaimedAt.Equal(claimedAt) || len(d.Attempts) != rows {
		t.Fatalf("released delivery = %s, attempt %d, lease %v, claimed at %v, %d attempt rows; want %s, attempt %d, no lease, claimed at %v, %d rows",
			d.Status, d.AttemptCount, d.LeaseUntil, d.ClaimedAt, len(d.Attempts), want, attempts, claimedAt, rows)
	}
}

// testRelease: a released claim is pending again as if it had never
// been claimed (attempt not counted, no attempt row, claimed at its
// previous attempt's start) and keeps its place in the queue; Release is
// fenced by (delivery, attempt, delivering) as Finish is.
func testRelease(t *testing.T, s store.Store) {
	if ids, err := s.Release(ctx(t), nil); err != nil || len(ids) != 0 {
		t.Fatalf("Release of nothing = %v, %v", ids, err)
	}
	first := ingest(t, s, newEvent("stripe", "evt_1", "billing"))[0]
	second := ingest(t, s, newEvent("stripe", "evt_2", "billing"))[0]
	c := claim(t, s, "billing", 1, time.Minute)
	if len(c) != 1 || c[0].Event.ID != first.ID {
		t.Fatalf("claimed %+v, want the older delivery", c)
	}
	wantReleased(t, "a live claim", release(t, s, c[0]), c[0])
	wantUnclaimed(t, s, first.ID, "billing", 0, time.Time{}, 0)
	wantReleased(t, "the same claim again", release(t, s, c[0]))

	// Its place in the queue is kept: it is claimed before the younger
	// one, at attempt 1 again.
	again := claim(t, s, "billing", 1, time.Minute)
	if len(again) != 1 || again[0].Delivery.ID != c[0].Delivery.ID || again[0].Delivery.AttemptCount != 1 {
		t.Fatalf("after the release claimed %+v, want the released delivery at attempt 1", again)
	}
	// The fence: another attempt number, an unknown id, a finished claim.
	wrong := again[0]
	wrong.Delivery.AttemptCount = 2
	unknown := again[0]
	unknown.Delivery.ID = store.NewID()
	wantReleased(t, "a wrong attempt and an unknown id", release(t, s, wrong, unknown))
	finish(t, s, retry(again[0], 0))
	wantReleased(t, "a finished claim", release(t, s, again[0]))

	// A second attempt released goes back to the first's count and start.
	cs := claim(t, s, "billing", 2, time.Minute)
	if len(cs) != 2 {
		t.Fatalf("claimed %d, want both deliveries", len(cs))
	}
	wantReleased(t, "two claims at once", release(t, s, cs...), cs...)
	wantUnclaimed(t, s, first.ID, "billing", 1, received, 1)
	wantUnclaimed(t, s, second.ID, "billing", 0, time.Time{}, 0)
	if cs := claim(t, s, "billing", 2, time.Minute); len(cs) != 2 || cs[0].Delivery.AttemptCount+cs[1].Delivery.AttemptCount != 3 {
		t.Fatalf("after the release claimed %+v, want attempt 2 of the first and 1 of the second", cs)
	}
}

// testReleaseLosesToRescue: a claim whose lease ran out and that a
// rescuer took is not released, and a released claim is not rescued;
// racing, exactly one of the two acts on each claim.
func testReleaseLosesToRescue(t *testing.T, s store.Store) {
	ingest(t, s, newEvent("stripe", "evt_1", "billing"))
	c := expiredClaim(t, s, "billing")
	if ds := rescue(t, s, rule(anyhook.Reclaim, 8)); len(ds) != 1 {
		t.Fatalf("rescued %+v, want the expired claim", ds)
	}
	wantReleased(t, "a rescued claim", release(t, s, c))

	const n = 8
	for i := range n {
		ingest(t, s, newEvent("stripe", "evt_race_"+strconv.Itoa(i), "audit"))
	}
	cs := claim(t, s, "audit", n, -time.Hour)
	if len(cs) != n {
		t.Fatalf("claimed %d, want %d", len(cs), n)
	}
	var got []string
	var ds []anyhook.Delivery
	var wg sync.WaitGroup
	wg.Go(func() {
		for _, c := range cs {
			ids, err := s.Release(ctx(t), []store.Release{{DeliveryID: c.Delivery.ID, Attempt: c.Delivery.AttemptCount}})
			if err != nil {
				t.Errorf("Release: %v", err)
			}
			got = append(got, ids...)
		}
	})
	wg.Go(func() {
		var err error
		if ds, err = s.Rescue(ctx(t), rule(anyhook.Hold, 8)); err != nil {
			t.Errorf("Rescue: %v", err)
		}
	})
	wg.Wait()
	acted := map[string]int{}
	for _, id := range got {
		acted[id]++
	}
	for _, d := range ds {
		acted[d.ID]++
	}
	for _, c := range cs {
		if acted[c.Delivery.ID] != 1 {
			t.Fatalf("delivery %s: released or rescued %d times (released %v, rescued %d), want exactly once", c.Delivery.ID, acted[c.Delivery.ID], got, len(ds))
		}
	}
	if ds := rescue(t, s, rule(anyhook.Hold, 8)); len(ds) != 0 {
		t.Fatalf("a second rescue took %+v: a released claim has no lease", ds)
	}
}

// testReleaseClaimAtIngest: a delivery claimed at ingest and released is
// pending at attempt 0, never claimed, and the dispatcher's claim takes it
// at attempt 1.
func testReleaseClaimAtIngest(t *testing.T, s store.Store) {
	r := ingest(t, s, leased(newEvent("stripe", "evt_1", "billing"), time.Minute, "billing"))[0]
	if len(r.Claims) != 1 {
		t.Fatalf("claims = %+v, want one", r.Claims)
	}
	wantReleased(t, "a claim made at ingest", release(t, s, r.Claims[0]), r.Claims[0])
	wantUnclaimed(t, s, r.ID, "billing", 0, time.Time{}, 0)
	if cs := claim(t, s, "billing", 10, time.Minute); len(cs) != 1 || cs[0].Delivery.ID != r.Claims[0].Delivery.ID || cs[0].Delivery.AttemptCount != 1 {
		t.Fatalf("claimed %+v, want the released delivery at attempt 1", cs)
	}
}

// testReleaseKeepsOrder: in order, a released head is its object's head
// still: claimed again before the later versions, and nothing of its
// object is claimed while it is out.
func testReleaseKeepsOrder(t *testing.T, s store.Store) {
	ingest(t, s,
		objectEvent("v1", "in_1", "1", "billing"),
		objectEvent("v2", "in_1", "2", "billing"),
		objectEvent("w1", "in_2", "1", "billing"),
	)
	cs := claimInOrder(t, s, "billing", 10, time.Minute)
	wantKeys(t, "first round", cs, "v1", "w1")
	var v1 store.Claim
	for _, c := range cs {
		if c.Event.DedupKey == "v1" {
			v1 = c
		}
	}
	wantReleased(t, "the head of in_1", release(t, s, v1), v1)
	again := claimInOrder(t, s, "billing", 10, time.Minute)
	wantKeys(t, "after the release", again, "v1")
	if again[0].Delivery.AttemptCount != 1 {
		t.Fatalf("v1 claimed again at attempt %d, want 1: the released attempt is not counted", again[0].Delivery.AttemptCount)
	}
	finish(t, s, delivered(again[0]))
	wantKeys(t, "after v1", claimInOrder(t, s, "billing", 10, time.Minute), "v2")
}

// renew renews cs with lease and returns the ids Renew says it renewed,
// sorted.
func renew(t *testing.T, s store.Store, lease time.Duration, cs ...store.Claim) []string {
	t.Helper()
	rs := make([]store.Release, len(cs))
	for i, c := range cs {
		rs[i] = store.Release{DeliveryID: c.Delivery.ID, Attempt: c.Delivery.AttemptCount}
	}
	ids, err := s.Renew(ctx(t), rs, lease)
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	slices.Sort(ids)
	return ids
}

// testRenew: a renewed claim, even one whose lease had ended, holds a
// fresh lease (no rescue takes it) and changes in nothing else; Renew is
// fenced by (delivery, attempt, delivering) as Release is.
func testRenew(t *testing.T, s store.Store) {
	if ids, err := s.Renew(ctx(t), nil, time.Minute); err != nil || len(ids) != 0 {
		t.Fatalf("Renew of nothing = %v, %v", ids, err)
	}
	ev := ingest(t, s, newEvent("stripe", "evt_1", "billing"))[0]
	c := expiredClaim(t, s, "billing")
	wantReleased(t, "an expired claim nobody rescued", renew(t, s, time.Hour, c), c)
	d := delivery(t, s, ev.ID, "billing")
	if d.Status != anyhook.StatusDelivering || d.AttemptCount != 1 || !d.LeaseUntil.After(time.Now().Add(50*time.Minute)) || len(d.Attempts) != 0 {
		t.Fatalf("renewed delivery = %s, attempt %d, lease until %v, %d attempt rows; want delivering, attempt 1, an hour's lease, no rows",
			d.Status, d.AttemptCount, d.LeaseUntil, len(d.Attempts))
	}
	if ds := rescue(t, s, rule(anyhook.Reclaim, 8)); len(ds) != 0 {
		t.Fatalf("rescued %+v, a renewed claim", ds)
	}
	wrong, unknown := c, c
	wrong.Delivery.AttemptCount = 2
	unknown.Delivery.ID = store.NewID()
	wantReleased(t, "a wrong attempt and an unknown id", renew(t, s, time.Hour, wrong, unknown))
	finish(t, s, retry(c, 0))
	wantReleased(t, "a finished claim", renew(t, s, time.Hour, c))

	// A rescued claim is not renewed.
	again := expiredClaim(t, s, "billing")
	if ds := rescue(t, s, rule(anyhook.Reclaim, 8)); len(ds) != 1 {
		t.Fatalf("rescued %+v, want the expired claim", ds)
	}
	wantReleased(t, "a rescued claim", renew(t, s, time.Hour, again))
}
