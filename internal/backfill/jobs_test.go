package backfill_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/backfill"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

// clock is a settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestJobsTakeOverFromAStoppedProcess: two processes (two Jobs, each on its
// own connection to one SQLite file). The first starts a backfill and stops
// being heard from (as a process that crashed: its clock, and so the time
// it last wrote, stays put). While that is recent the second refuses to
// start another; once it is older than the backfill's heartbeat allows,
// the second shows it failed (interrupted, not running: nothing runs it)
// and may start one, which the first, should it come back, cannot write
// over.
func TestJobsTakeOverFromAStoppedProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "anyhook.db")
	open := func() *sqlite.Store {
		st, err := sqlite.Open(t.Context(), path, sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	stA, stB := open(), open()
	start := time.Now()
	clockA, clockB := &clock{now: start}, &clock{now: start}

	hang := func(ctx context.Context, source string, from, to time.Time, dryRun bool, progress func(backfill.Progress)) (backfill.Progress, error) {
		progress(backfill.Progress{Pages: 1})
		<-ctx.Done()
		return backfill.Progress{Pages: 1}, ctx.Err()
	}
	a := backfill.NewJobs(hang, backfill.JobsOptions{Now: clockA.Now, Log: stA})
	if _, err := a.Start("stripe", start.Add(-time.Hour), time.Time{}, false, "api"); err != nil {
		t.Fatal(err)
	}

	quick := func(ctx context.Context, source string, from, to time.Time, dryRun bool, progress func(backfill.Progress)) (backfill.Progress, error) {
		return backfill.Progress{Pages: 1, Found: 1, New: 1}, nil
	}
	b := backfill.NewJobs(quick, backfill.JobsOptions{Now: clockB.Now, Log: stB})
	defer b.Stop()
	if job, ok := b.Get("stripe"); !ok || job.State != backfill.StateRunning || job.By != "api" {
		t.Fatalf("b sees %+v, %v; want a's backfill running", job, ok)
	}
	clockB.add(29 * time.Second)
	if job, err := b.Start("stripe", start, time.Time{}, false, "dashboard"); !errors.Is(err, backfill.ErrRunning) || job.By != "api" {
		t.Fatalf("b's start 29 s after a was last heard from: %+v, %v; want a's and ErrRunning", job, err)
	}

	clockB.add(2 * time.Second) // 31 s: past the 30 s a running backfill may go unheard
	job, ok := b.Get("stripe")
	if !ok || job.State != backfill.StateFailed || !strings.Contains(job.Error, "interrupted") {
		t.Fatalf("b sees %+v, %v; want a's backfill failed, interrupted", job, ok)
	}
	if _, err := b.Start("stripe", start, time.Time{}, false, "dashboard"); err != nil {
		t.Fatalf("b's start once a's is interrupted: %v", err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if job, _ := b.Wait(ctx, "stripe"); job.State != backfill.StateDone || job.By != "dashboard" || job.Progress.New != 1 {
		t.Fatalf("b's backfill: %+v", job)
	}

	// a comes back to end its backfill: the database keeps b's.
	a.Stop()
	for name, j := range map[string]*backfill.Jobs{"a": a, "b": b} {
		if job, _ := j.Get("stripe"); job.State != backfill.StateDone || job.By != "dashboard" {
			t.Errorf("%s sees %+v after a's end; want b's backfill, done", name, job)
		}
	}
}
