package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook/inbox"
)

// subEvent is a subscription status change as a provider sends it.
type subEvent struct {
	ID      string // event id
	Sub     string
	Version int64
	Status  string
}

// applySub is the guarded handler under test: dedup, version guard, and the
// state write only for a newer version.
func applySub[TTx any](ctx context.Context, e *env[TTx], ib *inbox.Inbox[TTx], ev subEvent) (inbox.Order, inbox.Outcome, error) {
	var order inbox.Order
	out, err := ib.Apply(ctx, "subscriptions", inbox.Event{ID: ev.ID}, func(ctx context.Context, tx TTx) error {
		var err error
		order, err = ib.Advance(ctx, tx, "subscription", ev.Sub, ev.Version)
		if err != nil || order != inbox.Newer {
			return err
		}
		_, err = e.drv.WrapTx(tx).Exec(ctx, e.sql(`INSERT INTO subscriptions (id, status, version) VALUES ($1, $2, $3)
			ON CONFLICT (id) DO UPDATE SET status = excluded.status, version = excluded.version`), ev.Sub, ev.Status, ev.Version)
		return err
	})
	return order, out, err
}

func (e *env[TTx]) sub(id string) (status string, version int64) {
	e.t.Helper()
	err := e.drv.QueryRow(context.Background(), e.sql(`SELECT status, version FROM subscriptions WHERE id = $1`), id).Scan(&status, &version)
	if err != nil {
		e.t.Fatalf("subscription %s: %v", id, err)
	}
	return status, version
}

func (suite[TTx]) AdvanceOrder(t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	for i, c := range []struct {
		version int64
		want    inbox.Order
		status  string // subscription status afterwards
		stored  int64
	}{
		{200, inbox.Newer, "v200", 200},
		{100, inbox.Older, "v200", 200},
		{200, inbox.Equal, "v200", 200},
		{201, inbox.Newer, "v201", 201},
	} {
		ev := subEvent{ID: fmt.Sprintf("evt_%d", i), Sub: "sub_1", Version: c.version, Status: fmt.Sprintf("v%d", c.version)}
		order, out, err := applySub(ctx, e, e.ib, ev)
		if err != nil || out != inbox.Processed || order != c.want {
			t.Fatalf("v%d: %v, %v, %v; want %v", c.version, order, out, err, c.want)
		}
		if status, v := e.sub("sub_1"); status != c.status || v != c.stored {
			t.Fatalf("after v%d: %s v%d; want %s v%d", c.version, status, v, c.status, c.stored)
		}
	}
	if _, err := e.ib.Apply(ctx, "x", inbox.Event{ID: "e"}, func(ctx context.Context, tx TTx) error {
		_, err := e.ib.Advance(ctx, tx, "", "id", 1)
		return err
	}); !errors.Is(err, inbox.ErrInvalid) {
		t.Fatalf("empty entity: %v; want ErrInvalid", err)
	}
	// An object id no database keeps alike (here a NUL byte: PostgreSQL
	// would fail, SQLite keep it) is refused alike.
	if _, err := e.ib.Apply(ctx, "x", inbox.Event{ID: "e2"}, func(ctx context.Context, tx TTx) error {
		_, err := e.ib.Advance(ctx, tx, "subscription", "sub_\x00", 1)
		return err
	}); !errors.Is(err, inbox.ErrInvalid) {
		t.Fatalf("an id with a NUL byte: %v; want ErrInvalid", err)
	}
}

// v5 and v6 of one subscription in two transactions at once, each order
// forced by pausing the first before its commit while the second waits on
// it: the result is v6 either way.
func (suite[TTx]) AdvanceConcurrentBothOrders(t *testing.T, b backend[TTx]) {
	v5 := subEvent{ID: "evt_5", Sub: "sub_1", Version: 5, Status: "active"}
	v6 := subEvent{ID: "evt_6", Sub: "sub_1", Version: 6, Status: "past_due"}
	for _, order := range [][2]subEvent{{v5, v6}, {v6, v5}} {
		t.Run(fmt.Sprintf("v%d_first", order[0].Version), func(t *testing.T) {
			t.Parallel()
			e := setup(t, b)
			ctx := context.Background()
			first, pause := e.pausedBeforeCommit()
			second := e.inbox(inbox.Config{InFlightWait: 10 * time.Minute})
			firstDone := make(chan error)
			go func() {
				_, _, err := applySub(ctx, e, first, order[0])
				firstDone <- err
			}()
			<-pause.Reached()
			secondDone := make(chan error)
			go func() {
				_, _, err := applySub(ctx, e, second, order[1])
				secondDone <- err
			}()
			waitForLockWaiter(t, e)
			pause.Release()
			if err := <-firstDone; err != nil {
				t.Fatal(err)
			}
			if err := <-secondDone; err != nil {
				t.Fatal(err)
			}
			if status, v := e.sub("sub_1"); status != "past_due" || v != 6 {
				t.Fatalf("final %s v%d; want past_due v6", status, v)
			}
		})
	}
}

