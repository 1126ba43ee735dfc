package delivery_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/postgres"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

func pullDest(policy anyhook.StalePolicy) delivery.Destination {
	return delivery.Destination{Name: "dest", Pull: true, Timeout: time.Minute, MaxAttempts: 3, Initial: time.Hour, Max: time.Hour,
		StalePolicy: policy, MaxInFlight: 10}
}

func pullEngine(t *testing.T, st store.Store, d delivery.Destination, poll time.Duration) *delivery.Engine {
	t.Helper()
	e := delivery.New(st, delivery.Options{PollInterval: poll, Destinations: []delivery.Destination{d}})
	e.Start(t.Context())
	t.Cleanup(func() { e.Stop(time.Second) })
	return e
}

func ref(l delivery.Leased) delivery.LeaseRef {
	return delivery.LeaseRef{EventID: l.Event.ID, DeliveryID: l.Delivery.ID, Attempt: l.Delivery.AttemptCount}
}

// A pull destination's deliveries wait until leased; an ack delivers, a
// nack retries later or kills, and an ack of a lease already settled is
// refused.
func TestPullLeaseAckNack(t *testing.T) {
	st := openSQLite(t)
	e := pullEngine(t, st, pullDest(anyhook.Reclaim), time.Hour)
	evs := newEvents(3, "dest")
	ingestAll(t, st, evs)
	e.Wake()

	ls, err := e.LeasePull(t.Context(), "dest", 10, 0, time.Minute)
	if err != nil || len(ls) != 3 {
		t.Fatalf("leased %d, %v; want 3", len(ls), err)
	}
	for _, l := range ls {
		if l.Header.Get("X-AnyHook-Delivery") != l.Event.ID || l.Header.Get("X-AnyHook-Attempt") != "1" {
			t.Fatalf("lease headers %v", l.Header)
		}
		if until := time.Until(l.Until); until <= 0 || until > time.Minute {
			t.Fatalf("lease until %v from now", until)
		}
	}
	if more, err := e.LeasePull(t.Context(), "dest", 10, 0, time.Minute); err != nil || len(more) != 0 {
		t.Fatalf("a second lease got %d deliveries already leased (%v)", len(more), err)
	}
	if err := e.Ack(t.Context(), "dest", ref(ls[0]), "alice"); err != nil {
		t.Fatal(err)
	}
	if err := e.Ack(t.Context(), "dest", ref(ls[0]), "alice"); !errors.Is(err, delivery.ErrLeaseEnded) {
		t.Fatalf("a second ack: %v, want ErrLeaseEnded", err)
	}
	if err := e.Nack(t.Context(), "dest", ref(ls[1]), time.Hour, false, "busy", "alice"); err != nil {
		t.Fatal(err)
	}
	if err := e.Nack(t.Context(), "dest", ref(ls[2]), 0, true, "malformed", "alice"); err != nil {
		t.Fatal(err)
	}
	got := statuses(t, st, evs)
	if got[anyhook.StatusDelivered] != 1 || got[anyhook.StatusRetrying] != 1 || got[anyhook.StatusDead] != 1 {
		t.Fatalf("statuses %v, want one each of delivered, retrying, dead", got)
	}
	ev, err := st.Event(t.Context(), ls[2].Event.ID)
	if err != nil {
		t.Fatal(err)
	}
	if a := ev.Deliveries[0].Attempts; len(a) != 1 || a[0].Error != "refused by pull consumer alice: malformed" {
		t.Fatalf("the dead delivery's attempts: %+v", a)
	}
	// Another destination's delivery, or a push destination, is not
	// this one's.
	if _, err := e.LeasePull(t.Context(), "other", 1, 0, time.Minute); !errors.Is(err, delivery.ErrNotPull) {
		t.Fatalf("lease of an unknown destination: %v", err)
	}
	if _, err := e.LeasePull(t.Context(), "dest", delivery.MaxPullBatch+1, 0, time.Minute); !errors.Is(err, anyhook.ErrInvalid) {
		t.Fatalf("a lease past the bounds: %v", err)
	}
}

// A lease waiting with wait > 0 returns as soon as a delivery is
// recorded, not at the end of its wait nor at the next poll.
func TestPullLeaseWaitsForNewDelivery(t *testing.T) {
	st := openSQLite(t)
	e := pullEngine(t, st, pullDest(anyhook.Reclaim), time.Hour)
	got := make(chan []delivery.Leased, 1)
	go func() {
		ls, err := e.LeasePull(t.Context(), "dest", 5, delivery.MaxPullWait, time.Minute)
		if err != nil {
			t.Error(err)
		}
		got <- ls
	}()
	evs := newEvents(1, "dest")
	ingestAll(t, st, evs)
	e.Wake() // what ingest does for a delivery it did not claim
	select {
	case ls := <-got:
		if len(ls) != 1 || ls[0].Event.ID != evs[0].Event.ID {
			t.Fatalf("leased %+v", ls)
		}
	case <-time.After(delivery.MaxPullWait / 2):
		t.Fatal("the waiting lease was not woken by the new delivery")
	}
}

