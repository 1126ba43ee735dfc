package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/testkit/sqlitewrap"
)

// The tests below hold the writer's turn themselves to line the callers
// up: a Finish waiting for the writer, then an ingest, which goes first.

// An ingest transaction that begins while a Finish waits takes its
// outcomes along: the Finish is answered by the ingest's commit and runs
// no transaction of its own (none set synchronous=NORMAL).
func TestOutcomesRideAlongWithIngest(t *testing.T) {
	s, d := openRides(t)
	c := ingestClaim(t, s)
	ridden := d.unsynced.Load()

	fin, ing := lineUp(t, s, outcome(c, anyhook.StatusDelivered), outcome(c, anyhook.StatusDead))
	s.gate.leave()

	if err := answer(t, ing); err != nil {
		t.Fatal(err)
	}
	r := answer(t, fin)
	if r.err != nil || !slices.Equal(r.lost, []string{c.Delivery.ID}) {
		t.Fatalf("Finish: lost %v, %v; want the second outcome lost", r.lost, r.err)
	}
	if n := d.unsynced.Load() - ridden; n != 0 {
		t.Fatalf("the Finish ran %d transaction(s) of its own; its outcomes should have ridden with the ingest", n)
	}
	wantDelivered(t, s, c)
}

// Outcomes that fail inside the ingest transaction roll it back: the
// ingest runs again and commits without them, and the Finish writes them
// in a transaction of its own.
func TestFailedRideLeavesTheIngestAndTheFinish(t *testing.T) {
	s, d := openRides(t)
	c := ingestClaim(t, s)
	before := d.unsynced.Load()

	fin, ing := lineUp(t, s, outcome(c, anyhook.StatusDelivered))
	d.failFinish.Store(true)
	s.gate.leave()

	if err := answer(t, ing); err != nil {
		t.Fatalf("the ingest failed with the outcomes that rode along: %v", err)
	}
	if r := answer(t, fin); r.err != nil || len(r.lost) != 0 {
		t.Fatalf("Finish: lost %v, %v", r.lost, r.err)
	}
	if d.failFinish.Load() {
		t.Fatal("the fault never fired: the outcomes did not ride along")
	}
	if n := d.unsynced.Load() - before; n != 1 {
		t.Fatalf("the Finish ran %d transactions of its own, want 1", n)
	}
	wantDelivered(t, s, c)
}

// An ingest whose commit fails queues the outcomes it took again, and
// the Finish writes them itself.
func TestFailedIngestQueuesTheRideAgain(t *testing.T) {
	s, d := openRides(t)
	c := ingestClaim(t, s)

	fin, ing := lineUp(t, s, outcome(c, anyhook.StatusDelivered))
	d.failCommit.Store(true)
	s.gate.leave()

	if err := answer(t, ing); !errors.Is(err, anyhook.ErrUnavailable) {
		t.Fatalf("ingest with a failed commit: %v, want unavailable", err)
	}
	if r := answer(t, fin); r.err != nil || len(r.lost) != 0 {
		t.Fatalf("Finish: lost %v, %v", r.lost, r.err)
	}
	wantDelivered(t, s, c)
}

