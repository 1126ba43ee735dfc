package delivery

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// Pull destinations (docs/pull.md). Their deliveries wait in the store, as
// a paused destination's do, until a consumer leases them through the
// API: a lease is the engine's claim (Store.Claim or ClaimInOrder, the
// attempt counted, a lease in the store), an ack or a nack is the
// attempt's outcome (Store.Finish, fenced by delivery and attempt), an
// extend is Store.Renew. A lease that runs out is an expired claim like a
// push worker's: the rescuer applies the destination's on_stale_claim.
// So order, filters, pause, replay, dead and alerts are the engine's
// own, unchanged.

// Bounds of one lease request.
const (
	MaxPullBatch = 100
	MaxPullWait  = 60 * time.Second
	MinPullLease = time.Second
	MaxPullLease = time.Hour
)

// Errors of the pull API.
var (
	// ErrNotPull: the destination is unknown or not a pull destination.
	ErrNotPull = errors.New("not a pull destination")
	// ErrLeaseEnded: the lease named ended (its time ran out, or the
	// gateway took the delivery back: another attempt, held, finished):
	// the consumer's ack, nack or extend comes too late.
	ErrLeaseEnded = errors.New("the lease ended")
)

// Leased is one delivery handed to a consumer.
type Leased struct {
	store.Claim
	// Header is what a push delivery's request would carry: the event's
	// headers, the X-AnyHook-* values and, with a signing secret, the
	// webhook-* signature made at lease time.
	Header http.Header
	// Until is when the lease ends, on the gateway's clock: measured from
	// before the claim, so the store's lease ends a little later.
	Until time.Time
}

// LeaseRef names one lease: the delivery and its attempt (the fence).
// EventID finds the delivery.
type LeaseRef struct {
	EventID    string
	DeliveryID string
	Attempt    int
}

// pullWaiters wakes the lease requests waiting on one destination, and
// spares the store their polls: while one of them found nothing within
// the last poll interval and nothing woke them since, the others do not
// ask again (many idle consumers cost one claim a poll, not one each).
type pullWaiters struct {
	mu    sync.Mutex
	ch    chan struct{} // closed at the next wake
	empty time.Time     // when a claim last found nothing; zero after a wake
}

// found notes what a claim at at found.
func (w *pullWaiters) found(n int, at time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if n == 0 {
		w.empty = at
	}
}

// polledWithin says whether a claim found nothing less than d ago, with
// no wake since: claiming again now would find nothing either.
func (w *pullWaiters) polledWithin(d time.Duration) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return !w.empty.IsZero() && time.Since(w.empty) < d
}

func (w *pullWaiters) wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

func (w *pullWaiters) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.empty = time.Time{}
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}

// settleSubs tells the streams of one destination (the API's streaming
// lease) which of their leases this process settled, so that a stream
// can lease more in their place. A stream that misses one (its channel
// full) frees that slot when the lease ends.
type settleSubs struct {
	mu   sync.Mutex
	subs map[chan LeaseRef]bool
}

func (s *settleSubs) tell(ref LeaseRef) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.subs {
		select {
		case ch <- ref:
		default:
		}
	}
}

// Settled subscribes to the leases of the pull destination name this
// process settles (ack or nack); stop ends the subscription.
func (e *Engine) Settled(name string) (refs <-chan LeaseRef, stop func()) {
	s := e.pullSettled[name]
	ch := make(chan LeaseRef, MaxPullBatch)
	if s == nil {
		return ch, func() {}
	}
	s.mu.Lock()
	if s.subs == nil {
		s.subs = map[chan LeaseRef]bool{}
	}
	s.subs[ch] = true
	s.mu.Unlock()
	return ch, func() {
		s.mu.Lock()
		delete(s.subs, ch)
		s.mu.Unlock()
	}
}

// pullDest is the pull destination named name.
func (e *Engine) pullDest(name string) (*Destination, error) {
	d := e.dests[name]
	if d == nil || !d.Pull {
		return nil, fmt.Errorf("destination %q: %w", name, ErrNotPull)
	}
	return d, nil
}