// A lease that runs out is the stale-claim rule: reclaim makes the
// delivery due again as the next attempt, and the first consumer's late
// ack is refused; hold holds it for a person.
func TestPullLeaseRunsOut(t *testing.T) {
	for _, policy := range []anyhook.StalePolicy{anyhook.Reclaim, anyhook.Hold} {
		t.Run(string(policy), func(t *testing.T) {
			st := openSQLite(t)
			d := pullDest(policy)
			d.Initial, d.Max = time.Millisecond, time.Millisecond
			e := pullEngine(t, st, d, 20*time.Millisecond) // the rescuer's tick too
			evs := newEvents(1, "dest")
			ingestAll(t, st, evs)
			ls, err := e.LeasePull(t.Context(), "dest", 1, 0, delivery.MinPullLease)
			if err != nil || len(ls) != 1 {
				t.Fatalf("leased %d, %v", len(ls), err)
			}
			switch policy {
			case anyhook.Reclaim:
				var again []delivery.Leased
				testwait.For(t, "the delivery to be leased again after the lease ran out", func() bool {
					again, err = e.LeasePull(t.Context(), "dest", 1, 0, time.Minute)
					return err == nil && len(again) == 1
				})
				if n := again[0].Delivery.AttemptCount; n != 2 {
					t.Fatalf("leased again as attempt %d, want 2", n)
				}
				if err := e.Ack(t.Context(), "dest", ref(ls[0]), "late"); !errors.Is(err, delivery.ErrLeaseEnded) {
					t.Fatalf("the late ack of attempt 1: %v, want ErrLeaseEnded", err)
				}
				if _, err := e.Extend(t.Context(), "dest", ref(ls[0]), time.Minute); !errors.Is(err, delivery.ErrLeaseEnded) {
					t.Fatalf("the late extend of attempt 1: %v, want ErrLeaseEnded", err)
				}
				if err := e.Ack(t.Context(), "dest", ref(again[0]), "second"); err != nil {
					t.Fatal(err)
				}
			case anyhook.Hold:
				testwait.For(t, "the delivery to be held", func() bool {
					return statuses(t, st, evs)[anyhook.StatusHeld] == 1
				})
				if err := e.Ack(t.Context(), "dest", ref(ls[0]), "late"); !errors.Is(err, delivery.ErrLeaseEnded) {
					t.Fatalf("the late ack of a held delivery: %v, want ErrLeaseEnded", err)
				}
			}
		})
	}
}

// An extend keeps a lease past its first end: the rescuer leaves it.
func TestPullExtend(t *testing.T) {
	st := openSQLite(t)
	e := pullEngine(t, st, pullDest(anyhook.Reclaim), 20*time.Millisecond)
	ingestAll(t, st, newEvents(1, "dest"))
	ls, err := e.LeasePull(t.Context(), "dest", 1, 0, 2*delivery.MinPullLease)
	if err != nil || len(ls) != 1 {
		t.Fatalf("leased %d, %v", len(ls), err)
	}
	until, err := e.Extend(t.Context(), "dest", ref(ls[0]), time.Minute)
	if err != nil || time.Until(until) < 30*time.Second {
		t.Fatalf("extend: until %v, %v", until, err)
	}
	time.Sleep(3 * delivery.MinPullLease) // past the first lease's end
	if err := e.Ack(t.Context(), "dest", ref(ls[0]), "alice"); err != nil {
		t.Fatalf("ack within the extended lease: %v", err)
	}
}

// Consumers leasing one destination at once, in one process or two
// (PostgreSQL), never hold one delivery at the same time, and every
// delivery is acked once.
func TestPullConcurrentConsumers(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		st := openSQLite(t)
		e := pullEngine(t, st, pullDest(anyhook.Reclaim), 10*time.Millisecond)
		concurrentConsumers(t, st, e, e)
	})
	t.Run("postgres", func(t *testing.T) {
		dsn := pgtest.DSN(t)
		open := func() store.Store {
			s, err := postgres.Open(t.Context(), dsn, postgres.Options{MaxConns: 4})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}
		st := open()
		a := pullEngine(t, st, pullDest(anyhook.Reclaim), 10*time.Millisecond)
		b := pullEngine(t, open(), pullDest(anyhook.Reclaim), 10*time.Millisecond)
		concurrentConsumers(t, st, a, b)
	})
}

