package lifecycle

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// blocker is a run function that reports when its context ends, then
// waits for release before it returns.
type blocker struct {
	calls    atomic.Int32
	ended    chan bool // whether Stop ended the context
	release  chan struct{}
	finished atomic.Bool
}

func newBlocker() *blocker {
	return &blocker{ended: make(chan bool, 1), release: make(chan struct{})}
}

func (b *blocker) run(ctx context.Context) {
	b.calls.Add(1)
	<-ctx.Done()
	b.ended <- Stopped(ctx)
	<-b.release
	b.finished.Store(true)
}

func TestStopWaitsForRun(t *testing.T) {
	t.Parallel()
	var r Runner
	b := newBlocker()
	if !r.Start(t.Context(), b.run) {
		t.Fatal("first Start did not start")
	}
	stopped := make(chan bool)
	go func() {
		r.Stop()
		stopped <- b.finished.Load()
	}()
	if byStop := <-b.ended; !byStop {
		t.Error("Stopped(ctx) = false after Stop")
	}
	select {
	case <-stopped:
		t.Fatal("Stop returned while run was still running")
	default:
	}
	close(b.release)
	if !<-stopped {
		t.Error("Stop returned before run did")
	}
}

func TestConcurrentStop(t *testing.T) {
	t.Parallel()
	var r Runner
	b := newBlocker()
	r.Start(t.Context(), b.run)
	const n = 8
	results := make(chan bool, n)
	for range n {
		go func() {
			r.Stop()
			results <- b.finished.Load()
		}()
	}
	<-b.ended
	close(b.release)
	for range n {
		if !<-results {
			t.Error("a concurrent Stop returned before run did")
		}
	}
	if got := b.calls.Load(); got != 1 {
		t.Errorf("run called %d times", got)
	}
}

func TestStopBeforeStart(t *testing.T) {
	t.Parallel()
	var r Runner
	r.Stop() // nothing to wait for
	r.Stop()
	b := newBlocker()
	if r.Start(t.Context(), b.run) {
		t.Error("Start after Stop started")
	}
	if got := b.calls.Load(); got != 0 {
		t.Errorf("run called %d times after Stop", got)
	}
}

func TestDoubleStart(t *testing.T) {
	t.Parallel()
	var r Runner
	b := newBlocker()
	const n = 8
	var wg sync.WaitGroup
	var started atomic.Int32
	for range n {
		wg.Go(func() {
			if r.Start(t.Context(), b.run) {
				started.Add(1)
			}
		})
	}
	wg.Wait()
	if got := started.Load(); got != 1 {
		t.Fatalf("%d of %d concurrent Starts started", got, n)
	}
	close(b.release)
	r.Stop()
	if got := b.calls.Load(); got != 1 {
		t.Errorf("run called %d times", got)
	}
	if r.Start(t.Context(), b.run) {
		t.Error("Start after Stop started")
	}
}

func TestParentCancelEndsRun(t *testing.T) {
	t.Parallel()
	var r Runner
	b := newBlocker()
	ctx, cancel := context.WithCancel(t.Context())
	r.Start(ctx, b.run)
	cancel()
	if byStop := <-b.ended; byStop {
		t.Error("Stopped(ctx) = true when the parent was cancelled")
	}
	close(b.release)
	r.Stop() // run has returned or is returning: Stop waits for it
	if !b.finished.Load() {
		t.Error("Stop returned before run did")
	}
}
