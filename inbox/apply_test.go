package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook/inbox"
	"github.com/anyhook/anyhook/inbox/inboxdriver"
	"github.com/anyhook/anyhook/inbox/inboxsql"
	"github.com/anyhook/anyhook/inbox/inboxtest"
)

func (suite[TTx]) ApplySequentialDuplicate(t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	ev := inbox.Event{Source: "stripe", ID: "evt_1", Body: []byte(`{"a":1}`)}
	ran := 0
	fn := func(ctx context.Context, tx TTx) error {
		ran++
		return e.write(ctx, tx, ev.ID, "")
	}
	for i, want := range []inbox.Outcome{inbox.Processed, inbox.Duplicate, inbox.Duplicate} {
		out, err := e.ib.Apply(ctx, "orders", ev, fn)
		if err != nil || out != want {
			t.Fatalf("call %d: Apply = %v, %v; want %v", i+1, out, err, want)
		}
	}
	if ran != 1 || e.effects(ev.ID) != 1 {
		t.Fatalf("function ran %d times, %d effects committed; want 1, 1", ran, e.effects(ev.ID))
	}
	// The same event id for another handler, or from another source, is
	// another event.
	for _, k := range []struct{ handler, source string }{{"emails", "stripe"}, {"orders", "github"}} {
		ev2 := ev
		ev2.Source = k.source
		if out, err := e.ib.Apply(ctx, k.handler, ev2, fn); out != inbox.Processed || err != nil {
			t.Fatalf("Apply(%s, source %s) = %v, %v; want processed", k.handler, k.source, out, err)
		}
	}
	if ran != 3 {
		t.Fatalf("function ran %d times; want 3", ran)
	}
}

func (suite[TTx]) ApplyConflict(t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	fn := func(ctx context.Context, tx TTx) error { return e.write(ctx, tx, "evt_1", "") }
	if _, err := e.ib.Apply(ctx, "h", inbox.Event{ID: "evt_1", Body: []byte("one")}, fn); err != nil {
		t.Fatal(err)
	}
	out, err := e.ib.Apply(ctx, "h", inbox.Event{ID: "evt_1", Body: []byte("two")}, fn)
	if out != inbox.Conflict || !errors.Is(err, inbox.ErrConflict) {
		t.Fatalf("different body: Apply = %v, %v; want conflict, ErrConflict", out, err)
	}
	// Without a body there is nothing to compare: a plain duplicate.
	if out, err := e.ib.Apply(ctx, "h", inbox.Event{ID: "evt_1"}, fn); out != inbox.Duplicate || err != nil {
		t.Fatalf("no body: Apply = %v, %v; want duplicate", out, err)
	}
	if n := e.effects("evt_1"); n != 1 {
		t.Fatalf("%d effects; want 1", n)
	}
}

// The first delivery is paused before its commit; a second delivery on
// another connection reports InFlight (it must not be acknowledged: the
// first may still fail) and runs nothing; after the first commits, the
// second is a duplicate.
func (suite[TTx]) ApplyInFlightThenCommit(t *testing.T, e *env[TTx]) {
	if e.drv.Dialect() == inboxdriver.SQLite {
		t.Skip("SQLite locks the whole database: a twin waits for the lock, as busy_timeout says (TestInbox/ApplyWaitsForInFlight, TestInbox/BusyDatabaseIsNotInFlight)")
	}
	ctx := context.Background()
	first, pause := e.pausedBeforeCommit()
	second := e.inbox(inbox.Config{InFlightWait: time.Millisecond})
	ev := inbox.Event{ID: "evt_1"}
	var ran atomic.Int32
	fn := func(ctx context.Context, tx TTx) error {
		ran.Add(1)
		return e.write(ctx, tx, ev.ID, "")
	}
	done := applyLater(t, first, ev, fn)
	<-pause.Reached()
	out, err := second.Apply(ctx, "h", ev, fn)
	if out != inbox.InFlight || err != nil {
		t.Fatalf("while the first is uncommitted: Apply = %v, %v; want in-flight", out, err)
	}
	if out.HTTPStatus() != 503 {
		t.Fatalf("in-flight maps to %d; want 503", out.HTTPStatus())
	}
	pause.Release()
	if out := <-done; out != inbox.Processed {
		t.Fatalf("first Apply = %v; want processed", out)
	}
	if out, err := second.Apply(ctx, "h", ev, fn); out != inbox.Duplicate || err != nil {
		t.Fatalf("after commit: Apply = %v, %v; want duplicate", out, err)
	}
	if ran.Load() != 1 || e.effects(ev.ID) != 1 {
		t.Fatalf("function ran %d times, %d effects; want 1, 1", ran.Load(), e.effects(ev.ID))
	}
}

