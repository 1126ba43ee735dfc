package storetest

import (
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// The automatic pause (auto_pause): a tripped breaker holds a destination's
// deliveries back as a person's pause does, apart from it; only probes
// take deliveries, one per turn.

func trip(t *testing.T, s store.Store, dest string, at time.Time, firstProbe time.Time) bool {
	t.Helper()
	ok, err := s.TripBreaker(ctx(t), dest, at, "3 consecutive failed attempts", firstProbe)
	if err != nil {
		t.Fatalf("TripBreaker: %v", err)
	}
	return ok
}

func probe(t *testing.T, s store.Store, dest string, inOrder bool, at time.Time) ([]store.Claim, bool) {
	t.Helper()
	cs, tripped, err := s.ClaimProbe(ctx(t), dest, inOrder, at, 30*time.Second, time.Minute)
	if err != nil {
		t.Fatalf("ClaimProbe: %v", err)
	}
	return cs, tripped
}

// testBreakerHoldsBack: a tripped breaker stops claims (plain, in order,
// at ingest), shows the pending deliveries paused without making the
// destination paused by a person, and a reset lets claims go on.
func testBreakerHoldsBack(t *testing.T, s store.Store) {
	first := ingest(t, s, newEvent("stripe", "evt_1", "billing"))[0]
	at := received.Add(time.Hour)
	if !trip(t, s, "billing", at, at.Add(30*time.Second)) {
		t.Fatal("TripBreaker = false on a destination never tripped")
	}
	if trip(t, s, "billing", at.Add(time.Second), at.Add(time.Minute)) {
		t.Fatal("TripBreaker = true on a tripped breaker, want false (tripped already)")
	}
	r := ingest(t, s, leased(newEvent("stripe", "evt_2", "billing", "audit"), time.Minute, "billing", "audit"))[0]
	if len(r.Claims) != 1 || r.Claims[0].Delivery.Destination != "audit" {
		t.Fatalf("claims at ingest = %+v, want audit's only (billing's breaker tripped)", r.Claims)
	}
	if cs := claim(t, s, "billing", 10, time.Minute); len(cs) != 0 {
		t.Fatalf("claimed %d from a tripped destination", len(cs))
	}
	if cs := claimInOrder(t, s, "billing", 10, time.Minute); len(cs) != 0 {
		t.Fatalf("claimed %v in order from a tripped destination", keys(cs))
	}
	if d := delivery(t, s, first.ID, "billing"); d.Status != anyhook.StatusPaused {
		t.Fatalf("delivery = %+v, want shown paused", d)
	}
	if n, err := s.Counts(ctx(t)); err != nil || n[anyhook.StatusPaused] != 2 {
		t.Fatalf("Counts = %v, %v, want 2 paused", n, err)
	}
	if p, err := s.Paused(ctx(t)); err != nil || p["billing"] {
		t.Fatalf("Paused = %v, %v: a breaker is not a person's pause", p, err)
	}
	bs, err := s.Breakers(ctx(t))
	if b := bs["billing"]; err != nil || len(bs) != 1 || !b.TrippedAt.Equal(at) || b.Reason == "" || !b.NextProbe.Equal(at.Add(30*time.Second)) {
		t.Fatalf("Breakers = %+v, %v, want billing tripped at %v, probe at +30s", bs, err, at)
	}
	if ok, err := s.ResetBreaker(ctx(t), "billing"); err != nil || !ok {
		t.Fatalf("ResetBreaker = %v, %v, want true", ok, err)
	}
	if ok, err := s.ResetBreaker(ctx(t), "billing"); err != nil || ok {
		t.Fatalf("second ResetBreaker = %v, %v, want false", ok, err)
	}
	if bs, err := s.Breakers(ctx(t)); err != nil || len(bs) != 0 {
		t.Fatalf("Breakers after reset = %+v, %v", bs, err)
	}
	if cs := claim(t, s, "billing", 10, time.Minute); len(cs) != 2 {
		t.Fatalf("claimed %d after reset, want 2", len(cs))
	}
}

// testBreakerProbes: a probe takes the oldest due delivery once per turn,
// counts it as a probe, and a failed probe does not use up max_attempts
// (not even when its claim expires).
func testBreakerProbes(t *testing.T, s store.Store) {
	if cs, tripped := probe(t, s, "billing", false, received); len(cs) != 0 || tripped {
		t.Fatalf("probe of an unknown destination = %d claims, tripped %v", len(cs), tripped)
	}
	ingest(t, s, newEvent("stripe", "evt_1", "billing"))
	ingest(t, s, newEvent("stripe", "evt_2", "billing"))
	if cs, tripped := probe(t, s, "billing", false, received); len(cs) != 0 || tripped {
		t.Fatalf("probe of an untripped destination = %d claims, tripped %v", len(cs), tripped)
	}
	at := received.Add(time.Hour)
	trip(t, s, "billing", at, at.Add(30*time.Second))
	if cs, tripped := probe(t, s, "billing", false, at.Add(29*time.Second)); len(cs) != 0 || !tripped {
		t.Fatalf("probe before it is due = %d claims, tripped %v", len(cs), tripped)
	}
	at = at.Add(30 * time.Second)
	cs, tripped := probe(t, s, "billing", false, at)
	if len(cs) != 1 || !tripped || !cs[0].Probe || cs[0].Event.DedupKey != "evt_1" || cs[0].Delivery.Probes != 1 || cs[0].Delivery.AttemptCount != 1 {
		t.Fatalf("due probe = %+v, tripped %v, want evt_1 (the oldest) as a probe", cs, tripped)
	}
	if again, _ := probe(t, s, "billing", false, at); len(again) != 0 {
		t.Fatal("a second probe in the same turn claimed")
	}
	finish(t, s, retry(cs[0], 0))
	// The next turn: the probe's claim expires; at max_attempts 1 it is not
	// dead, as its one attempt was a probe.
	if _, _, err := s.ClaimProbe(ctx(t), "billing", false, at.Add(30*time.Second), 30*time.Second, -time.Hour); err != nil {
		t.Fatal(err)
	}
	ds := rescue(t, s, rule(anyhook.Reclaim, 1))
	if len(ds) != 1 || ds[0].Status != anyhook.StatusPending || ds[0].Probes != 1 {
		t.Fatalf("rescued probe = %+v, want pending (a probe does not count towards max_attempts)", ds)
	}
	if err := s.SetPaused(ctx(t), "billing", true); err != nil {
		t.Fatal(err)
	}
	if cs, tripped := probe(t, s, "billing", false, at.Add(time.Hour)); len(cs) != 0 || !tripped {
		t.Fatalf("probe of a destination a person paused = %d claims, tripped %v, want none", len(cs), tripped)
	}
}

// testBreakerProbesInOrder: in order, a probe takes the head of an
// object's queue, never a later version.
func testBreakerProbesInOrder(t *testing.T, s store.Store) {
	ingest(t, s, objectEvent("a2", "in_a", "2", "billing"))
	ingest(t, s, objectEvent("a1", "in_a", "1", "billing"))
	at := received.Add(time.Hour)
	trip(t, s, "billing", at, at)
	cs, _ := probe(t, s, "billing", true, at)
	wantKeys(t, "probe in order", cs, "a1")
	finish(t, s, retry(cs[0], 0))
	cs, _ = probe(t, s, "billing", true, at.Add(30*time.Second))
	wantKeys(t, "second probe in order", cs, "a1")
}

// testBreakerReleasedProbe: a probe's claim given back unsent (too little
// lease left, a shutdown before the request left) is as if never claimed:
// its attempt and its probe both go back down. Were only the attempt to
// go down, the probe would still be subtracted from the attempts counted
// towards max_attempts, and the delivery would get one attempt more than
// its destination allows for every probe released.
func testBreakerReleasedProbe(t *testing.T, s store.Store) {
	ingest(t, s, newEvent("stripe", "evt_1", "billing"))
	at := received.Add(time.Hour)
	trip(t, s, "billing", at, at)
	cs, _ := probe(t, s, "billing", false, at)
	if len(cs) != 1 || !cs[0].Probe || cs[0].Delivery.Probes != 1 {
		t.Fatalf("probe = %+v, want one probe claim", cs)
	}
	if rel, err := s.Release(ctx(t), []store.Release{{DeliveryID: cs[0].Delivery.ID, Attempt: cs[0].Delivery.AttemptCount, Probe: true}}); err != nil || len(rel) != 1 {
		t.Fatalf("Release = %v, %v", rel, err)
	}
	d := delivery(t, s, cs[0].Event.ID, "billing")
	if d.Status != anyhook.StatusPaused || d.AttemptCount != 0 || d.Probes != 0 {
		t.Fatalf("released probe = status %s, attempts %d, probes %d; want as never claimed (0, 0)", d.Status, d.AttemptCount, d.Probes)
	}
}