func concurrentConsumers(t *testing.T, st store.Store, a, b *delivery.Engine) {
	const n, consumers = 60, 4
	evs := newEvents(n, "dest")
	ingestAll(t, st, evs)
	a.Wake()
	var mu sync.Mutex
	held := map[string]bool{}
	acked := map[string]int{}
	var wg sync.WaitGroup
	for i := range consumers {
		e := a
		if i%2 == 1 {
			e = b
		}
		wg.Go(func() {
			for {
				mu.Lock()
				done := len(acked) == n
				mu.Unlock()
				if done {
					return
				}
				ls, err := e.LeasePull(t.Context(), "dest", 3, 50*time.Millisecond, time.Minute)
				if err != nil {
					t.Error(err)
					return
				}
				for _, l := range ls {
					mu.Lock()
					if held[l.Delivery.ID] {
						t.Errorf("delivery %s leased to two consumers at once", l.Delivery.ID)
					}
					held[l.Delivery.ID] = true
					mu.Unlock()
				}
				for _, l := range ls {
					err := e.Ack(t.Context(), "dest", ref(l), "c")
					mu.Lock()
					delete(held, l.Delivery.ID) // after the ack: nobody can lease it before
					if err == nil {
						acked[l.Delivery.ID]++
					}
					mu.Unlock()
					if err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	for id, k := range acked {
		if k != 1 {
			t.Errorf("delivery %s acked %d times", id, k)
		}
	}
	if got := statuses(t, st, evs)[anyhook.StatusDelivered]; got != n {
		t.Fatalf("%d of %d delivered", got, n)
	}
}

// A pull destination with max_age: what no consumer settled within it
// goes dead (and is told as dead: the alerts), what was settled stays.
func TestPullMaxAge(t *testing.T) {
	st := openSQLite(t)
	d := pullDest(anyhook.Reclaim)
	d.MaxAge = time.Millisecond
	dead := make(chan anyhook.Delivery, 10)
	e := delivery.New(st, delivery.Options{PollInterval: 5 * time.Millisecond, Destinations: []delivery.Destination{d},
		OnDead: func(dl anyhook.Delivery) { dead <- dl }})
	evs := newEvents(3, "dest")
	ingestAll(t, st, evs)
	ls, err := e.LeasePull(t.Context(), "dest", 1, 0, time.Minute)
	if err != nil || len(ls) != 1 {
		t.Fatalf("leased %d, %v", len(ls), err)
	}
	e.Start(t.Context())
	t.Cleanup(func() { e.Stop(time.Second) })
	for range 2 {
		select {
		case dl := <-dead:
			if dl.Destination != "dest" || dl.Status != anyhook.StatusDead {
				t.Fatalf("told of %+v", dl)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("the two unleased deliveries were not expired")
		}
	}
	got := statuses(t, st, evs)
	if got[anyhook.StatusDead] != 2 || got[anyhook.StatusDelivering] != 1 {
		t.Fatalf("statuses %v, want 2 dead and the leased one still delivering", got)
	}
}

// idleClaims counts every claim, found something or not.
type idleClaims struct {
	store.Store
	n atomic.Int64
}

func (c *idleClaims) Claim(ctx context.Context, dest string, limit int, lease time.Duration) ([]store.Claim, error) {
	c.n.Add(1)
	return c.Store.Claim(ctx, dest, limit, lease)
}

// Many consumers waiting on an idle destination cost the store about
// one claim a poll between them, not one each: a developer's token
// cannot load the one SQLite writer by holding many long polls open.
func TestPullIdleWaitersShareTheirPolls(t *testing.T) {
	st := &idleClaims{Store: openSQLite(t)}
	const waiters, poll = 30, 100 * time.Millisecond
	e := pullEngine(t, st, pullDest(anyhook.Reclaim), poll)
	start := time.Now()
	var wg sync.WaitGroup
	for range waiters {
		wg.Go(func() {
			if ls, err := e.LeasePull(t.Context(), "dest", 1, 2*time.Second, time.Minute); err != nil || len(ls) != 0 {
				t.Errorf("leased %d, %v from an idle destination", len(ls), err)
			}
		})
	}
	wg.Wait()
	polls := int64(time.Since(start) / poll)
	// Each claims once as it starts; then, unshared, each would claim at
	// every poll: waiters × polls. Shared, a few a poll.
	t.Logf("%d claims by %d waiters over %d polls", st.n.Load(), waiters, polls)
	if n := st.n.Load(); n > waiters+polls*waiters/3 {
		t.Fatalf("%d claims by %d waiters over %d polls: they do not share their polls (unshared: about %d)", n, waiters, polls, waiters*(polls+1))
	}
}
