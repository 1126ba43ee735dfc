package delivery

import (
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/store"
)

// Ingest claims only while the dispatcher runs and has found its queue
// empty; a wake (older deliveries waiting) or an ingest that found too few
// free slots (its leftovers wait pending) stops it until the dispatcher
// has claimed them; the limits hold across both takers.
func TestSlotsIngestTakesOnlyWhenDrained(t *testing.T) {
	s := newSlots(4)
	if n := s.reserve(2); n != 0 {
		t.Fatalf("reserved %d before the dispatcher ran", n)
	}
	var sent int
	s.open(func(cs []store.Claim, _ time.Time) { sent += len(cs) })
	if n := s.reserve(2); n != 0 {
		t.Fatalf("reserved %d before the dispatcher found its queue empty", n)
	}
	s.drainedAt(s.mark()) // the dispatcher's claim found its queue empty
	if n := s.reserve(3); n != 3 {
		t.Fatalf("reserved %d of 3 with 4 free", n)
	}
	if n := s.take(3); n != 1 {
		t.Fatalf("dispatcher took %d with 1 free", n)
	}
	s.giveBack(1, false)
	s.undrain() // a wake: older deliveries wait
	if n := s.reserve(1); n != 0 {
		t.Fatalf("reserved %d while older deliveries waited", n)
	}
	// A claim that began before a wake does not drain the queue: it may
	// not have seen what the wake was for.
	m := s.mark()
	s.undrain()
	s.drainedAt(m)
	if n := s.reserve(1); n != 0 {
		t.Fatalf("reserved %d after a claim that began before the last wake", n)
	}
	s.drainedAt(s.mark())
	if n := s.reserve(2); n != 1 {
		t.Fatalf("reserved %d of 2 with 1 free", n)
	}
	// The one left over waits pending: the queue is no longer drained.
	s.giveBack(1, true)
	if n := s.reserve(1); n != 0 {
		t.Fatalf("reserved %d while a delivery left over by the last ingest waited", n)
	}
	s.hand(make([]store.Claim, 2), time.Time{})
	s.giveBack(1, true)
	s.close() // returns: every reservation was handed or given back
	inFlight, free, _ := s.state()
	if sent != 2 || inFlight != 2 || free != 2 {
		t.Fatalf("sent %d, in flight %d, free %d; want 2, 2, 2", sent, inFlight, free)
	}
}

// After claims were released for lack of lease the dispatcher holds off
// claiming, for a hold that doubles at each release up to the lease; a
// claim sent starts it over.
func TestSlotsHoldAfterRelease(t *testing.T) {
	s := newSlots(1)
	if w := s.held(); w > 0 {
		t.Fatalf("held %v before any release", w)
	}
	const lease = time.Second
	for _, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, lease, lease} {
		s.released(lease)
		if w := s.held(); s.backoff != want || w <= 0 || w > want {
			t.Fatalf("hold %v, %v left; want %v", s.backoff, w, want)
		}
	}
	s.sending()
	if s.released(lease); s.backoff != firstHold {
		t.Fatalf("hold after a sent claim %v, want %v", s.backoff, firstHold)
	}
}
