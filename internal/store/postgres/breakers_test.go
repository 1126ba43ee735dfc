package postgres_test

import (
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
)

// TestTwoProcessesBreaker: a breaker tripped through one store is tripped
// for another on the same database (its claims stop, its probes see it),
// and of probes racing from both for one turn exactly one claims; a reset
// through the second frees the first.
func TestTwoProcessesBreaker(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	a, b := openDSN(t, dsn), openDSN(t, dsn)
	var batch []store.NewEvent
	for _, k := range []string{"evt_1", "evt_2", "evt_3"} {
		batch = append(batch, newEvent("stripe", k, "billing"))
	}
	if _, err := a.Ingest(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC()
	if ok, err := a.TripBreaker(t.Context(), "billing", at, "20 consecutive failed attempts", at); err != nil || !ok {
		t.Fatalf("TripBreaker = %v, %v", ok, err)
	}
	if ok, err := b.TripBreaker(t.Context(), "billing", at, "again", at); err != nil || ok {
		t.Fatalf("second process's TripBreaker = %v, %v, want false (tripped already)", ok, err)
	}
	if cs, err := b.Claim(t.Context(), "billing", 10, time.Minute); err != nil || len(cs) != 0 {
		t.Fatalf("the other process claimed %d (%v) from a tripped destination", len(cs), err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	claimed := 0
	for i := range 8 {
		s := []store.Store{a, b}[i%2]
		wg.Go(func() {
			cs, tripped, err := s.ClaimProbe(t.Context(), "billing", false, at, 30*time.Second, time.Minute)
			if err != nil || !tripped {
				t.Errorf("ClaimProbe = %v, tripped %v", err, tripped)
			}
			mu.Lock()
			claimed += len(cs)
			mu.Unlock()
		})
	}
	wg.Wait()
	if claimed != 1 {
		t.Fatalf("%d probes claimed in one turn across two processes, want 1", claimed)
	}
	if ok, err := b.ResetBreaker(t.Context(), "billing"); err != nil || !ok {
		t.Fatalf("ResetBreaker = %v, %v", ok, err)
	}
	if cs, err := a.Claim(t.Context(), "billing", 10, time.Minute); err != nil || len(cs) != 2 {
		t.Fatalf("after the reset the first process claimed %d (%v), want the 2 left", len(cs), err)
	}
}
