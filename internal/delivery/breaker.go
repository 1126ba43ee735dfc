package delivery

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anyhook/anyhook/internal/store"
)

// The automatic pause (auto_pause, a circuit breaker). A destination that
// opted in trips when its recent attempts break its rule; the trip is
// stored (Store.TripBreaker), so every process sharing the store stops
// claiming for it, and every probe_every one process tries the oldest due
// delivery once (Store.ClaimProbe). The first probe that succeeds resets
// the breaker, and delivery goes on in order. A failed probe leaves its
// delivery pending and does not count towards max_attempts; claims the
// engine holds when the breaker trips are given back unsent
// (Store.Release). Destinations without auto_pause have no breaker: the
// hot path pays a nil map lookup.

// AutoPause is a destination's breaker rule: exactly one of
// ConsecutiveFailures or FailureRate (with Window) is set.
type AutoPause struct {
	// ConsecutiveFailures trips the breaker after this many failed
	// attempts in a row.
	ConsecutiveFailures int
	// FailureRate trips it when at least this share (0 < r ≤ 1) of the
	// last Window attempts failed; it is not judged before Window
	// attempts were made.
	FailureRate float64
	Window      int
	// ProbeEvery is how often a tripped destination is tried with one
	// delivery; default DefaultProbeEvery.
	ProbeEvery time.Duration
}

// DefaultProbeEvery is AutoPause.ProbeEvery when it is 0.
const DefaultProbeEvery = 30 * time.Second

// ReleaseBreaker is why a claim was released when its destination's
// breaker tripped before it was sent.
const ReleaseBreaker = "breaker"

// breaker is what this process counts of one destination's attempts
// against its rule, and whether the breaker is tripped as it last knew
// (from its own trip, or from the store at each poll).
type breaker struct {
	rule    AutoPause
	tripped atomic.Bool

	mu     sync.Mutex
	streak int    // consecutive failures
	ring   []bool // the last Window attempts (FailureRate): failed or not
	next   int    // where the next attempt goes in ring
	seen   int    // attempts in ring, up to len(ring)
	failed int    // failures in ring
}

func newBreaker(rule AutoPause) *breaker {
	if rule.ProbeEvery <= 0 {
		rule.ProbeEvery = DefaultProbeEvery
	}
	b := &breaker{rule: rule}
	if rule.FailureRate > 0 {
		b.ring = make([]bool, rule.Window)
	}
	return b
}

// record counts one attempt (ok: it succeeded) and reports whether the
// rule now trips the breaker, and why.
func (b *breaker) record(ok bool) (trip bool, reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if ok {
		b.streak = 0
	} else {
		b.streak++
	}
	if b.ring != nil {
		if b.seen == len(b.ring) && b.ring[b.next] {
			b.failed--
		}
		b.ring[b.next] = !ok
		if !ok {
			b.failed++
		}
		b.next = (b.next + 1) % len(b.ring)
		b.seen = min(b.seen+1, len(b.ring))
		if b.seen == len(b.ring) && float64(b.failed) >= b.rule.FailureRate*float64(len(b.ring)) {
			return true, fmt.Sprintf("%d of the last %d attempts failed (auto_pause: failure_rate %s)",
				b.failed, len(b.ring), strconv.FormatFloat(b.rule.FailureRate, 'f', -1, 64))
		}
		return false, ""
	}
	if b.rule.ConsecutiveFailures > 0 && b.streak >= b.rule.ConsecutiveFailures {
		return true, fmt.Sprintf("%d consecutive failed attempts (auto_pause: consecutive_failures)", b.streak)
	}
	return false, ""
}

// clear forgets the attempts counted: a trip or a reset starts over.
func (b *breaker) clear() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.streak, b.next, b.seen, b.failed = 0, 0, 0, 0
	clear(b.ring)
}

// set records what this process now knows of the breaker and reports
// whether that changed.
func (b *breaker) set(tripped bool) bool {
	if b.tripped.Swap(tripped) == tripped {
		return false
	}
	b.clear()
	return true
}

// Paused reports whether destination's breaker is tripped, as this
// process last knew.
func (e *Engine) Paused(destination string) bool {
	b := e.breakers[destination]
	return b != nil && b.tripped.Load()
}

