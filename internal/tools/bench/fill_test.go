package bench

import (
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// The fill's attempts were all answered by a destination (a 200, a 500
// or a 503), so each must say so: stored with the outcome "unknown", the
// event page said of every delivery of a filled store, delivered ones
// too, "the handler may have run (outcome unknown: lost in a crash, or
// recorded before outcomes were kept)".
func TestFillOutcomesAnswered(t *testing.T) {
	received := time.Now().Add(-20 * 24 * time.Hour)
	c := store.Claim{Delivery: anyhook.Delivery{ID: "d", AttemptCount: 1}, Event: anyhook.Event{ReceivedAt: received}}
	for k := range 100 {
		out := outcome(c, k, time.Hour, false)
		if out.Result.Outcome != anyhook.OutcomeAnswered {
			t.Fatalf("batch row %d (%s, HTTP %d): outcome %q, want %q", k, out.Status, out.Result.StatusCode, out.Result.Outcome, anyhook.OutcomeAnswered)
		}
		// In the fill's days, not at the fill's own time: else the
		// overview's last hour counted every failed attempt of 30 days.
		if !out.Result.StartedAt.Equal(received.Add(time.Second)) {
			t.Fatalf("batch row %d: attempt started at %v, want a second after its event (%v)", k, out.Result.StartedAt, received)
		}
	}
}

// On SQLite a batch's deliveries (and its replays) are created at the
// time of the batch's last event, up to hours after an early event of
// the batch: an attempt must not start before its delivery was made (a
// replay's page showed it tried hours before the replay). On PostgreSQL
// (spread false) the delivery carries the fill's own time and the attempt
// stays a second after its event.
func TestFillAttemptNotBeforeDelivery(t *testing.T) {
	received := time.Now().Add(-20 * 24 * time.Hour)
	created := received.Add(3 * time.Hour)
	c := store.Claim{Delivery: anyhook.Delivery{ID: "d", AttemptCount: 1, CreatedAt: created}, Event: anyhook.Event{ReceivedAt: received}}
	if got := outcome(c, 0, time.Hour, true).Result.StartedAt; !got.Equal(created) {
		t.Errorf("spread store: attempt started at %v, want at its delivery's creation %v", got, created)
	}
	c.Delivery.CreatedAt = received
	if got := outcome(c, 0, time.Hour, true).Result.StartedAt; !got.Equal(received.Add(time.Second)) {
		t.Errorf("spread store, delivery made with its event: attempt at %v, want a second after the event", got)
	}
	c.Delivery.CreatedAt = time.Now()
	if got := outcome(c, 0, time.Hour, false).Result.StartedAt; !got.Equal(received.Add(time.Second)) {
		t.Errorf("postgres: attempt at %v, want a second after the event, not the fill's time", got)
	}
}

// `anyhook bench --fill --help` shows the fill's help: parsed as a flag
// set, --help was taken for --fill's value.
func TestFillHelp(t *testing.T) {
	for _, args := range [][]string{{"--fill", "--help"}, {"--fill", "-h"}, {"--fill", "0", "--help"}} {
		var out, errOut strings.Builder
		if code := fillMain(t.Context(), args, &out, &errOut); code != 0 || !strings.Contains(out.String(), "usage: anyhook bench --fill N") {
			t.Errorf("%q: exit %d, stdout %.60q, stderr %q", args, code, out.String(), errOut.String())
		}
	}
}

// A filled event says how it was verified, as the gateway records a
// signature: none source's request: without it the event page of a
// filled store said "not recorded (received before AnyHook recorded how)".
func TestFillEventVerification(t *testing.T) {
	ev := fillEvent("r", 1, time.Now(), "x").Event
	if ev.Verification.Method != anyhook.VerifyNone || ev.Verification.Secret != -1 {
		t.Errorf("verification %+v, want method %q, secret -1", ev.Verification, anyhook.VerifyNone)
	}
}