// A Finish whose context ends while an ingest transaction holds its
// outcomes is answered by that transaction's end: with success if it
// committed them, else with its own error. The outcomes are not queued
// again for a Finish that no longer waits at the writer's gate (it
// waited for ever).
func TestFinishThatGaveUpDuringARide(t *testing.T) {
	for _, fail := range []bool{false, true} {
		t.Run(fmt.Sprintf("commit fails=%v", fail), func(t *testing.T) {
			s, d := openRides(t)
			c := ingestClaim(t, s)
			ctx, cancel := context.WithCancel(t.Context())
			s.gate.enter(t.Context(), false)
			fin := finishAsync(s, ctx, outcome(c, anyhook.StatusDelivered))
			waitQueued(t, s, 0, 1, 1)
			ing := ingestAsync(s)
			waitQueued(t, s, 1, 1, 1)
			entered, release := make(chan struct{}), make(chan struct{})
			d.hold.Store(&commitHold{entered, release})
			d.failCommit.Store(fail)
			s.gate.leave()

			<-entered // the ingest, with the outcomes, is committing
			cancel()
			waitQueued(t, s, 0, 0, 0) // the Finish left the gate's queue
			close(release)
			if err := answer(t, ing); (err != nil) != fail {
				t.Fatalf("ingest: %v", err)
			}
			r := answer(t, fin)
			if fail {
				if !errors.Is(r.err, anyhook.ErrUnavailable) {
					t.Fatalf("Finish: lost %v, %v; want unavailable", r.lost, r.err)
				}
				wantDelivering(t, s, c)
				return
			}
			if r.err != nil || len(r.lost) != 0 {
				t.Fatalf("Finish whose outcomes were committed: lost %v, %v", r.lost, r.err)
			}
			wantDelivered(t, s, c)
		})
	}
}

// Two Finishes of one delivery ride in one ingest, the first with the
// outcome of an attempt that lost its claim: each is judged as if alone
// (the late one lost, the current one held), not the second taken for a
// repeat of the first.
func TestRidesOfOneDeliveryJudgedApart(t *testing.T) {
	s, _ := openRides(t)
	c := ingestClaim(t, s)
	late := outcome(c, anyhook.StatusDead)
	late.Attempt = c.Delivery.AttemptCount - 1
	s.gate.enter(t.Context(), false)
	finLate := finishAsync(s, t.Context(), late)
	waitQueued(t, s, 0, 1, 1)
	finCur := finishAsync(s, t.Context(), outcome(c, anyhook.StatusDelivered))
	waitQueued(t, s, 0, 2, 2)
	ing := ingestAsync(s)
	waitQueued(t, s, 1, 2, 2)
	s.gate.leave()
	if err := answer(t, ing); err != nil {
		t.Fatal(err)
	}
	a, b := answer(t, finLate), answer(t, finCur)
	if a.err != nil || b.err != nil {
		t.Fatal(a.err, b.err)
	}
	if !slices.Equal(a.lost, []string{c.Delivery.ID}) || len(b.lost) != 0 {
		t.Fatalf("the late Finish lost %v, the current one %v; want the late one lost and the current one held", a.lost, b.lost)
	}
	wantDelivered(t, s, c)
}

// A Finish whose context ends while it waits writes nothing, even when
// an ingest takes the writer's turn afterwards.
func TestCancelledFinishDoesNotRide(t *testing.T) {
	s, _ := openRides(t)
	c := ingestClaim(t, s)

	s.gate.enter(t.Context(), false)
	ctx, cancel := context.WithCancel(t.Context())
	fin := finishAsync(s, ctx, outcome(c, anyhook.StatusDelivered))
	waitQueued(t, s, 0, 1, 1)
	cancel()
	if r := answer(t, fin); !errors.Is(r.err, anyhook.ErrUnavailable) {
		t.Fatalf("a cancelled Finish: %v, want unavailable", r.err)
	}
	ing := ingestAsync(s)
	waitQueued(t, s, 1, 0, 0)
	s.gate.leave()
	if err := answer(t, ing); err != nil {
		t.Fatal(err)
	}
	wantDelivering(t, s, c)
}

