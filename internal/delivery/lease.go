package delivery

import (
	"context"
	"slices"
	"time"

	"github.com/anyhook/anyhook/internal/store"
	"go.opentelemetry.io/otel/trace"
)

// A claim's lease runs from the store's clock at the claim (PostgreSQL:
// now() in the claim's transaction), which a worker cannot see: the
// database may stall between that moment and the claim's answer, and the
// lease is spent meanwhile. So the engine keeps its own deadline for each
// claim, measured on its clock from before it asked for the claim (before
// the claim, or the ingest batch that claimed, went to the store): the
// lease can only have started later. An attempt is sent only while
// enough of that deadline is left, with a timeout cut to what is left,
// and a claim that came back too late is released (Store.Release), never
// sent: no attempt is in flight once its lease has ended, when the
// rescuer may hand the delivery out again.

// leaseMargin is how long before the end of a lease of length lease the
// engine's deadline for it falls: a tenth of the lease and at least
// 250 ms (the store's clock and the engine's may run apart a little, and
// a destination sees an abandoned request end a moment after the engine
// does), but never more than half of a very short lease.
func leaseMargin(lease time.Duration) time.Duration {
	return min(max(lease/10, 250*time.Millisecond), lease/2)
}

// deadline is when the attempts of d's claims asked for at asked must
// have ended.
func (e *Engine) deadline(d *Destination, asked time.Time) time.Time {
	lease := e.Lease(d)
	return asked.Add(lease - leaseMargin(lease))
}

// minLeft is the least of a claim's deadline that must be left to send
// it with timeout, of a lease of length lease: a second, or the timeout
// when shorter, or half of what a claim has at best when the lease is so
// short that a second would release every claim.
func minLeft(timeout, lease time.Duration) time.Duration {
	return min(timeout, time.Second, (lease-leaseMargin(lease))/2)
}

// sendTimeout is the timeout of an attempt of d that starts at now on a
// claim whose deadline is deadline: d's timeout, or what is left of the
// deadline when less. ok is false when less than minLeft is left: the
// claim is to be released, not sent.
func (e *Engine) sendTimeout(d *Destination, deadline, now time.Time) (timeout time.Duration, ok bool) {
	left := deadline.Sub(now)
	if left < minLeft(d.Timeout, e.Lease(d)) {
		return left, false
	}
	return min(d.Timeout, left), true
}

// canSend reports whether a claim of d whose deadline is deadline may
// still be sent at now.
func (e *Engine) canSend(d *Destination, deadline, now time.Time) bool {
	_, ok := e.sendTimeout(d, deadline, now)
	return ok
}

// releaseTimeout bounds one Release or Renew call.
const releaseTimeout = 30 * time.Second

// late handles cs, claims of d that came back with left of their
// deadline, too little to send them: a store that is slow to claim
// (an ordered claim's query, a stall) would otherwise have each claim
// released and claimed again, late again, for ever. They are renewed
// (Store.Renew) from a fresh deadline, taken before the renewal was
// asked for, and sent if it came back in time. Those it did not come
// back in time for are released, and the dispatcher holds off claiming
// for a while (slots.released): the store is slow to answer anything.
// A claim a rescuer took first is neither sent nor released. cs hold
// slots of d, which late gives back.
func (e *Engine) late(ctx context.Context, d *Destination, cs []store.Claim, span trace.SpanContext, left time.Duration) {
	sl := e.slots[d.Name]
	asked := e.opt.Now()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	renewed, err := e.st.Renew(rctx, fences(cs), e.Lease(d))
	cancel()
	deadline := e.deadline(d, asked)
	var keep []store.Claim
	for _, c := range cs {
		switch {
		case err != nil || slices.Contains(renewed, c.Delivery.ID):
			keep = append(keep, c) // a failed renewal may have renewed it
		default:
			e.log.Warn("claim not sent: too little of its lease was left, and a rescuer took it first",
				"delivery_id", c.Delivery.ID, "event_id", c.Event.ID, "destination", d.Name, "attempt", c.Delivery.AttemptCount, "lease_left", left.String())
			sl.sent()
			sl.finish()
		}
	}
	if now := e.opt.Now(); err != nil || !e.canSend(d, deadline, now) {
		if err == nil {
			left = deadline.Sub(now)
		}
		sl.released(e.Lease(d)) // before the release wakes the dispatcher
		e.release(ctx, d, keep, left)
		for range keep {
			sl.sent()
			sl.finish()
		}
		return
	}
	sl.sending()
	for _, c := range keep {
		e.sends.Go(func() {
			defer sl.finish()
			e.deliver(ctx, d, c, deadline, span, sl.sent)
		})
	}
}

// fences are the (delivery, attempt) pairs of cs.
func fences(cs []store.Claim) []store.Release {
	rs := make([]store.Release, len(cs))
	for i, c := range cs {
		rs[i] = store.Release{DeliveryID: c.Delivery.ID, Attempt: c.Delivery.AttemptCount, Probe: c.Probe}
	}
	return rs
}

// release gives back cs, claims of d that came back with left of their
// deadline, too little to send them, and wakes d's dispatcher to claim
// them again. A claim a rescuer took first (its lease ended before the
// release) is not sent either: the rescuer's policy decides. A release
// that fails leaves its claims to their leases.
func (e *Engine) release(ctx context.Context, d *Destination, cs []store.Claim, left time.Duration) {
	if len(cs) == 0 {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	released, err := e.st.Release(rctx, fences(cs))
	if err != nil {
		e.log.Error("releasing claims with too little lease left failed; not sent, their leases will expire and the rescuer decides",
			"destination", d.Name, "claims", len(cs), "lease_left", left.String(), "err", err)
		return
	}
	for _, c := range cs {
		args := []any{"delivery_id", c.Delivery.ID, "event_id", c.Event.ID, "destination", d.Name, "attempt", c.Delivery.AttemptCount, "lease_left", left.String()}
		if !slices.Contains(released, c.Delivery.ID) {
			e.log.Warn("claim not sent: too little of its lease was left, and a rescuer took it first", args...)
			continue
		}
		e.log.Info("claim released unsent: too little of its lease was left; pending again", args...)
		if e.opt.Observer != nil {
			e.opt.Observer.Released(d.Name, ReleaseLease)
		}
	}
	if len(released) > 0 {
		e.wakeOne(d.Name)
	}
}
