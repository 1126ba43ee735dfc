package sqlite_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/testkit/testclock"
)

// openClocked opens the store at path on clock's wall and monotonic
// clocks; it is closed when the test ends.
func openClocked(t *testing.T, path string, clock *testclock.Clock) *sqlite.Store {
	s, err := sqlite.Open(t.Context(), path, sqlite.Options{Now: clock.Now, Elapsed: clock.Elapsed})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// claimOne ingests an event for d and claims it with lease.
func claimOne(t *testing.T, s *sqlite.Store, clock *testclock.Clock, lease time.Duration) store.Claim {
	t.Helper()
	id := store.NewID()
	ne := store.NewEvent{Event: anyhook.Event{ID: id, Source: "s", DedupKey: id, ReceivedAt: clock.Now(), Body: []byte(`{}`)}, Destinations: []string{"d"}}
	if res, err := s.Ingest(t.Context(), []store.NewEvent{ne}); err != nil || res[0].Err != nil {
		t.Fatalf("Ingest: %v %v", err, res)
	}
	cs, err := s.Claim(t.Context(), "d", 1, lease)
	if err != nil || len(cs) != 1 {
		t.Fatalf("Claim = %d claims, %v", len(cs), err)
	}
	return cs[0]
}

// rescued is how many claims a rescue (reclaim) handled.
func rescued(t *testing.T, s *sqlite.Store) int {
	t.Helper()
	ds, err := s.Rescue(t.Context(), func(string) (store.StaleRule, bool) {
		return store.StaleRule{Policy: anyhook.Reclaim, MaxAttempts: 10}, true
	})
	if err != nil {
		t.Fatal(err)
	}
	return len(ds)
}

// A step of the wall clock moves no lease: a live claim is not rescued
// when the wall clock jumps past its end, and an ended one is rescued
// when the wall clock was stepped back before it ended.
func TestLeasesIgnoreWallClockSteps(t *testing.T) {
	t.Parallel()
	clock := testclock.New(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
	s := openClocked(t, filepath.Join(t.TempDir(), "anyhook.db"), clock)
	claimOne(t, s, clock, time.Minute)
	clock.Add(30 * time.Second)
	clock.Step(time.Hour)
	if n := rescued(t, s); n != 0 {
		t.Fatalf("rescued %d claims 30 s into a one-minute lease, after a step of the wall clock", n)
	}
	clock.Step(-3 * time.Hour)
	clock.Add(time.Minute)
	if n := rescued(t, s); n != 1 {
		t.Fatalf("rescued %d claims after their lease ended, with the wall clock stepped back; want 1", n)
	}
}

// A claim an earlier run left, whose lease clock ran ahead (the wall
// clock was stepped back during or after it), has its lease restarted
// from the next Open, keeping its length: it is rescued once that length
// has passed, not an hour later.
func TestLeaseLeftByEarlierRunRestarted(t *testing.T) {
	t.Parallel()
	clock := testclock.New(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "anyhook.db")
	s := openClocked(t, path, clock)
	claimOne(t, s, clock, time.Minute)
	s.Close()
	clock.Step(-time.Hour)
	s = openClocked(t, path, clock)
	clock.Add(30 * time.Second)
	if n := rescued(t, s); n != 0 {
		t.Fatalf("rescued %d claims 30 s into their restarted lease", n)
	}
	clock.Add(time.Minute)
	if n := rescued(t, s); n != 1 {
		t.Fatalf("rescued %d claims a lease's length after the restart; want 1", n)
	}
}
