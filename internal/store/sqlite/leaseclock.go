package sqlite

import (
	"context"
	"time"

	"github.com/anyhook/anyhook/internal/store"
)

// SQLite is used by one process, so its leases need not be measured on
// a clock the processes share: they are on the lease clock, the wall
// clock read at Open and moved on by the monotonic clock. A step of the
// wall clock (an NTP step, a VM resumed after a pause) then neither
// expires a live attempt's lease nor keeps an expired one from its
// rescue. A claim's lease end and claim time (lease_until, claimed_at)
// are written on it; what the engine and the operator read as dates
// (arrival, retries, attempts) stays on the wall clock.

// startLeaseClock anchors the lease clock on the store's clock now;
// elapsed is its monotonic source (nil: Go's monotonic clock, since now).
func (s *Store) startLeaseClock(elapsed func() time.Duration) {
	s.anchor = s.now()
	if elapsed == nil {
		start := time.Now()
		elapsed = func() time.Duration { return time.Since(start) }
	}
	s.elapsed, s.elapsed0 = elapsed, elapsed()
}

// leaseNow reads the lease clock.
func (s *Store) leaseNow() time.Time {
	return s.anchor.Add(s.elapsed() - s.elapsed0)
}

// restartLeases, at Open, restarts from now the claims an earlier run
// left that seem to have been made after now: that run's lease clock ran
// ahead of this one's (the wall clock was stepped back), and their
// leases would otherwise last for the step on top. Each keeps its lease's
// length. A claim left with its lease ended, or ending within its length,
// is left to its lease: that run is gone, and so are its requests.
func (s *Store) restartLeases(ctx context.Context) error {
	now := micros(s.leaseNow())
	_, err := s.w.ExecContext(ctx, `UPDATE deliveries SET lease_until = ? + (lease_until - claimed_at), claimed_at = ?
		WHERE status = 'delivering' AND claimed_at > ?`, now, now, now)
	if err != nil {
		return store.Unavailable("restart leases", err)
	}
	return nil
}