// Versions 1..32 of one object race in 32 goroutines: the highest wins, and
// exactly the goroutines that saw Newer wrote.
func (suite[TTx]) AdvanceConcurrentMany(t *testing.T, e *env[TTx]) {
	ib := e.inbox(inbox.Config{InFlightWait: 10 * time.Minute})
	ctx := context.Background()
	var wg sync.WaitGroup
	for v := range int64(32) {
		wg.Go(func() {
			ev := subEvent{ID: fmt.Sprintf("evt_%d", v+1), Sub: "sub_1", Version: v + 1, Status: fmt.Sprintf("s%d", v+1)}
			if _, out, err := applySub(ctx, e, ib, ev); err != nil || out != inbox.Processed {
				t.Errorf("v%d: %v, %v", v+1, out, err)
			}
		})
	}
	wg.Wait()
	if status, v := e.sub("sub_1"); status != "s32" || v != 32 {
		t.Fatalf("final %s v%d; want s32 v32", status, v)
	}
}

// Property: any shuffle of a stream, with redeliveries mixed in, ends in the
// same state as the ordered stream.
func (suite[TTx]) AdvanceShuffledStream(t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed))
	statuses := []string{"incomplete", "active", "past_due", "active", "canceled"}
	stream := func(prefix string) []subEvent {
		var s []subEvent
		for sub := range 3 {
			for v := range 8 {
				s = append(s, subEvent{
					ID:      fmt.Sprintf("%s_evt_%d_%d", prefix, sub, v),
					Sub:     fmt.Sprintf("%s_sub_%d", prefix, sub),
					Version: int64(v*10 + rng.IntN(10)), // increasing, with gaps
					Status:  statuses[rng.IntN(len(statuses))],
				})
			}
		}
		return s
	}
	for trial := range 8 {
		ordered := stream(fmt.Sprintf("t%d", trial))
		shuffled := make([]subEvent, 0, 2*len(ordered))
		shuffled = append(shuffled, ordered...)
		for range rng.IntN(len(ordered)) + 1 {
			shuffled = append(shuffled, ordered[rng.IntN(len(ordered))]) // redelivery
		}
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		rename := func(ev subEvent, ns string) subEvent {
			ev.ID, ev.Sub = ns+ev.ID, ns+ev.Sub
			return ev
		}
		for _, ev := range ordered {
			if _, _, err := applySub(ctx, e, e.ib, rename(ev, "ordered_")); err != nil {
				t.Fatal(err)
			}
		}
		for _, ev := range shuffled {
			if _, _, err := applySub(ctx, e, e.ib, rename(ev, "shuffled_")); err != nil {
				t.Fatal(err)
			}
		}
		for sub := range 3 {
			id := fmt.Sprintf("t%d_sub_%d", trial, sub)
			s1, v1 := e.sub("ordered_" + id)
			s2, v2 := e.sub("shuffled_" + id)
			if s1 != s2 || v1 != v2 {
				t.Fatalf("trial %d %s: ordered %s v%d, shuffled %s v%d", trial, id, s1, v1, s2, v2)
			}
			last := ordered[sub*8+7]
			if s1 != last.Status || v1 != last.Version {
				t.Fatalf("trial %d %s: %s v%d; want the last event's %s v%d", trial, id, s1, v1, last.Status, last.Version)
			}
		}
	}
}

func TestMachine(t *testing.T) {
	t.Parallel()
	m := inbox.NewMachine("subscription", map[string][]string{
		"":           {"incomplete", "active"},
		"incomplete": {"active", "incomplete_expired"},
		"active":     {"past_due", "canceled"},
		"past_due":   {"active", "canceled"},
	})
	for _, c := range []struct {
		from, to string
		ok       bool
	}{
		{"", "active", true},
		{"", "canceled", false},
		{"active", "past_due", true},
		{"past_due", "active", true},
		{"canceled", "active", false},
		{"incomplete_expired", "active", false},
		{"active", "incomplete", false},
		{"canceled", "canceled", true}, // a repeat is not illegal
	} {
		err := m.Check(c.from, c.to)
		if (err == nil) != c.ok {
			t.Errorf("Check(%q, %q) = %v; want ok=%v", c.from, c.to, err, c.ok)
		}
		if err != nil {
			var te *inbox.TransitionError
			if !errors.Is(err, inbox.ErrIllegalTransition) || !errors.As(err, &te) || te.From != c.from || te.To != c.to || te.Machine != "subscription" {
				t.Errorf("Check(%q, %q) error %#v", c.from, c.to, err)
			}
		}
	}
}
