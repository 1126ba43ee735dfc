package delivery_test

import (
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/store/postgres"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
)

// A live lease survives a step of the wall clock: on SQLite its end is on
// the store's lease clock (wall at Open + monotonic), which a step (NTP,
// a laptop resumed) does not move, and the engine compares it with no
// other clock, so an ack after a step past the lease is still recorded.
func TestPullAckAfterWallClockStep(t *testing.T) {
	var step atomic.Int64 // how far the wall clock was stepped forward
	wall := func() time.Time { return time.Now().Add(time.Duration(step.Load())) }
	start := time.Now()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlite.Options{
		Now: wall, Elapsed: func() time.Duration { return time.Since(start) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := delivery.New(st, delivery.Options{PollInterval: 20 * time.Millisecond, Now: wall,
		Destinations: []delivery.Destination{pullDest(anyhook.Reclaim)}})
	e.Start(t.Context())
	t.Cleanup(func() { e.Stop(time.Second) })

	step.Store(int64(time.Hour)) // the wall clock steps forward, after Open
	ingestAll(t, st, newEvents(1, "dest"))
	ls, err := e.LeasePull(t.Context(), "dest", 1, 0, time.Minute)
	if err != nil || len(ls) != 1 {
		t.Fatalf("leased %d, %v", len(ls), err)
	}
	if err := e.Ack(t.Context(), "dest", ref(ls[0]), "alice"); err != nil {
		t.Fatalf("ack of a lease taken a moment ago, with 1m to run: %v", err)
	}
}

// order per_object with pull leases an
// object's next delivery only after the previous one is settled, and a
// lease that runs out (hold) keeps the object's next one back.
func TestPullInOrder(t *testing.T) {
	st := openSQLite(t)
	d := pullDest(anyhook.Reclaim)
	d.InOrder = true
	e := pullEngine(t, st, d, 20*time.Millisecond)
	evs := newEvents(3, "dest")
	for i := range evs {
		evs[i].Event.Object, evs[i].Event.Version = "obj", fmt.Sprintf("%03d", i)
	}
	ingestAll(t, st, evs)
	for i := range evs {
		ls, err := e.LeasePull(t.Context(), "dest", 10, 0, time.Minute)
		if err != nil || len(ls) != 1 || ls[0].Event.ID != evs[i].Event.ID {
			t.Fatalf("lease %d: %d leased (%v), want only event %d", i, len(ls), err, i)
		}
		if more, _ := e.LeasePull(t.Context(), "dest", 10, 0, time.Minute); len(more) != 0 {
			t.Fatalf("leased the object's next delivery before %d was settled", i)
		}
		if err := e.Ack(t.Context(), "dest", ref(ls[0]), "a"); err != nil {
			t.Fatal(err)
		}
	}
}

// On PostgreSQL a lease ends on the database's clock (now()): a gateway
// host whose clock runs ahead of the database's by more than the lease
// still has its acks recorded.
func TestPullAckGatewayClockAheadOfPostgres(t *testing.T) {
	st, err := postgres.Open(t.Context(), pgtest.DSN(t), postgres.Options{MaxConns: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ahead := func() time.Time { return time.Now().Add(45 * time.Second) }
	e := delivery.New(st, delivery.Options{PollInterval: 20 * time.Millisecond, Now: ahead,
		Destinations: []delivery.Destination{pullDest(anyhook.Reclaim)}})
	e.Start(t.Context())
	t.Cleanup(func() { e.Stop(time.Second) })
	ingestAll(t, st, newEvents(1, "dest"))
	ls, err := e.LeasePull(t.Context(), "dest", 1, 0, 30*time.Second)
	if err != nil || len(ls) != 1 {
		t.Fatalf("leased %d, %v", len(ls), err)
	}
	if err := e.Ack(t.Context(), "dest", ref(ls[0]), "alice"); err != nil {
		t.Fatalf("ack of a lease taken a moment ago, with 30s to run: %v", err)
	}
}