// As above, but the first delivery dies before its commit: the event is
// then processed once by the next delivery.
func (suite[TTx]) ApplyInFlightThenRollback(t *testing.T, e *env[TTx]) {
	if e.drv.Dialect() == inboxdriver.SQLite {
		t.Skip("SQLite locks the whole database: a twin waits for the lock, as busy_timeout says (TestInbox/ApplyWaitsForInFlight, TestInbox/BusyDatabaseIsNotInFlight)")
	}
	ctx := context.Background()
	var faults inboxtest.Faults
	pause := faults.PauseAt(inbox.ApplyBeforeCommit)
	faults.FailAt(inbox.ApplyBeforeCommit, nil)
	first := e.inbox(inbox.Config{Hook: faults.Hook})
	second := e.inbox(inbox.Config{InFlightWait: time.Millisecond})
	ev := inbox.Event{ID: "evt_1"}
	fn := func(ctx context.Context, tx TTx) error { return e.write(ctx, tx, ev.ID, "") }
	done := make(chan error)
	go func() {
		_, err := first.Apply(ctx, "h", ev, fn)
		done <- err
	}()
	<-pause.Reached()
	if out, err := second.Apply(ctx, "h", ev, fn); out != inbox.InFlight || err != nil {
		t.Fatalf("while the first is uncommitted: Apply = %v, %v; want in-flight", out, err)
	}
	pause.Release()
	if err := <-done; !errors.Is(err, inboxtest.ErrInjected) {
		t.Fatalf("first Apply error = %v; want the injected failure", err)
	}
	if n := e.effects(ev.ID); n != 0 {
		t.Fatalf("%d effects after rollback; want 0", n)
	}
	if out, err := second.Apply(ctx, "h", ev, fn); out != inbox.Processed || err != nil {
		t.Fatalf("after rollback: Apply = %v, %v; want processed", out, err)
	}
	if n := e.effects(ev.ID); n != 1 {
		t.Fatalf("%d effects; want 1", n)
	}
}

// With a long InFlightWait the second delivery waits for the first instead of
// failing, and learns the first's fate: duplicate after its commit.
func (suite[TTx]) ApplyWaitsForInFlight(t *testing.T, e *env[TTx]) {
	first, pause := e.pausedBeforeCommit()
	second := e.inbox(inbox.Config{InFlightWait: 10 * time.Minute})
	ev := inbox.Event{ID: "evt_1"}
	fn := func(ctx context.Context, tx TTx) error { return e.write(ctx, tx, ev.ID, "") }
	done := applyLater(t, first, ev, fn)
	<-pause.Reached()
	waited := applyLater(t, second, ev, fn)
	waitForLockWaiter(t, e)
	select {
	case out := <-waited:
		t.Fatalf("second Apply returned %v while the first held the event", out)
	default:
	}
	pause.Release()
	if out := <-done; out != inbox.Processed {
		t.Fatalf("first = %v; want processed", out)
	}
	if out := <-waited; out != inbox.Duplicate {
		t.Fatalf("second = %v; want duplicate", out)
	}
	if n := e.effects(ev.ID); n != 1 {
		t.Fatalf("%d effects; want 1", n)
	}
}

