package backfill_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/backfill"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/testkit/testclock"
)

// TestJobsTakeOverFromAStoppedProcess: two processes (two Jobs, each on its
// own store over one SQLite file; the stores' clocks are the database's
// clock here). The first starts a backfill and stops being heard from (as a
// process that froze: its clock, and so the time it last wrote, stays
// put). While that is recent the second refuses to start another; once it
// is older than StaleAfter, the second shows it failed (interrupted, not
// running: nothing runs it) and may start one. The first, coming back,
// finds its run replaced at its next write and stops it, and cannot
// write over the new one.
func TestJobsTakeOverFromAStoppedProcess(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "anyhook.db")
	start := time.Now()
	clockA, clockB := testclock.New(start), testclock.New(start)
	open := func(c *testclock.Clock) *sqlite.Store {
		st, err := sqlite.Open(t.Context(), path, sqlite.Options{Now: c.Now})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	stA, stB := open(clockA), open(clockB)

	stopped := make(chan error, 1)
	hang := func(ctx context.Context, source string, from, to time.Time, dryRun bool, progress func(backfill.Progress)) (backfill.Progress, error) {
		progress(backfill.Progress{Pages: 1})
		<-ctx.Done()
		stopped <- context.Cause(ctx)
		return backfill.Progress{Pages: 1}, ctx.Err()
	}
	a := backfill.NewJobs(hang, backfill.JobsOptions{Now: clockA.Now, Log: stA})
	defer a.Stop(context.Background())
	if _, err := a.Start("stripe", start.Add(-time.Hour), time.Time{}, false, "api"); err != nil {
		t.Fatal(err)
	}

	quick := func(ctx context.Context, source string, from, to time.Time, dryRun bool, progress func(backfill.Progress)) (backfill.Progress, error) {
		return backfill.Progress{Pages: 1, Found: 1, New: 1}, nil
	}
	b := backfill.NewJobs(quick, backfill.JobsOptions{Now: clockB.Now, Log: stB})
	defer b.Stop(context.Background())
	if job, ok, err := b.Get("stripe"); err != nil || !ok || job.State != backfill.StateRunning || job.By != "api" {
		t.Fatalf("b sees %+v, %v, %v; want a's backfill running", job, ok, err)
	}
	clockB.Add(backfill.StaleAfter - time.Second)
	if job, err := b.Start("stripe", start, time.Time{}, false, "dashboard"); !errors.Is(err, backfill.ErrRunning) || job.By != "api" {
		t.Fatalf("b's start just within StaleAfter of a's last write: %+v, %v; want a's and ErrRunning", job, err)
	}

	clockB.Add(2 * time.Second) // past StaleAfter
	job, ok, err := b.Get("stripe")
	if err != nil || !ok || job.State != backfill.StateFailed || !strings.Contains(job.Error, "interrupted") {
		t.Fatalf("b sees %+v, %v, %v; want a's backfill failed, interrupted", job, ok, err)
	}
	if _, err := b.Start("stripe", start, time.Time{}, false, "dashboard"); err != nil {
		t.Fatalf("b's start once a's is interrupted: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if job, _, err := b.Wait(ctx, "stripe"); err != nil || job.State != backfill.StateDone || job.By != "dashboard" || job.Progress.New != 1 {
		t.Fatalf("b's backfill: %+v, %v", job, err)
	}

	// a was only frozen: at its next heartbeat it finds its run replaced
	// and stops it, rather than running a second backfill of the source.
	select {
	case cause := <-stopped:
		if cause == nil || !strings.Contains(cause.Error(), "another process took the source over") {
			t.Fatalf("a's run stopped for %v; want replaced", cause)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a's run still runs 30 s after b's replaced it (a heartbeat is due every 5 s)")
	}
	for name, j := range map[string]*backfill.Jobs{"a": a, "b": b} {
		if job, _, err := j.Get("stripe"); err != nil || job.State != backfill.StateDone || job.By != "dashboard" {
			t.Errorf("%s sees %+v, %v after a's end; want b's backfill, done", name, job, err)
		}
	}
}

// cutSaves is a real store whose SaveBackfill, while cut is set, hangs
// until released or its context ends, and then fails: the database cut
// from the process running a backfill, its writes left without an answer.
type cutSaves struct {
	*sqlite.Store
	cut      atomic.Bool
	release  chan struct{}
	answered atomic.Int32          // cut writes that have returned
	ended    atomic.Pointer[error] // why the last cut write's context ended
}

// openCutSaves opens a new SQLite store, not cut, closed when t ends.
func openCutSaves(t *testing.T) *cutSaves {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &cutSaves{Store: st, release: make(chan struct{})}
}

func (f *cutSaves) SaveBackfill(ctx context.Context, b store.Backfill) (bool, error) {
	if f.cut.Load() {
		defer f.answered.Add(1)
		select {
		case <-f.release:
		case <-ctx.Done():
			err := ctx.Err()
			f.ended.Store(&err)
		}
		return false, store.Unavailable("save backfill", errors.New("connection refused"))
	}
	return f.Store.SaveBackfill(ctx, b)
}

// TestJobsStopWhenCutOff: a process that cannot write its backfill to the
// database stops it before another process may take the source over
// (which another may once the backfill goes unheard for StaleAfter), so
// that two do not run: even while a write hangs unanswered, the run stops
// once the last write the database took is giveUpAfter old. The end it
// could not write is told as failed, cut off, by the process itself.
func TestJobsStopWhenCutOff(t *testing.T) {
	t.Parallel()
	log := openCutSaves(t)
	stopped := make(chan error, 1)
	hang := func(ctx context.Context, source string, from, to time.Time, dryRun bool, progress func(backfill.Progress)) (backfill.Progress, error) {
		<-ctx.Done()
		stopped <- context.Cause(ctx)
		return backfill.Progress{}, ctx.Err()
	}
	j := backfill.NewJobs(hang, backfill.JobsOptions{Log: log})
	backfill.SetPace(j, 20*time.Millisecond, 200*time.Millisecond)
	defer j.Stop(context.Background())
	if _, err := j.Start("stripe", time.Now().Add(-time.Hour), time.Time{}, false, "api"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // heartbeats written
	select {
	case cause := <-stopped:
		t.Fatalf("the run stopped while its heartbeats were written: %v", cause)
	default:
	}
	log.cut.Store(true)
	select {
	case cause := <-stopped:
		if cause == nil || !strings.Contains(cause.Error(), "could not be recorded") {
			t.Fatalf("the run stopped for %v; want cut off", cause)
		}
		if n := log.answered.Load(); n > 0 {
			t.Fatalf("the run stopped only after %d hanging write(s) were answered; want it stopped while they hang", n)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run still runs 30 s after its writes began hanging (it gives up 200 ms after the last one taken here)")
	}
	// Only now do the hanging writes get their answer.
	log.cut.Store(false)
	close(log.release)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if job, _, err := j.Wait(ctx, "stripe"); err != nil || job.State != backfill.StateFailed || !strings.Contains(job.Error, "could not be recorded") {
		t.Fatalf("after the cut: %+v, %v; want failed, cut off", job, err)
	}
}

// TestJobsStopKeepsItsDeadline: stopping the gateway while the database
// hangs does not wait out the writes of a backfill's end (up to 10 s each,
// retried): they are abandoned at Stop's deadline, and the end, not
// written, shows as interrupted after StaleAfter.
func TestJobsStopKeepsItsDeadline(t *testing.T) {
	t.Parallel()
	log := openCutSaves(t)
	started := make(chan struct{})
	hang := func(ctx context.Context, source string, from, to time.Time, dryRun bool, progress func(backfill.Progress)) (backfill.Progress, error) {
		close(started)
		<-ctx.Done()
		return backfill.Progress{}, ctx.Err()
	}
	j := backfill.NewJobs(hang, backfill.JobsOptions{Log: log})
	if _, err := j.Start("stripe", time.Now().Add(-time.Hour), time.Time{}, false, "api"); err != nil {
		t.Fatal(err)
	}
	<-started
	log.cut.Store(true)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	j.Stop(ctx)
	ended := log.ended.Load()
	if ended == nil || !errors.Is(*ended, context.Canceled) {
		t.Fatalf("the end's write ended with %v; want it abandoned at Stop's deadline (context canceled), not waited out", ended)
	}
}