// Ingests and Finishes race (run with -race): every outcome is written
// once, whichever transaction carries it; of two outcomes of one attempt,
// sent by two Finishes at once, exactly one holds the claim.
func TestRidesUnderConcurrentIngest(t *testing.T) {
	s, d := openRides(t)
	const n = 60
	var evs []store.NewEvent
	for range n {
		evs = append(evs, newEvent())
	}
	if _, err := s.Ingest(t.Context(), evs); err != nil {
		t.Fatal(err)
	}
	cs, err := s.Claim(t.Context(), "d", n, time.Hour)
	if err != nil || len(cs) != n {
		t.Fatalf("claimed %d: %v", len(cs), err)
	}
	before := d.unsynced.Load()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := <-ingestAsync(s); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var lost atomic.Int64
	var fins sync.WaitGroup
	for i, c := range cs {
		for range 2 { // two Finishes of one attempt
			fins.Go(func() {
				r := <-finishAsync(s, t.Context(), outcome(c, anyhook.StatusDelivered))
				if r.err != nil {
					t.Errorf("Finish %d: %v", i, r.err)
				}
				lost.Add(int64(len(r.lost)))
			})
		}
	}
	done := make(chan struct{})
	go func() { fins.Wait(); close(done) }()
	answer(t, done)
	close(stop)
	wg.Wait()
	if lost.Load() != n {
		t.Errorf("%d outcomes lost their claim, want %d (one of each pair)", lost.Load(), n)
	}
	for _, c := range cs {
		wantDelivered(t, s, c)
	}
	t.Logf("%d of %d Finishes ran a transaction of their own", d.unsynced.Load()-before, 2*n)
}

// lineUp holds the writer's turn and queues a Finish of outs, then an
// ingest of a new event; the caller leaves the gate to let them go.
func lineUp(t *testing.T, s *Store, outs ...store.Outcome) (<-chan finished, <-chan error) {
	t.Helper()
	s.gate.enter(t.Context(), false)
	fin := finishAsync(s, t.Context(), outs...)
	waitQueued(t, s, 0, 1, 1)
	ing := ingestAsync(s)
	waitQueued(t, s, 1, 1, 1)
	return fin, ing
}

// openRides opens a store on a driver that counts the Finishes' own
// transactions and can fail a Finish's statement or a commit once.
func openRides(t *testing.T) (*Store, *ridesDriver) {
	t.Helper()
	d := &ridesDriver{}
	name := fmt.Sprintf("sqlite-rides-%d", ridesDrivers.Add(1))
	sql.Register(name, sqlitewrap.Driver(func(c sqlitewrap.Conn) driver.Conn { return &ridesConn{c, d} }))
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), Options{Driver: name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, d
}

var ridesDrivers atomic.Int64

func newEvent() store.NewEvent {
	id := store.NewID()
	return store.NewEvent{Event: anyhook.Event{ID: id, Source: "s", DedupKey: id, ReceivedAt: time.Now(), Body: []byte(`{}`)},
		Destinations: []string{"d"}}
}

func ingestClaim(t *testing.T, s *Store) store.Claim {
	t.Helper()
	if _, err := s.Ingest(t.Context(), []store.NewEvent{newEvent()}); err != nil {
		t.Fatal(err)
	}
	cs, err := s.Claim(t.Context(), "d", 1, time.Hour)
	if err != nil || len(cs) != 1 {
		t.Fatalf("claimed %d: %v", len(cs), err)
	}
	return cs[0]
}

func outcome(c store.Claim, status anyhook.DeliveryStatus) store.Outcome {
	return store.Outcome{DeliveryID: c.Delivery.ID, Attempt: c.Delivery.AttemptCount, Status: status,
		Result: anyhook.Attempt{Number: c.Delivery.AttemptCount, StartedAt: time.Now(), StatusCode: 200}}
}

// answer receives from ch, failing the test (rather than waiting for
// its timeout) if nothing comes within 10 s: a call that never returns.
func answer[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		var zero T
		t.Fatal("no answer in 10 s")
		return zero
	}
}

type finished struct {
	lost []string
	err  error
}

func finishAsync(s *Store, ctx context.Context, outs ...store.Outcome) <-chan finished {
	ch := make(chan finished, 1)
	go func() {
		lost, err := s.Finish(ctx, outs)
		ch <- finished{lost, err}
	}()
	return ch
}