// LeasePull leases up to max due deliveries of the pull destination name for
// lease, waiting up to wait for one to come due: new deliveries of this
// process wake it at once; those another process records (PostgreSQL) are
// seen at the next poll (Options.PollInterval). None by the end of wait
// is an empty answer, not an error.
func (e *Engine) LeasePull(ctx context.Context, name string, max int, wait, lease time.Duration) ([]Leased, error) {
	d, err := e.pullDest(name)
	if err != nil {
		return nil, err
	}
	if max < 1 || max > MaxPullBatch || wait < 0 || wait > MaxPullWait || lease < MinPullLease || lease > MaxPullLease {
		return nil, fmt.Errorf("%w: max 1..%d, wait 0..%s, lease %s..%s", anyhook.ErrInvalid, MaxPullBatch, MaxPullWait, MinPullLease, MaxPullLease)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	w := e.pullWait[name]
	for claim := true; ; {
		select {
		case <-e.pullStop:
			return nil, nil // shutting down: nothing more is leased
		default:
		}
		// Before the claim: a wake between the claim and the wait is not
		// lost. A wake since the tick decided not to claim clears what
		// that decision rested on: ask again.
		woken := w.wait()
		claim = claim || !w.polledWithin(e.opt.PollInterval/2)
		if claim {
			asked := e.opt.Now()
			var cs []store.Claim
			if d.InOrder {
				cs, err = e.st.ClaimInOrder(ctx, name, max, lease)
			} else {
				cs, err = e.st.Claim(ctx, name, max, lease)
			}
			if err != nil {
				return nil, err
			}
			w.found(len(cs), time.Now())
			if out := e.leased(ctx, d, cs, asked.Add(lease)); len(out) > 0 {
				return out, nil
			}
		}
		poll := time.NewTimer(e.opt.PollInterval)
		claim = true
		select {
		case <-woken:
		case <-poll.C:
			// Another request's claim found nothing since: this one's
			// would too (deliveries of this process wake it).
			claim = !w.polledWithin(e.opt.PollInterval / 2)
		case <-timer.C:
			poll.Stop()
			return nil, nil
		case <-ctx.Done():
			poll.Stop()
			return nil, ctx.Err()
		case <-e.pullStop:
			poll.Stop()
			return nil, nil // shutting down: what is leased is answered
		}
		poll.Stop()
	}
}

// leased makes claims cs leases ending at until. A claim whose body
// retention pruned is refused (dead), as a push worker refuses it.
func (e *Engine) leased(ctx context.Context, d *Destination, cs []store.Claim, until time.Time) []Leased {
	out := make([]Leased, 0, len(cs))
	now := e.opt.Now()
	for _, c := range cs {
		if c.Event.BodyPruned {
			e.refuse(ctx, d, c, now, "not sent: the event's body was pruned by retention (log.retention); nothing can be sent in its place")
			continue
		}
		out = append(out, Leased{Claim: c, Header: e.header(d, c, now), Until: until})
	}
	return out
}

// held reads the delivery ref names and checks that its lease still
// holds: the delivery of destination d, delivering, at ref's attempt.
// The lease's end is not compared with any clock here: the store's
// lease clock is its own (SQLite's ignores wall-clock steps; PostgreSQL's
// is the database's), so a lease ends when the rescuer takes the
// delivery back, which changes its status or attempt. The rescuer can
// still do so between this read and the write that follows; the write is
// fenced by the attempt, so that one is refused too.
func (e *Engine) held(ctx context.Context, d *Destination, ref LeaseRef) (anyhook.Delivery, error) {
	ev, err := e.st.Event(ctx, ref.EventID)
	if errors.Is(err, anyhook.ErrNotFound) {
		return anyhook.Delivery{}, fmt.Errorf("lease %s: %w", ref.DeliveryID, anyhook.ErrNotFound)
	}
	if err != nil {
		return anyhook.Delivery{}, err
	}
	for _, dl := range ev.Deliveries {
		if dl.ID != ref.DeliveryID || dl.Destination != d.Name {
			continue
		}
		if dl.Status != anyhook.StatusDelivering || dl.AttemptCount != ref.Attempt {
			return dl, fmt.Errorf("lease %s (attempt %d): %w (now %s, attempt %d)", ref.DeliveryID, ref.Attempt, ErrLeaseEnded, dl.Status, dl.AttemptCount)
		}
		return dl, nil
	}
	return anyhook.Delivery{}, fmt.Errorf("lease %s of destination %s: %w", ref.DeliveryID, d.Name, anyhook.ErrNotFound)
}

// Held says which of refs, leases of the pull destination name, still
// hold: not settled, not taken back by the rescuer (the API's stream
// counts its window by it).
func (e *Engine) Held(ctx context.Context, name string, refs []LeaseRef) (map[LeaseRef]bool, error) {
	d, err := e.pullDest(name)
	if err != nil {
		return nil, err
	}
	out := make(map[LeaseRef]bool, len(refs))
	for _, ref := range refs {
		_, err := e.held(ctx, d, ref)
		switch {
		case err == nil:
			out[ref] = true
		case errors.Is(err, ErrLeaseEnded), errors.Is(err, anyhook.ErrNotFound):
		default:
			return nil, err
		}
	}
	return out, nil
}

// Ack records the leased delivery ref as delivered.
func (e *Engine) Ack(ctx context.Context, name string, ref LeaseRef, by string) error {
	return e.settle(ctx, name, ref, func(d *Destination, dl anyhook.Delivery, a *anyhook.Attempt) (store.Outcome, error) {
		a.StatusCode = http.StatusOK
		a.ResponseBody = []byte("acknowledged by pull consumer " + by)
		return store.Outcome{Status: anyhook.StatusDelivered}, nil
	})
}

// Nack records the leased delivery ref as a failed attempt: due again
// after retryAfter (0: the destination's backoff), or dead at once when
// dead is set, or when it was the last attempt. reason is kept as the
// attempt's error.
func (e *Engine) Nack(ctx context.Context, name string, ref LeaseRef, retryAfter time.Duration, dead bool, reason, by string) error {
	if retryAfter < 0 || retryAfter > MaxPullLease {
		return fmt.Errorf("%w: retry_after 0..%s", anyhook.ErrInvalid, MaxPullLease)
	}
	return e.settle(ctx, name, ref, func(d *Destination, dl anyhook.Delivery, a *anyhook.Attempt) (store.Outcome, error) {
		a.Error = "refused by pull consumer " + by
		if reason != "" {
			a.Error += ": " + reason
		}
		switch {
		case dead:
			return store.Outcome{Status: anyhook.StatusDead}, nil
		case dl.AttemptCount-dl.Probes >= d.MaxAttempts:
			return store.Outcome{Status: anyhook.StatusDead}, nil
		}
		return store.Outcome{Status: anyhook.StatusPending,
			RetryIn: RetryDelay(dl.AttemptCount, d.Initial, d.Max, retryAfter, e.opt.Rand())}, nil
	})
}

// settle records the outcome decide makes of the leased delivery ref.
func (e *Engine) settle(ctx context.Context, name string, ref LeaseRef, decide func(*Destination, anyhook.Delivery, *anyhook.Attempt) (store.Outcome, error)) error {
	d, err := e.pullDest(name)
	if err != nil {
		return err
	}
	dl, err := e.held(ctx, d, ref)
	if err != nil {
		return err
	}
	now := e.opt.Now()
	a := anyhook.Attempt{Number: dl.AttemptCount, StartedAt: dl.ClaimedAt, Duration: now.Sub(dl.ClaimedAt), Outcome: anyhook.OutcomeAnswered}
	out, err := decide(d, dl, &a)
	if err != nil {
		return err
	}
	out.DeliveryID, out.Attempt, out.Result = dl.ID, dl.AttemptCount, a
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finishTimeout)
	defer cancel()
	lost, err := e.fin.finish(fctx, out)
	if err != nil {
		return err
	}
	if lost {
		return fmt.Errorf("lease %s (attempt %d): %w", ref.DeliveryID, ref.Attempt, ErrLeaseEnded)
	}
	e.observe(d.Name, ref.EventID, out.Status, a)
	e.pullSettled[d.Name].tell(ref)
	if out.Status == anyhook.StatusDead {
		dl.Status = anyhook.StatusDead
		e.notify(dl)
	}
	if out.Status != anyhook.StatusDelivered || d.InOrder {
		e.pullWait[d.Name].wake() // a retry may come due; in order, the object's next delivery
	}
	return nil
}

