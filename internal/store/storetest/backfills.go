package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/store"
)

// runBackfills holds a backend's store.BackfillLog (the latest backfill
// of each source, shared by every process) to the same behaviour.
func runBackfills(t *testing.T, open Open) {
	runTable(t, []named[func(*testing.T, store.BackfillLog)]{
		{"RoundTrip", testBackfillRoundTrip},
		{"RunningRefusesAnother", testBackfillRunningRefuses},
		{"OnlyItsRunSaves", testBackfillOnlyItsRunSaves},
		{"ConcurrentStartsOneWins", testBackfillConcurrentStarts},
		{"ErrorTextKeptAlike", testBackfillErrorText},
	}, func(t *testing.T, fn func(*testing.T, store.BackfillLog)) {
		fn(t, open(t))
	})
}

// backfillAt is a running backfill of source started at at.
func backfillAt(source, run string, at time.Time) store.Backfill {
	at = at.UTC().Truncate(time.Microsecond)
	return store.Backfill{Source: source, Run: run, From: at.Add(-6 * time.Hour), By: "api", State: "running",
		Progress: []byte(`{"pages":0}`), StartedAt: at}
}

func startBackfill(t *testing.T, l store.BackfillLog, b store.Backfill, staleAfter time.Duration) {
	t.Helper()
	if got, err := l.StartBackfill(ctx(t), b, staleAfter); err != nil || got.Run != b.Run {
		t.Fatalf("StartBackfill(%s): %+v, %v; want it started", b.Run, got, err)
	}
}

func latestBackfill(t *testing.T, l store.BackfillLog, source string, staleAfter time.Duration) store.Backfill {
	t.Helper()
	b, ok, err := l.LatestBackfill(ctx(t), source, staleAfter)
	if err != nil || !ok {
		t.Fatalf("LatestBackfill(%s): %v, %v", source, ok, err)
	}
	return b
}

// sameBackfill says whether a and b hold the same, but for when they were
// heard from (the database's clock) and their staleness.
func sameBackfill(a, b store.Backfill) bool {
	a.HeardAt, a.Stale, b.HeardAt, b.Stale = time.Time{}, false, time.Time{}, false
	return fmt.Sprint(a) == fmt.Sprint(b)
}

func testBackfillRoundTrip(t *testing.T, l store.BackfillLog) {
	if _, ok, err := l.LatestBackfill(ctx(t), "stripe", time.Hour); ok || err != nil {
		t.Fatalf("before any: %v, %v; want none", ok, err)
	}
	now := time.Now()
	b := backfillAt("stripe", "r1", now)
	b.To, b.DryRun = b.StartedAt.Add(-time.Hour), true
	startBackfill(t, l, b, time.Hour)
	got := latestBackfill(t, l, "stripe", time.Hour)
	if !sameBackfill(got, b) || got.Stale {
		t.Fatalf("read back\n%+v\nwant\n%+v, not stale", got, b)
	}
	if d := got.HeardAt.Sub(now); d < -time.Minute || d > time.Minute {
		t.Fatalf("heard at %s, started at %s: want the database's now", got.HeardAt, now)
	}
	b.State, b.Progress, b.Error = "failed", []byte(`{"pages":3,"found":250}`), "stripe: 401 Unauthorized"
	b.FinishedAt = b.StartedAt.Add(time.Second)
	if saved, err := l.SaveBackfill(ctx(t), b); !saved || err != nil {
		t.Fatalf("SaveBackfill: %v, %v", saved, err)
	}
	if got := latestBackfill(t, l, "stripe", time.Hour); !sameBackfill(got, b) {
		t.Fatalf("after its end\n%+v\nwant\n%+v", got, b)
	}
	// An ended backfill is never stale, however long ago it was heard from.
	if got := latestBackfill(t, l, "stripe", 0); got.Stale {
		t.Fatalf("an ended backfill read as stale: %+v", got)
	}
	if _, ok, err := l.LatestBackfill(ctx(t), "paddle", time.Hour); ok || err != nil {
		t.Fatalf("another source: %v, %v; want none", ok, err)
	}
}