// ingestAsync ingests a new event; its channel gives the error of the
// call or of the item.
func ingestAsync(s *Store) <-chan error {
	ch := make(chan error, 1)
	go func() {
		res, err := s.Ingest(context.Background(), []store.NewEvent{newEvent()})
		if err == nil {
			err = res[0].Err
		}
		ch <- err
	}()
	return ch
}

// waitQueued waits until the gate holds first ingests and rest others,
// and rides Finishes are queued.
func waitQueued(t *testing.T, s *Store, first, rest, rides int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s.gate.mu.Lock()
		f, r := len(s.gate.first), len(s.gate.rest)
		s.gate.mu.Unlock()
		s.rides.mu.Lock()
		q := len(s.rides.q)
		s.rides.mu.Unlock()
		if f == first && r == rest && q == rides {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queued: %d ingests, %d others, %d rides; want %d, %d, %d", f, r, q, first, rest, rides)
		}
	}
}

func wantDelivering(t *testing.T, s *Store, c store.Claim) {
	t.Helper()
	ev, err := s.Event(t.Context(), c.Event.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d := ev.Deliveries[0]; d.Status != anyhook.StatusDelivering || len(d.Attempts) != 0 {
		t.Fatalf("delivery %s is %s with %d attempts, want delivering with none", d.ID, d.Status, len(d.Attempts))
	}
}

func wantDelivered(t *testing.T, s *Store, c store.Claim) {
	t.Helper()
	ev, err := s.Event(t.Context(), c.Event.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d := ev.Deliveries[0]; d.Status != anyhook.StatusDelivered || len(d.Attempts) != 1 {
		t.Fatalf("delivery %s is %s with %d attempts, want delivered with 1", d.ID, d.Status, len(d.Attempts))
	}
}

// ridesDriver wraps the SQLite driver: it counts the transactions Finish
// runs on its own (each sets synchronous=NORMAL first), and fails, once
// each when asked, a Finish's fenced update or a commit, and can hold a
// commit back.
type ridesDriver struct {
	unsynced   atomic.Int64
	failFinish atomic.Bool
	failCommit atomic.Bool
	hold       atomic.Pointer[commitHold] // the next commit waits
}

// commitHold makes a commit say it entered and wait for release.
type commitHold struct{ entered, release chan struct{} }

type ridesConn struct {
	sqlitewrap.Conn
	d *ridesDriver
}

func (c *ridesConn) ExecContext(ctx context.Context, q string, args []driver.NamedValue) (driver.Result, error) {
	if q == "PRAGMA synchronous = NORMAL" {
		c.d.unsynced.Add(1)
	}
	return c.Conn.ExecContext(ctx, q, args)
}

func (c *ridesConn) PrepareContext(ctx context.Context, q string) (driver.Stmt, error) {
	st, err := c.Conn.PrepareContext(ctx, q)
	if err != nil || !strings.HasPrefix(q, qFinish) {
		return st, err
	}
	return &ridesStmt{st.(fullStmt), c.d}, nil
}

func (c *ridesConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	tx, err := c.Conn.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &ridesTx{tx, c.d}, nil
}

func (c *ridesConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

type fullStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

type ridesStmt struct {
	fullStmt
	d *ridesDriver
}

func (s *ridesStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	if s.d.failFinish.CompareAndSwap(true, false) {
		return nil, errors.New("injected: the fenced update failed")
	}
	return s.fullStmt.QueryContext(ctx, args)
}

type ridesTx struct {
	driver.Tx
	d *ridesDriver
}

func (tx *ridesTx) Commit() error {
	if h := tx.d.hold.Swap(nil); h != nil {
		close(h.entered)
		<-h.release
	}
	if tx.d.failCommit.CompareAndSwap(true, false) {
		tx.Tx.Rollback()
		return errors.New("injected: the commit failed")
	}
	return tx.Tx.Commit()
}
