package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// leased is ne with its deliveries to dests (in ne.Destinations) leased
// at ingest for lease.
func leased(ne store.NewEvent, lease time.Duration, dests ...string) store.NewEvent {
	ne.Lease = make([]time.Duration, len(ne.Destinations))
	for i, d := range ne.Destinations {
		for _, want := range dests {
			if d == want {
				ne.Lease[i] = lease
			}
		}
	}
	return ne
}

// delivery is the delivery of event id to dest, as Event reads it.
func delivery(t *testing.T, s store.Store, id, dest string) anyhook.Delivery {
	t.Helper()
	for _, d := range event(t, s, id).Deliveries {
		if d.Destination == dest {
			return d
		}
	}
	t.Fatalf("event %s has no delivery to %s", id, dest)
	return anyhook.Delivery{}
}

// testClaimAtIngest: a delivery leased at ingest comes back claimed with
// its event, is stored delivering with its first attempt counted, is not
// claimed again, and finishes as a claim does; the other destination's
// delivery stays pending for Claim.
func testClaimAtIngest(t *testing.T, s store.Store) {
	ne := leased(newEvent("stripe", "evt_1", "billing", "audit"), time.Minute, "billing")
	r := ingest(t, s, ne)[0]
	if len(r.Claims) != 1 {
		t.Fatalf("claims = %+v, want billing's", r.Claims)
	}
	c := r.Claims[0]
	if d := c.Delivery; d.Destination != "billing" || d.Status != anyhook.StatusDelivering || d.AttemptCount != 1 || d.EventID != r.ID || d.ID == "" {
		t.Fatalf("claim = %+v", d)
	}
	if c.Event.ID != ne.Event.ID || string(c.Event.Body) != string(ne.Event.Body) || c.Event.Header.Get("Content-Type") != "application/json" || c.Event.DedupKey != "evt_1" {
		t.Fatalf("claimed event = %+v", c.Event)
	}
	stored := delivery(t, s, r.ID, "billing")
	if stored.ID != c.Delivery.ID || stored.Status != anyhook.StatusDelivering || stored.AttemptCount != 1 || stored.ClaimedAt.IsZero() || stored.LeaseUntil.IsZero() {
		t.Fatalf("stored delivery = %+v, want delivering, attempt 1, claimed and leased", stored)
	}
	if more := claim(t, s, "billing", 10, time.Minute); len(more) != 0 {
		t.Fatalf("a delivery claimed at ingest was claimed again: %+v", more)
	}
	if audit := claim(t, s, "audit", 10, time.Minute); len(audit) != 1 || audit[0].Delivery.AttemptCount != 1 {
		t.Fatalf("audit claims = %+v, want its pending delivery", audit)
	}
	if lost := finish(t, s, delivered(c)); len(lost) != 0 {
		t.Fatalf("the outcome of a claim made at ingest was lost: %v", lost)
	}
	if d := delivery(t, s, r.ID, "billing"); d.Status != anyhook.StatusDelivered || len(d.Attempts) != 1 || d.Attempts[0].Number != 1 {
		t.Fatalf("delivery = %+v, want delivered after one attempt", d)
	}
	// A duplicate claims nothing, alone or in a batch with its original.
	dup := ingest(t, s, leased(newEvent("stripe", "evt_1", "billing"), time.Minute, "billing"))[0]
	if !dup.Duplicate || len(dup.Claims) != 0 {
		t.Fatalf("duplicate = %+v, want no claims", dup)
	}
	batch := ingest(t, s, leased(newEvent("stripe", "evt_2", "billing"), time.Minute, "billing"),
		leased(newEvent("stripe", "evt_2", "billing"), time.Minute, "billing"))
	if len(batch[0].Claims) != 1 || !batch[1].Duplicate || len(batch[1].Claims) != 0 {
		t.Fatalf("batch with a duplicate = %+v, want one claim", batch)
	}
}

