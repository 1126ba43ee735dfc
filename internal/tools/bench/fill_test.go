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
		out := outcome(c, k, time.Hour)
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
