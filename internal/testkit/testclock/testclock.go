// Package testclock is a manual clock for tests: a component given its Now
// sees time move only when the test calls Add, so that what depends on
// time (staleness, windows, rate limits) is tested without waiting and
// without depending on the date.
package testclock

import (
	"sync"
	"time"
)

// Clock is a manual clock, safe for concurrent use. It has a wall clock
// (Now) and a monotonic one (Elapsed): Add moves both, Step only the
// wall clock, as an NTP step or a VM resume does.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	elapsed time.Duration
}

// New returns a clock that reads t until moved.
func New(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Add moves the clock by d.
func (c *Clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	c.elapsed += d
}

// Step moves the wall clock alone by d (backwards when negative).
func (c *Clock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// Elapsed is the monotonic clock: how far Add has moved the clock.
func (c *Clock) Elapsed() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.elapsed
}