// Extend starts the lease ref over, lease long from now.
func (e *Engine) Extend(ctx context.Context, name string, ref LeaseRef, lease time.Duration) (time.Time, error) {
	d, err := e.pullDest(name)
	if err != nil {
		return time.Time{}, err
	}
	if lease < MinPullLease || lease > MaxPullLease {
		return time.Time{}, fmt.Errorf("%w: lease %s..%s", anyhook.ErrInvalid, MinPullLease, MaxPullLease)
	}
	if _, err := e.held(ctx, d, ref); err != nil {
		return time.Time{}, err
	}
	asked := e.opt.Now()
	ids, err := e.st.Renew(ctx, []store.Release{{DeliveryID: ref.DeliveryID, Attempt: ref.Attempt}}, lease)
	if err != nil {
		return time.Time{}, err
	}
	if len(ids) == 0 {
		return time.Time{}, fmt.Errorf("lease %s (attempt %d): %w", ref.DeliveryID, ref.Attempt, ErrLeaseEnded)
	}
	return asked.Add(lease), nil
}

// expirePolls is how many polls apart the max_age sweeps run; a batch
// is at most expireBatch deliveries, so one sweep holds the writer
// briefly, and a backlog is worked off in consecutive batches.
const (
	expirePolls = 10
	expireBatch = 500
)