// testClaimAtIngestPausedAndStale: a paused destination's delivery and a
// skipped stale event's are not claimed at ingest; a stale event that is
// delivered (flagged) is, with its flag.
func testClaimAtIngestPausedAndStale(t *testing.T, s store.Store) {
	if err := s.SetPaused(ctx(t), "billing", true); err != nil {
		t.Fatal(err)
	}
	r := ingest(t, s, leased(newEvent("stripe", "evt_p", "billing", "audit"), time.Minute, "billing", "audit"))[0]
	if len(r.Claims) != 1 || r.Claims[0].Delivery.Destination != "audit" {
		t.Fatalf("claims = %+v, want audit's only (billing is paused)", r.Claims)
	}
	if d := delivery(t, s, r.ID, "billing"); d.Status != anyhook.StatusPaused || d.AttemptCount != 0 {
		t.Fatalf("paused destination's delivery = %+v, want paused, no attempt", d)
	}
	if err := s.SetPaused(ctx(t), "billing", false); err != nil {
		t.Fatal(err)
	}
	if cs := claim(t, s, "billing", 10, time.Minute); len(cs) != 1 || cs[0].Delivery.EventID != r.ID {
		t.Fatalf("after resume: %+v, want the delivery left pending", cs)
	}

	ingest(t, s, leased(versioned("v2", "order-1", "2", true), time.Minute, "d"))
	skipped := ingest(t, s, leased(versioned("v1", "order-1", "1", true), time.Minute, "d"))[0]
	if !skipped.Stale || len(skipped.Claims) != 0 {
		t.Fatalf("stale skipped = %+v, want no claim", skipped)
	}
	if d := delivery(t, s, skipped.ID, "d"); d.Status != anyhook.StatusSkipped {
		t.Fatalf("stale delivery = %+v, want skipped", d)
	}
	flagged := ingest(t, s, leased(versioned("v1b", "order-1", "1", false), time.Minute, "d"))[0]
	if len(flagged.Claims) != 1 || !flagged.Claims[0].Delivery.Stale || !flagged.Claims[0].Event.Stale {
		t.Fatalf("stale flagged = %+v, want a claim marked stale", flagged.Claims)
	}
}

// testClaimAtIngestRescued: a claim made at ingest whose lease ran out
// (its process died before sending) is rescued by its destination's rule
// like any claim: reclaim makes it due again, hold holds it.
func testClaimAtIngestRescued(t *testing.T, s store.Store) {
	res := ingest(t, s, leased(newEvent("stripe", "evt_r", "billing"), -time.Hour, "billing"),
		leased(newEvent("stripe", "evt_h", "charges"), -time.Hour, "charges"))
	if len(res[0].Claims) != 1 || len(res[1].Claims) != 1 {
		t.Fatalf("claims = %+v", res)
	}
	ds := rescue(t, s, func(dest string) (store.StaleRule, bool) {
		if dest == "charges" {
			return store.StaleRule{Policy: anyhook.Hold, MaxAttempts: 8}, true
		}
		return store.StaleRule{Policy: anyhook.Reclaim, MaxAttempts: 8}, true
	})
	if len(ds) != 2 {
		t.Fatalf("rescued = %+v, want both", ds)
	}
	again := claim(t, s, "billing", 10, time.Minute)
	if len(again) != 1 || again[0].Delivery.ID != res[0].Claims[0].Delivery.ID || again[0].Delivery.AttemptCount != 2 {
		t.Fatalf("reclaimed = %+v, want attempt 2 of the delivery claimed at ingest", again)
	}
	if lost := finish(t, s, delivered(res[0].Claims[0])); len(lost) != 1 {
		t.Fatal("the expired claim's outcome overwrote the reclaim")
	}
	if d := delivery(t, s, res[1].ID, "charges"); d.Status != anyhook.StatusHeld || len(d.Attempts) != 1 || d.Attempts[0].Error != store.LostError {
		t.Fatalf("hold = %+v, want held with the lost attempt recorded", d)
	}
}

