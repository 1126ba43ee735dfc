package bench

import (
	"strings"
	"sync/atomic"
	"testing"
)

// A closed loop that was refused some requests waits for the events it
// was answered 200 for at every destination, and not for the others,
// which can never arrive.
func TestWaitTaken(t *testing.T) {
	sr := (&sink{dests: 2}).expect("p", 3)
	taken := make([]atomic.Bool, 3)
	taken[0].Store(true)
	taken[2].Store(true) // event 1 was refused
	sr.arrived[0][0].Store(1)
	sr.arrived[1][0].Store(1)
	sr.arrived[0][2].Store(1)
	if err := waitTaken(t.Context(), sr, taken, 0); err == nil || !strings.HasPrefix(err.Error(), "1 deliveries") {
		t.Fatalf("event 2 missing at one destination: %v, want 1 delivery missing", err)
	}
	sr.arrived[1][2].Store(1)
	if err := waitTaken(t.Context(), sr, taken, 0); err != nil {
		t.Fatalf("every accepted event arrived: %v", err)
	}
}
