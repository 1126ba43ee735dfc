package storetest

import (
	"time"

	"testing"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// backfilled is ne as a backfill records it: read from the provider's API.
func backfilled(ne store.NewEvent) store.NewEvent {
	ne.Event.Origin = anyhook.OriginBackfill
	ne.Event.Verification = anyhook.Verification{Method: anyhook.VerifyFetched, Scheme: "fetched from the provider API", Secret: -1}
	ne.Event.Header = nil
	return ne
}

// testBackfillOrigin: an event's origin is kept and read back everywhere
// (event, lists, claims); a backfilled copy of a recorded event is a
// duplicate that changes nothing (not even the duplicate counter: the
// provider did not send it again); the stale rules apply to a backfilled
// event as to a received one, and it never lowers a version mark.
func testBackfillOrigin(t *testing.T, s store.Store) {
	webhook := ingest(t, s, newEvent("stripe", "evt_1", "billing"))[0]
	if ev := event(t, s, webhook.ID); ev.Origin != anyhook.OriginWebhook {
		t.Fatalf("received event's origin = %q, want webhook", ev.Origin)
	}
	again := ingest(t, s, backfilled(newEvent("stripe", "evt_1", "billing")))[0]
	if !again.Duplicate || again.ID != webhook.ID {
		t.Fatalf("backfilled copy of a recorded event = %+v, want a duplicate of %s", again, webhook.ID)
	}
	if ev := event(t, s, webhook.ID); ev.Duplicates != 0 || len(ev.Arrivals) != 0 || ev.Origin != anyhook.OriginWebhook || len(ev.Deliveries) != 1 {
		t.Fatalf("after a backfilled copy: duplicates %d, arrivals %d, origin %q, deliveries %d; want it untouched",
			ev.Duplicates, len(ev.Arrivals), ev.Origin, len(ev.Deliveries))
	}

	fresh := ingest(t, s, backfilled(newEvent("stripe", "evt_2", "billing")))[0]
	if fresh.Duplicate {
		t.Fatalf("a missed event was a duplicate: %+v", fresh)
	}
	ev := event(t, s, fresh.ID)
	if ev.Origin != anyhook.OriginBackfill || ev.Verification.Method != anyhook.VerifyFetched || ev.Verification.Secret != -1 {
		t.Fatalf("backfilled event: origin %q, verification %+v", ev.Origin, ev.Verification)
	}
	if len(ev.Deliveries) != 1 || ev.Deliveries[0].Status != anyhook.StatusPending || ev.Deliveries[0].Replay {
		t.Fatalf("backfilled event's deliveries = %+v, want one pending, not a replay", ev.Deliveries)
	}
	evs, _, err := s.ListEvents(ctx(t), store.EventFilter{Source: "stripe"})
	if err != nil {
		t.Fatal(err)
	}
	origins := map[string]string{}
	for _, e := range evs {
		origins[e.ID] = e.Origin
	}
	if origins[webhook.ID] != anyhook.OriginWebhook || origins[fresh.ID] != anyhook.OriginBackfill {
		t.Fatalf("listed origins = %v", origins)
	}
	var seen bool
	for _, c := range claim(t, s, "billing", 10, time.Minute) {
		if c.Event.ID == fresh.ID {
			seen = c.Event.Origin == anyhook.OriginBackfill
		}
	}
	if !seen {
		t.Fatalf("the claim of the backfilled event does not carry its origin")
	}
	// A backfilled copy again: still the one event.
	if r := ingest(t, s, backfilled(newEvent("stripe", "evt_2", "billing")))[0]; !r.Duplicate || r.ID != fresh.ID {
		t.Fatalf("second backfill = %+v, want a duplicate of %s", r, fresh.ID)
	}

	// Stale rules as at ingest: a backfilled older version is stale, and
	// the mark stays where the newer event put it.
	ingest(t, s, versioned("v5", "order-1", "5", true))
	old := ingest(t, s, backfilled(versioned("v3", "order-1", "3", true)))[0]
	if !old.Stale || event(t, s, old.ID).Deliveries[0].Status != anyhook.StatusSkipped {
		t.Fatalf("backfilled older version: %+v, want stale and skipped", old)
	}
	if r := ingest(t, s, versioned("v4", "order-1", "4", true))[0]; !r.Stale {
		t.Fatalf("the backfill lowered the version mark: v4 after v5 and a backfilled v3 is not stale")
	}
}
