package ingest

import (
	"sync"
	"sync/atomic"
	"time"
)

// lateness tells whether the requests recorded recently were late: in
// the last window of lateWindow, at least one in lateShare (and lateMin
// or more) of them took longer than the admission bound from their
// body's arrival to their commit, though they waited behind at least one
// timed batch. Admission estimates the wait from the store's commit
// rate, but past the CPU's capacity a request also waits for a CPU at
// every step, and the accepted took two to three times the bound
// (BENCHMARKS.md, "Admission that sees the requests late"). What was
// measured late halves the bound for the next window.
//
// A request that waited behind fewer than a timed batch is not counted:
// on a slow disk a trickle is slow by itself, not behind a queue. A
// queue that drains (nothing in progress) was a burst, not a standing
// queue: the verdict and the window start over. A provider's burst on an
// idle gateway is admitted whole before any of it is recorded, so it is
// never shed for its own lateness.
type lateness struct {
	// Times are durations since epoch: on the monotonic clock when Now
	// has one, so a step of the wall clock neither holds a verdict nor
	// ends one.
	epoch time.Time

	mu      sync.Mutex
	start   time.Duration // when the window began
	n, over int           // requests recorded in it, and those late behind a queue
	lateAt  atomic.Int64  // the end of the last late window; 0: none
}

const (
	lateWindow = 100 * time.Millisecond
	lateShare  = 10
	lateMin    = 3
)

// recorded counts a request recorded at now that took took; queued: it
// began behind at least one timed batch.
func (l *lateness) recorded(now time.Time, took, bound time.Duration, queued bool) {
	t := now.Sub(l.epoch)
	l.mu.Lock()
	defer l.mu.Unlock()
	if t < l.start || t-l.start >= lateWindow {
		if l.over >= lateMin && l.over*lateShare >= l.n {
			// As of the window's end: a window that ended long before
			// this request (a burst a second ago) judges nothing now.
			l.lateAt.Store(int64(l.start + lateWindow))
		}
		l.start, l.n, l.over = t, 0, 0
	}
	l.n++
	if took > bound && queued {
		l.over++
	}
}

// drained starts over: nothing is in progress at now.
func (l *lateness) drained(now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lateAt.Store(0)
	l.start, l.n, l.over = now.Sub(l.epoch), 0, 0
}

// late reports whether a window that ended within lateWindow of now was
// late.
func (l *lateness) late(now time.Time) bool {
	at := time.Duration(l.lateAt.Load())
	d := now.Sub(l.epoch) - at
	return at != 0 && d > -lateWindow && d <= lateWindow
}