// attempted feeds one recorded attempt of d, which ended at at, to d's
// breaker, if it has one: a probe that succeeded resets it; an ordinary
// attempt counts against the rule, unless the breaker tripped meanwhile
// (the attempts in flight at a trip end after it).
func (e *Engine) attempted(ctx context.Context, d *Destination, probe, ok bool, at time.Time) {
	b := e.breakers[d.Name]
	switch {
	case b == nil:
	case probe:
		if ok {
			e.resetBreaker(ctx, d, b, at)
		}
	case b.tripped.Load():
	default:
		if trip, reason := b.record(ok); trip {
			e.trip(ctx, d, b, reason, at)
		}
	}
}

// breakerTimeout bounds one write of a breaker's state.
const breakerTimeout = 30 * time.Second

// trip stores d's breaker tripped at at, for reason. Another worker or
// process may have tripped it first: then this one only learns of it.
// A failed write leaves the breaker as it was (the next failure tries
// again).
func (e *Engine) trip(ctx context.Context, d *Destination, b *breaker, reason string, at time.Time) {
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), breakerTimeout)
	defer cancel()
	changed, err := e.st.TripBreaker(tctx, d.Name, at, reason, at.Add(b.rule.ProbeEvery))
	if err != nil {
		e.log.Error("storing the destination's automatic pause failed; it goes on being delivered to", "destination", d.Name, "reason", reason, "err", err)
		return
	}
	b.set(true)
	if !changed {
		return
	}
	e.log.Warn("destination paused automatically (auto_pause); its deliveries wait, one is tried every probe_every",
		"destination", d.Name, "reason", reason, "probe_every", b.rule.ProbeEvery.String())
	if e.opt.OnBreaker != nil {
		e.opt.OnBreaker(d.Name, true, at)
	}
}

// resetBreaker stores d's breaker reset after a probe succeeded at at,
// and wakes its dispatcher.
func (e *Engine) resetBreaker(ctx context.Context, d *Destination, b *breaker, at time.Time) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), breakerTimeout)
	defer cancel()
	changed, err := e.st.ResetBreaker(rctx, d.Name)
	if err != nil {
		e.log.Error("a probe succeeded but resuming the destination failed; the next probe tries again", "destination", d.Name, "err", err)
		return
	}
	b.set(false)
	if changed {
		e.log.Info("destination resumed: a probe succeeded (auto_pause)", "destination", d.Name)
		if e.opt.OnBreaker != nil {
			e.opt.OnBreaker(d.Name, false, at)
		}
	}
	e.wakeOne(d.Name)
}

// probe asks the store for d's breaker and, when a probe is due, claims
// it (Store.ClaimProbe): so this process also learns of a trip or a
// reset made elsewhere (another process, a person's resume). It returns
// the probe's claims, at most one, which took one of d's slots, and
// when they were asked for.
func (e *Engine) probe(ctx context.Context, d *Destination, b *breaker) ([]store.Claim, time.Time) {
	sl := e.slots[d.Name]
	if sl.take(1) == 0 {
		return nil, time.Time{} // the next poll asks
	}
	asked := e.opt.Now()
	cs, tripped, err := e.st.ClaimProbe(ctx, d.Name, d.InOrder, asked, b.rule.ProbeEvery, e.Lease(d))
	if err != nil {
		sl.giveBack(1, false)
		if ctx.Err() == nil {
			e.log.Warn("probe failed", "destination", d.Name, "err", err)
		}
		return nil, time.Time{}
	}
	sl.giveBack(1-len(cs), false)
	if b.set(tripped) {
		if tripped {
			e.log.Info("destination paused automatically, as the store says (auto_pause: tripped by another process or before a restart): its deliveries wait", "destination", d.Name)
		} else {
			e.log.Info("destination's automatic pause was cleared (a person's resume, or another process's probe): delivering again", "destination", d.Name)
			e.wakeOne(d.Name)
		}
	}
	return cs, asked
}

// releaseTripped gives back c, a claim of d held when d's breaker
// tripped, unsent: it waits, pending, with the others.
func (e *Engine) releaseTripped(ctx context.Context, d *Destination, c store.Claim) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	log := e.log.With("delivery_id", c.Delivery.ID, "event_id", c.Event.ID, "destination", d.Name, "attempt", c.Delivery.AttemptCount)
	released, err := e.st.Release(rctx, fences([]store.Claim{c}))
	switch {
	case err != nil:
		log.Error("releasing a claim of a destination paused automatically failed; not sent, its lease will expire and the rescuer decides", "err", err)
	case len(released) == 0:
		log.Warn("claim not sent: its destination was paused automatically, and a rescuer took it first")
	default:
		log.Debug("claim released unsent: its destination was paused automatically (auto_pause)")
		if e.opt.Observer != nil {
			e.opt.Observer.Released(d.Name, ReleaseBreaker)
		}
	}
}