// A running backfill heard from within staleAfter keeps another from
// starting, and is what StartBackfill answers; one not heard from for
// longer (its process stopped) reads as stale and is replaced, and so is
// one that ended. Staleness is judged by the database's clock.
func testBackfillRunningRefuses(t *testing.T, l store.BackfillLog) {
	now := time.Now()
	startBackfill(t, l, backfillAt("stripe", "r1", now), time.Hour)
	got, err := l.StartBackfill(ctx(t), backfillAt("stripe", "r2", now.Add(time.Second)), time.Hour)
	if !errors.Is(err, store.ErrBackfillRunning) || got.Run != "r1" || got.State != "running" || got.Stale {
		t.Fatalf("a second start while r1 runs: %+v, %v; want r1, not stale, and ErrBackfillRunning", got, err)
	}
	if b := latestBackfill(t, l, "stripe", time.Hour); b.Run != "r1" || b.Stale {
		t.Fatalf("after the refused start the latest is %+v, want r1 not stale", b)
	}
	// r1's process is not heard from again: once more than staleAfter
	// has passed it reads as stale, and a start replaces it.
	time.Sleep(50 * time.Millisecond)
	if b := latestBackfill(t, l, "stripe", 10*time.Millisecond); b.Run != "r1" || !b.Stale {
		t.Fatalf("r1, not heard from for 50 ms, with 10 ms allowed: %+v, want stale", b)
	}
	startBackfill(t, l, backfillAt("stripe", "r3", now.Add(time.Minute)), 10*time.Millisecond)
	r3 := latestBackfill(t, l, "stripe", time.Hour)
	if r3.Run != "r3" {
		t.Fatalf("the latest is %s, want r3", r3.Run)
	}
	r3.State, r3.FinishedAt = "done", r3.StartedAt.Add(time.Second)
	if saved, err := l.SaveBackfill(ctx(t), r3); !saved || err != nil {
		t.Fatalf("SaveBackfill(r3): %v, %v", saved, err)
	}
	// Ended: the next starts however recently r3 was heard from.
	startBackfill(t, l, backfillAt("stripe", "r4", now.Add(2*time.Minute)), time.Hour)
}

// Only the latest run writes: a process whose backfill was replaced (it
// was taken for stopped) cannot write over the new one.
func testBackfillOnlyItsRunSaves(t *testing.T, l store.BackfillLog) {
	now := time.Now()
	old := backfillAt("stripe", "r1", now)
	startBackfill(t, l, old, time.Hour)
	time.Sleep(10 * time.Millisecond)
	startBackfill(t, l, backfillAt("stripe", "r2", now.Add(time.Minute)), time.Microsecond)
	old.State, old.Progress = "done", []byte(`{"pages":9}`)
	if saved, err := l.SaveBackfill(ctx(t), old); saved || err != nil {
		t.Fatalf("SaveBackfill of the replaced run: %v, %v; want not saved", saved, err)
	}
	if b := latestBackfill(t, l, "stripe", time.Hour); b.Run != "r2" || b.State != "running" {
		t.Fatalf("the latest is %s (%s), want r2 running", b.Run, b.State)
	}
}

// Several processes start a backfill of one source at once: one starts,
// the others are told it runs, and all name the same run.
func testBackfillConcurrentStarts(t *testing.T, l store.BackfillLog) {
	now := time.Now()
	const n = 8
	var wg sync.WaitGroup
	runs := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			got, err := l.StartBackfill(ctx(t), backfillAt("stripe", fmt.Sprintf("r%d", i), now), time.Hour)
			runs[i], errs[i] = got.Run, err
		})
	}
	wg.Wait()
	started := 0
	for i := range n {
		switch {
		case errs[i] == nil:
			started++
		case !errors.Is(errs[i], store.ErrBackfillRunning):
			t.Fatalf("start %d: %v", i, errs[i])
		}
	}
	latest := latestBackfill(t, l, "stripe", time.Hour)
	for i := range n {
		if runs[i] != latest.Run {
			t.Errorf("start %d answered run %s, the latest is %s", i, runs[i], latest.Run)
		}
	}
	if started != 1 {
		t.Fatalf("%d of %d concurrent starts started; want 1", started, n)
	}
}

// testBackfillErrorText: a backfill's error quotes what the provider's API
// answered, which may be cut in the middle of a character or hold any
// byte. Saving it never fails for that (PostgreSQL's text refuses such
// bytes), and both stores read back the same text: those bytes as U+FFFD.
func testBackfillErrorText(t *testing.T, l store.BackfillLog) {
	b := backfillAt("stripe", "r1", time.Now())
	b.By = "dashboard session \xff"
	if got, err := l.StartBackfill(ctx(t), b, time.Hour); err != nil || got.Run != b.Run {
		t.Fatalf("StartBackfill: %+v, %v", got, err)
	}
	b.State, b.Error = "failed", "stripe API: 502: <h1>\xe3\x82\xb5\xe3\x83\xbc\xe3\x83\x90\xe3\x83\xbc\xe3\x82\xa8\xe3\x83\xa9\xe3\x83\xbc\x00\xe3\x82"
	b.FinishedAt = b.StartedAt.Add(time.Second)
	if saved, err := l.SaveBackfill(ctx(t), b); !saved || err != nil {
		t.Fatalf("SaveBackfill: %v, %v", saved, err)
	}
	got := latestBackfill(t, l, "stripe", time.Hour)
	if want := "stripe API: 502: <h1>サーバーエラー\uFFFD\uFFFD"; got.Error != want || got.By != "dashboard session \uFFFD" {
		t.Fatalf("read back error %q by %q; want %q by the session, the bytes that are not text as U+FFFD", got.Error, got.By, want)
	}
}
