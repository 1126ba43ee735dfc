package bench

import (
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
	c := store.Claim{Delivery: anyhook.Delivery{ID: "d", AttemptCount: 1}}
	for k := range 100 {
		out := outcome(c, k, time.Hour)
		if out.Result.Outcome != anyhook.OutcomeAnswered {
			t.Fatalf("batch row %d (%s, HTTP %d): outcome %q, want %q", k, out.Status, out.Result.StatusCode, out.Result.Outcome, anyhook.OutcomeAnswered)
		}
	}
}