// expire makes dead, until ctx ends, the deliveries of pull destinations
// with a max_age that were not settled within it.
func (e *Engine) expire(ctx context.Context) {
	var ds []*Destination
	for _, d := range e.dests {
		if d.Pull && d.MaxAge > 0 {
			ds = append(ds, d)
		}
	}
	if len(ds) == 0 {
		return
	}
	tick := time.NewTicker(expirePolls * e.opt.PollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, d := range ds {
			for ctx.Err() == nil {
				why := fmt.Sprintf("dead: no consumer settled it within the destination's max_age (%s)", d.MaxAge)
				gone, err := e.st.ExpirePending(ctx, d.Name, e.opt.Now().Add(-d.MaxAge), expireBatch, why)
				if err != nil {
					if ctx.Err() == nil {
						e.log.Warn("expiring a pull destination's backlog failed", "destination", d.Name, "err", err)
					}
					break
				}
				if len(gone) > 0 {
					e.log.Warn("pull deliveries expired (max_age)", "destination", d.Name, "count", len(gone), "max_age", d.MaxAge.String())
				}
				for _, dl := range gone {
					e.notify(dl)
				}
				if len(gone) < expireBatch {
					break
				}
			}
		}
	}
}

// PullStopped closes at EndPulls: the API's lease requests answer what
// they have, and its streams end.
func (e *Engine) PullStopped() <-chan struct{} { return e.pullStop }

// EndPulls ends the waiting lease requests and the streams, so that an
// HTTP server's graceful shutdown does not wait for them (the gateway
// calls it as its servers begin to shut down; Stop calls it too). It is
// idempotent.
func (e *Engine) EndPulls() { e.pullOnce.Do(func() { close(e.pullStop) }) }
