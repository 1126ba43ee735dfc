package delivery

import (
	"sync"
	"time"

	"github.com/anyhook/anyhook"
)

// Observer is told what the engine does, for metrics. Its methods are
// called from the workers and must not block.
type Observer interface {
	// Attempted is told of each attempt whose outcome was recorded, with
	// the delivery's new status (delivered; pending: it will be retried;
	// dead) and the attempt (its duration and outcome).
	Attempted(destination string, status anyhook.DeliveryStatus, a anyhook.Attempt)
	// Rescued is told of each expired claim the rescuer changed, in its
	// new status (pending, dead or held).
	Rescued(destination string, status anyhook.DeliveryStatus)
	// Released is told of each claim the engine gave back unsent
	// (Store.Release), and why (Release* constants).
	Released(destination, reason string)
}

// Why a claim was released: ReleaseLease, it came back with too little of
// its lease left to send it.
const ReleaseLease = "lease"

// DefaultFailingAfter is how many consecutive failed attempts make a
// destination failing when Options.FailingAfter is 0.
const DefaultFailingAfter = 5

// Health is what this process has seen of a destination lately.
type Health struct {
	Destination string
	// Streak is the number of consecutive failed attempts since the last
	// success.
	Streak int
	// Failing is set once Streak reached Options.FailingAfter, until the
	// next success.
	Failing bool
	// Since is when the current streak's first failure happened.
	Since time.Time
	// LastError is the error of the latest failed attempt.
	LastError string
	// LastSuccess is when the latest successful attempt ended.
	LastSuccess time.Time
}

// health tracks consecutive failures per destination, for the pages and
// the log: a destination turns failing exactly once per streak and
// recovers at its next success. (Alerts follow incidents instead:
// internal/incident.)
type health struct {
	after int

	mu sync.Mutex
	m  map[string]*Health
}

func newHealth(after int) *health {
	if after <= 0 {
		after = DefaultFailingAfter
	}
	return &health{after: after, m: map[string]*Health{}}
}

// record notes one attempt's result at now and reports whether the
// destination just turned failing or just recovered, with its health
// before the change was cleared.
func (h *health) record(dest string, ok bool, errText string, now time.Time) (snap Health, failing, recovered bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st := h.m[dest]
	if st == nil {
		st = &Health{Destination: dest}
		h.m[dest] = st
	}
	if ok {
		recovered = st.Failing
		snap = *st
		st.Streak, st.Failing, st.Since, st.LastSuccess = 0, false, time.Time{}, now
		return snap, false, recovered
	}
	if st.Streak == 0 {
		st.Since = now
	}
	st.Streak++
	st.LastError = errText
	if !st.Failing && st.Streak >= h.after {
		st.Failing, failing = true, true
	}
	return *st, failing, false
}

func (h *health) snapshot() map[string]Health {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[string]Health, len(h.m))
	for k, v := range h.m {
		out[k] = *v
	}
	return out
}

// Health reports what this process has seen of each destination it has
// attempted: failure streaks and the latest success. Destinations not yet
// attempted are absent.
func (e *Engine) Health() map[string]Health { return e.health.snapshot() }

// observe feeds one recorded attempt to the observer, OnAttempt and the
// health tracker.
func (e *Engine) observe(dest, eventID string, status anyhook.DeliveryStatus, a anyhook.Attempt) {
	if e.opt.Observer != nil {
		e.opt.Observer.Attempted(dest, status, a)
	}
	if e.opt.OnAttempt != nil {
		e.opt.OnAttempt(dest, eventID, status, a)
	}
	ok := status == anyhook.StatusDelivered
	snap, failing, recovered := e.health.record(dest, ok, errorWithOutcome(a), a.StartedAt.Add(a.Duration))
	switch {
	case failing:
		e.log.Warn("destination failing", "destination", dest, "streak", snap.Streak, "since", snap.Since, "err", snap.LastError)
	case recovered:
		e.log.Info("destination recovered", "destination", dest, "failed_attempts", snap.Streak, "since", snap.Since)
	}
}

// errorWithOutcome is a failed attempt's error as health reports it (the
// overview, the log): with whether the handler may have run
// when no status came back.
func errorWithOutcome(a anyhook.Attempt) string {
	switch a.Outcome {
	case anyhook.OutcomeNoAnswer:
		return a.Error + " (sent, no answer: the handler may have run)"
	case anyhook.OutcomeNotSent:
		return a.Error + " (not sent: the handler did not run)"
	}
	return a.Error
}