// waitForLockWaiter returns once some session of e's database is blocked on
// a lock. On PostgreSQL it watches pg_stat_activity; SQLite waits inside its busy
// handler, which no other connection can observe, so there it only yields.
func waitForLockWaiter[TTx any](t *testing.T, e *env[TTx]) {
	t.Helper()
	if e.drv.Dialect() != inboxdriver.Postgres {
		return
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		var n int
		if err := e.drv.QueryRow(context.Background(),
			`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
	}
}

// 64 goroutines over 8 connections deliver the same event at once, for many
// events: exactly one effect each, exactly one Processed, never an error.
func (suite[TTx]) ApplyConcurrent(t *testing.T, e *env[TTx]) {
	ib := e.inbox(inbox.Config{InFlightWait: 10 * time.Minute})
	ctx := context.Background()
	const goroutines, rounds = 64, 20
	for r := range rounds {
		ev := inbox.Event{Source: "s", ID: fmt.Sprintf("evt_%d", r), Body: []byte("same")}
		var ran atomic.Int32
		var counts [9]atomic.Int32
		start := make(chan struct{})
		var wg sync.WaitGroup
		for range goroutines {
			wg.Go(func() {
				<-start
				out, err := ib.Apply(ctx, "h", ev, func(ctx context.Context, tx TTx) error {
					ran.Add(1)
					return e.write(ctx, tx, ev.ID, "")
				})
				if err != nil {
					t.Errorf("Apply: %v", err)
				}
				counts[out].Add(1)
			})
		}
		close(start)
		wg.Wait()
		if p := counts[inbox.Processed].Load(); p != 1 {
			t.Fatalf("round %d: %d processed; want 1", r, p)
		}
		if n := e.effects(ev.ID); n != 1 {
			t.Fatalf("round %d: %d effects; want exactly 1", r, n)
		}
		if d, f := counts[inbox.Duplicate].Load(), counts[inbox.InFlight].Load(); d+f != goroutines-1 {
			t.Fatalf("round %d: %d duplicate + %d in-flight; want %d", r, d, f, goroutines-1)
		}
		// A function can run more than once only when a serialization
		// failure re-ran it; its earlier runs rolled back (checked above).
		t.Logf("round %d: function ran %d times", r, ran.Load())
	}
}

// retryableErr is what PostgreSQL returns on a serialization failure.
type retryableErr struct{}

func (retryableErr) Error() string    { return "could not serialize access" }
func (retryableErr) SQLState() string { return "40001" }

func (suite[TTx]) ApplyRetriesSerializationFailure(t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	ran := 0
	out, err := e.ib.Apply(ctx, "h", inbox.Event{ID: "evt_1"}, func(ctx context.Context, tx TTx) error {
		ran++
		if err := e.write(ctx, tx, "evt_1", fmt.Sprint(ran)); err != nil {
			return err
		}
		if ran < 3 {
			return fmt.Errorf("update: %w", retryableErr{})
		}
		return nil
	})
	if out != inbox.Processed || err != nil {
		t.Fatalf("Apply = %v, %v; want processed", out, err)
	}
	if got := e.notes("evt_1"); ran != 3 || len(got) != 1 || got[0] != "3" {
		t.Fatalf("ran %d times, committed %v; want 3 runs and only the third committed", ran, got)
	}
	// With retries disabled the failure is returned.
	ib := e.inbox(inbox.Config{Retries: -1})
	out, err = ib.Apply(ctx, "h", inbox.Event{ID: "evt_2"}, func(ctx context.Context, tx TTx) error { return retryableErr{} })
	if out != 0 || !errors.As(err, new(retryableErr)) {
		t.Fatalf("no retries: Apply = %v, %v; want the serialization failure", out, err)
	}
}

func (suite[TTx]) ApplyErrors(t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	boom := errors.New("boom")
	// A plain error rolls everything back and is returned: retryable.
	out, err := e.ib.Apply(ctx, "h", inbox.Event{ID: "evt_1"}, func(ctx context.Context, tx TTx) error {
		if err := e.write(ctx, tx, "evt_1", ""); err != nil {
			return err
		}
		return boom
	})
	if out != 0 || !errors.Is(err, boom) || out.HTTPStatus() != 503 {
		t.Fatalf("Apply = %v, %v; want zero outcome, boom, 503", out, err)
	}
	if n := e.effects("evt_1") + e.countRows("inbox_events"); n != 0 {
		t.Fatalf("%d rows written by a failed Apply; want 0", n)
	}
	// A permanent error is recorded and acknowledged; the writes still roll back.
	out, err = e.ib.Apply(ctx, "h", inbox.Event{ID: "evt_1"}, func(ctx context.Context, tx TTx) error {
		if err := e.write(ctx, tx, "evt_1", ""); err != nil {
			return err
		}
		return inbox.Permanent(boom)
	})
	if out != inbox.Failed || !errors.Is(err, boom) || out.HTTPStatus() != 200 {
		t.Fatalf("Apply = %v, %v; want failed, boom, 200", out, err)
	}
	if status, _, _ := e.row("", "h", "evt_1"); status != "failed" || e.effects("evt_1") != 0 {
		t.Fatalf("status %q, %d effects; want failed, 0", status, e.effects("evt_1"))
	}
	if out, err := e.ib.Apply(ctx, "h", inbox.Event{ID: "evt_1"}, func(context.Context, TTx) error {
		t.Error("function ran after a permanent failure")
		return nil
	}); out != inbox.Duplicate || err != nil {
		t.Fatalf("after permanent failure: Apply = %v, %v; want duplicate", out, err)
	}
	if _, err := e.ib.Apply(ctx, "", inbox.Event{ID: "x"}, func(context.Context, TTx) error { return nil }); !errors.Is(err, inbox.ErrInvalid) {
		t.Fatalf("empty handler: %v; want ErrInvalid", err)
	}
	if _, err := e.ib.Apply(ctx, "h", inbox.Event{}, func(context.Context, TTx) error { return nil }); !errors.Is(err, inbox.ErrInvalid) {
		t.Fatalf("empty id: %v; want ErrInvalid", err)
	}
}

func (suite[TTx]) RecordInCallersTransaction(t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	ev := inbox.Event{ID: "evt_1"}
	attempt := func(commit bool) inbox.Outcome {
		tx, err := e.drv.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		out, err := e.ib.Record(ctx, tx.Unwrap(), "h", ev)
		if err != nil {
			t.Fatal(err)
		}
		if out == inbox.Processed {
			if err := e.write(ctx, tx.Unwrap(), ev.ID, ""); err != nil {
				t.Fatal(err)
			}
		}
		if commit {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	if out := attempt(false); out != inbox.Processed {
		t.Fatalf("first = %v", out)
	}
	if out := attempt(true); out != inbox.Processed {
		t.Fatalf("after a rollback = %v; want processed", out)
	}
	if out := attempt(true); out != inbox.Duplicate {
		t.Fatalf("after a commit = %v; want duplicate", out)
	}
	if n := e.effects(ev.ID); n != 1 {
		t.Fatalf("%d effects; want 1", n)
	}
}

// e is migrated once already; more migrations, at once, change nothing.
func (suite[TTx]) MigrateIdempotent(t *testing.T, e *env[TTx]) {
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			if err := e.ib.Migrate(context.Background()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := e.countRows("inbox_events") + e.countRows("inbox_versions"); n != 0 {
		t.Fatalf("%d rows after migrations; want 0", n)
	}
}

// One event's Apply holds its transaction open for a while; unrelated
// events sent meanwhile from many goroutines, through Apply and Do, are all
// processed: on SQLite they wait for the database lock as the DSN's
// busy_timeout says (20 s here), whatever InFlightWait (1 ms here), and are
// never reported InFlight; on PostgreSQL they do not wait at all.
func (suite[TTx]) BusyDatabaseIsNotInFlight(t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	holder, pause := e.pausedBeforeCommit()
	held := applyLater(t, holder, inbox.Event{ID: "evt_slow"}, func(ctx context.Context, tx TTx) error {
		return e.write(ctx, tx, "evt_slow", "")
	})
	<-pause.Reached()

	ib := e.inbox(inbox.Config{InFlightWait: time.Millisecond})
	const goroutines = 32
	var started, wg sync.WaitGroup
	outs := make([]inbox.Outcome, goroutines)
	errs := make([]error, goroutines)
	for i := range goroutines {
		started.Add(1)
		wg.Go(func() {
			id := fmt.Sprintf("evt_%d", i)
			started.Done()
			if i%2 == 0 {
				outs[i], errs[i] = ib.Apply(ctx, "h", inbox.Event{ID: id}, func(ctx context.Context, tx TTx) error {
					return e.write(ctx, tx, id, "")
				})
				return
			}
			outs[i], errs[i] = ib.Do(ctx, "h", inbox.Event{ID: id}, inbox.Effect[TTx]{
				Policy: inbox.Hold(time.Hour),
				Run:    func(context.Context, inbox.Claim) error { return nil },
				Finish: func(ctx context.Context, tx TTx, _ inbox.Claim) error { return e.write(ctx, tx, id, "") },
			})
		})
	}
	started.Wait()
	// Hold the slow event's transaction a while (far beyond InFlightWait)
	// while the others queue behind it. Nothing is asserted about time.
	time.Sleep(300 * time.Millisecond)
	pause.Release()
	wg.Wait()
	if out := <-held; out != inbox.Processed {
		t.Fatalf("slow event = %v; want processed", out)
	}
	for i := range goroutines {
		if outs[i] != inbox.Processed || errs[i] != nil {
			t.Errorf("unrelated event %d = %v, %v; want processed", i, outs[i], errs[i])
		}
	}
	if n := e.countRows("effects"); n != goroutines+1 {
		t.Fatalf("%d effects; want %d", n, goroutines+1)
	}
}

// On SQLite a busy_timeout that runs out while another event holds the
// database is a store error (the zero Outcome, so the handler answers 503),
// not InFlight: the caller must not be told the same event is in flight.
// InFlight stays for the same event, claimed by Do.
func TestSQLiteBusyTimeoutIsAnError(t *testing.T) {
	t.Parallel()
	e := setup(t, sqliteBackend)
	ctx := context.Background()
	var crash inboxtest.Faults
	crash.FailAt(inbox.AfterClaim, nil)
	eff := inbox.Effect[*sql.Tx]{Policy: inbox.Hold(time.Hour), Run: func(context.Context, inbox.Claim) error { return nil }}
	if _, err := e.inbox(inbox.Config{Hook: crash.Hook}).Do(ctx, "h", inbox.Event{ID: "evt_claimed"}, eff); !errors.Is(err, inboxtest.ErrInjected) {
		t.Fatal(err)
	}
	holder, pause := e.pausedBeforeCommit()
	held := make(chan error, 1)
	go func() {
		_, err := holder.Apply(ctx, "h", inbox.Event{ID: "evt_slow"}, func(context.Context, *sql.Tx) error { return nil })
		held <- err
	}()
	<-pause.Reached()

	impatient := strings.Replace(e.dsn, "busy_timeout(20000)", "busy_timeout(1)", 1)
	if impatient == e.dsn {
		t.Fatal("test DSN has no busy_timeout(20000)")
	}
	ib, err := inbox.New(sqliteBackend.open(t, impatient), inbox.Config{InFlightWait: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	out, err := ib.Apply(ctx, "h", inbox.Event{ID: "evt_other"}, func(context.Context, *sql.Tx) error { return nil })
	if out != 0 || inboxdriver.Classify(err) != inboxdriver.Busy {
		t.Fatalf("Apply while the database is locked = %v, %v; want the zero outcome and SQLITE_BUSY", out, err)
	}
	out, err = ib.Do(ctx, "h", inbox.Event{ID: "evt_other2"}, eff)
	if out != 0 || inboxdriver.Classify(err) != inboxdriver.Busy {
		t.Fatalf("Do while the database is locked = %v, %v; want the zero outcome and SQLITE_BUSY", out, err)
	}
	pause.Release()
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	// The same event, claimed: InFlight, at once.
	if out, err := ib.Apply(ctx, "h", inbox.Event{ID: "evt_claimed"}, func(context.Context, *sql.Tx) error { return nil }); out != inbox.InFlight || err != nil {
		t.Fatalf("Apply of a claimed event = %v, %v; want in-flight", out, err)
	}
	if out, err := ib.Apply(ctx, "h", inbox.Event{ID: "evt_other"}, func(context.Context, *sql.Tx) error { return nil }); out != inbox.Processed || err != nil {
		t.Fatalf("Apply once the database is free = %v, %v; want processed", out, err)
	}
}

// A PostgreSQL handle given the SQLite dialect, or the reverse, is refused
// by Migrate with a message naming the right dialect, before anything is
// created.
func TestMigrateDetectsWrongDialect(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pg := openSQL(t, "pgx", pgDSN(t))
	lite := openSQL(t, "sqlite", sqliteBackend.newDSN(t))
	for _, c := range []struct {
		db      *sql.DB
		dialect inboxdriver.Dialect
		want    string
	}{
		{pg, inboxsql.SQLite, "inboxsql.Postgres"},
		{lite, inboxsql.Postgres, "inboxsql.SQLite"},
	} {
		ib, err := inbox.New(inboxsql.New(c.db, c.dialect), inbox.Config{})
		if err != nil {
			t.Fatal(err)
		}
		err = ib.Migrate(ctx)
		if !errors.Is(err, inbox.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Migrate with dialect %v on the other database: %v; want ErrInvalid naming %s", c.dialect, err, c.want)
		}
		var n int
		if err := c.db.QueryRow(`SELECT count(*) FROM information_schema.tables WHERE table_name = 'inbox_events'`).Scan(&n); err == nil && n != 0 {
			t.Errorf("dialect %v: Migrate created inbox_events on the wrong database", c.dialect)
		}
	}
}

// ApplyUnstorableText: an event id that PostgreSQL's text or its primary
// key cannot hold — a NUL byte, bytes that are not UTF-8, more than
// MaxEventID bytes — is ErrInvalid on every database (SQLite would keep
// it, PostgreSQL fail: the sender retried for ever), with nothing written;
// and a permanent failure whose message holds such bytes, long and cut
// inside a character, is recorded all the same, as the same text on every
// database.
func (suite[TTx]) ApplyUnstorableText(t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	for _, id := range []string{"evt_\x00", "evt_\xff\xfe", strings.Repeat("i", inbox.MaxEventID+1)} {
		if _, err := e.ib.Apply(ctx, "h", inbox.Event{ID: id}, func(context.Context, TTx) error { return nil }); !errors.Is(err, inbox.ErrInvalid) {
			t.Errorf("id %.20q: %v; want ErrInvalid", id, err)
		}
	}
	if n := e.countRows("inbox_events"); n != 0 {
		t.Fatalf("%d rows for refused ids", n)
	}
	if _, err := e.ib.Apply(ctx, "h", inbox.Event{ID: strings.Repeat("i", inbox.MaxEventID)}, func(context.Context, TTx) error { return nil }); err != nil {
		t.Fatalf("an id of MaxEventID bytes: %v", err)
	}
	cause := errors.New("caf\xe9 \x00 " + strings.Repeat("é", 600)) // 1,207 bytes: cut at 1,000, inside an é
	out, err := e.ib.Apply(ctx, "h", inbox.Event{ID: "evt_1"}, func(context.Context, TTx) error { return inbox.Permanent(cause) })
	if out != inbox.Failed || !errors.Is(err, cause) {
		t.Fatalf("Apply = %v, %v; want failed", out, err)
	}
	var stored string
	if err := e.drv.QueryRow(ctx, e.sql(`SELECT error FROM inbox_events WHERE handler = 'h' AND event_id = 'evt_1'`)).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if want := ("caf\uFFFD \uFFFD " + strings.Repeat("é", 600))[:999]; stored != want {
		t.Fatalf("stored error %q…; want %q…", stored[:20], want[:20])
	}
}
