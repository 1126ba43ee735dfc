package testclock

import (
	"sync"
	"testing"
	"time"
)

// TestClockMovesOnlyByAdd: Now reads the same until Add, and concurrent
// Adds all count.
func TestClockMovesOnlyByAdd(t *testing.T) {
	at := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	c := New(at)
	if first, again := c.Now(), c.Now(); !first.Equal(at) || !again.Equal(at) {
		t.Fatalf("Now = %s then %s, want %s until moved", first, again, at)
	}
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { c.Add(time.Second); c.Now() })
	}
	wg.Wait()
	if want := at.Add(10 * time.Second); !c.Now().Equal(want) {
		t.Fatalf("after 10 concurrent Adds of 1 s: %s, want %s", c.Now(), want)
	}
}
