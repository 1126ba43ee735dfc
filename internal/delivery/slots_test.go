package delivery

import (
	"testing"

	"github.com/anyhook/anyhook/internal/store"
)

// Ingest claims only while the dispatcher runs and has found its queue
// empty; a wake (more deliveries waiting) stops it until the dispatcher
// has claimed them; the limits hold across both takers.
func TestSlotsIngestTakesOnlyWhenDrained(t *testing.T) {
	s := newSlots(4)
	if n := s.take(2, true); n != 0 {
		t.Fatalf("took %d before the dispatcher ran", n)
	}
	var sent int
	s.open(func(cs []store.Claim) { sent += len(cs) })
	if n := s.take(2, true); n != 0 {
		t.Fatalf("took %d before the dispatcher found its queue empty", n)
	}
	s.setDrained(true)
	if n := s.take(3, true); n != 3 {
		t.Fatalf("took %d of 3 with 4 free", n)
	}
	if n := s.take(3, false); n != 1 {
		t.Fatalf("dispatcher took %d with 1 free", n)
	}
	s.giveBack(1, false)
	s.setDrained(false) // a wake: older deliveries wait
	if n := s.take(1, true); n != 0 {
		t.Fatalf("ingest took %d while older deliveries waited", n)
	}
	if n := s.take(1, false); n != 1 {
		t.Fatalf("dispatcher took %d with 1 free", n)
	}
	s.hand(make([]store.Claim, 2))
	s.giveBack(1, true)
	s.close() // returns: every reservation was handed or given back
	inFlight, free, _ := s.state()
	if sent != 2 || inFlight != 3 || free != 1 {
		t.Fatalf("sent %d, in flight %d, free %d; want 2, 3, 1", sent, inFlight, free)
	}
}