// testClaimAtIngestFailedItem: when an item of a batch fails, the others
// keep their claims and the failed one has none (SQLite runs such a batch
// again item by item).
func testClaimAtIngestFailedItem(t *testing.T, s store.Store) {
	good1 := leased(newEvent("stripe", "evt_a", "billing"), time.Minute, "billing")
	bad := leased(newEvent("stripe", "evt_b", "billing"), time.Minute, "billing")
	good2 := leased(newEvent("stripe", "evt_c", "billing"), time.Minute, "billing")
	bad.Event.ID = good1.Event.ID
	res, err := s.Ingest(ctx(t), []store.NewEvent{good1, bad, good2})
	if err != nil {
		t.Fatal(err)
	}
	if res[1].Err == nil || len(res[1].Claims) != 0 || len(res[0].Claims) != 1 || len(res[2].Claims) != 1 {
		t.Fatalf("results = %+v", res)
	}
	for _, r := range []store.IngestResult{res[0], res[2]} {
		if d := delivery(t, s, r.ID, "billing"); d.ID != r.Claims[0].Delivery.ID || d.Status != anyhook.StatusDelivering {
			t.Fatalf("stored = %+v, want the claim %s delivering", d, r.Claims[0].Delivery.ID)
		}
	}
	if cs := claim(t, s, "billing", 10, time.Minute); len(cs) != 0 {
		t.Fatalf("claimed %+v after ingest claimed everything", cs)
	}
}

// testClaimAtIngestConcurrentDuplicates: one event arriving many times at
// once, each copy leased at ingest (several processes, each with a free
// slot), is recorded once with one delivery, claimed once: exactly one
// copy returns the claim, and it is the stored delivery.
func testClaimAtIngestConcurrentDuplicates(t *testing.T, s store.Store) {
	const n = 16
	res := ingestOneAtOnce(t, s, n, func(int) store.NewEvent {
		ne := leased(newEvent("stripe", "evt_same", "billing"), time.Minute, "billing")
		ne.ContentKey = "same-content"
		return ne
	})
	var claims []store.Claim
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("result = %+v", r)
		}
		if r.ID != res[0].ID {
			t.Fatalf("copies recorded as %s and %s", res[0].ID, r.ID)
		}
		claims = append(claims, r.Claims...)
	}
	if len(claims) != 1 {
		t.Fatalf("%d claims for one event: %+v", len(claims), claims)
	}
	ev := event(t, s, res[0].ID)
	if len(ev.Deliveries) != 1 || ev.Deliveries[0].ID != claims[0].Delivery.ID || ev.Deliveries[0].Status != anyhook.StatusDelivering || ev.Duplicates != n-1 {
		t.Fatalf("event = %+v; want one delivery, the claim %s, and %d duplicates", ev, claims[0].Delivery.ID, n-1)
	}
	if more := claim(t, s, "billing", 10, time.Minute); len(more) != 0 {
		t.Fatalf("claimed again: %+v", more)
	}
}

// testClaimAtIngestInvalidItem: an item that no store keeps (a NUL byte
// in the provider's event id) fails alone, invalid, with no claim, and
// its batch-mates — of objects, so that PostgreSQL reads their marks first
// — are recorded and claimed once, as their results say.
func testClaimAtIngestInvalidItem(t *testing.T, s store.Store) {
	good1 := leased(versioned("evt_g1", "order-1", "1", false), time.Minute, "d")
	bad := leased(versioned("evt_\x00bad", "order-2", "1", false), time.Minute, "d")
	good2 := leased(versioned("evt_g2", "order-3", "1", false), time.Minute, "d")
	res, err := s.Ingest(ctx(t), []store.NewEvent{good1, bad, good2})
	if err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[1].Err, anyhook.ErrInvalid) || len(res[1].Claims) != 0 {
		t.Fatalf("bad item = %+v, want invalid with no claim", res[1])
	}
	for _, r := range []store.IngestResult{res[0], res[2]} {
		if r.Err != nil || len(r.Claims) != 1 {
			t.Fatalf("result = %+v, want one claim", r)
		}
		if d := delivery(t, s, r.ID, "d"); d.ID != r.Claims[0].Delivery.ID || d.Status != anyhook.StatusDelivering {
			t.Fatalf("stored = %+v, want the claim %s delivering", d, r.Claims[0].Delivery.ID)
		}
		if ev := event(t, s, r.ID); len(ev.Deliveries) != 1 {
			t.Fatalf("event %s has %d deliveries, want 1", r.ID, len(ev.Deliveries))
		}
	}
	if cs := claim(t, s, "d", 10, time.Minute); len(cs) != 0 {
		t.Fatalf("claimed %+v after ingest claimed everything", cs)
	}
	if r := ingest(t, s, versioned("evt_g1b", "order-1", "0", false))[0]; !r.Stale {
		t.Fatalf("order-1 v0 = %+v; want stale behind the mark the batch set", r)
	}
}
