package delivery

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// slots counts one destination's claims against its limits: requests in
// flight (max_in_flight) and claims whose outcome is not recorded yet
// (unfinishedFactor × max_in_flight). The dispatcher takes slots for its
// claims and ingest for the deliveries it claims as it records them
// (claims at ingest); ended requests and recorded outcomes give them back.
type slots struct {
	max, maxOpen int

	mu             sync.Mutex
	inFlight, open int
	reserved       int           // taken by ingest, neither handed nor given back yet
	handed         []store.Claim // claimed at ingest, for the dispatcher to send
	finished       int           // outcomes recorded since the dispatcher last looked
	open_          bool          // the dispatcher runs: ingest may claim
	// backlog: deliveries may be waiting for the dispatcher's claim (left
	// pending by ingest, due retries, rescues), so ingest claims nothing:
	// a freed slot goes to the oldest due delivery, not to the next
	// event. Set by leftPending (counted in marks); cleared by drained,
	// once a claim of the dispatcher came back short and nothing was left
	// pending since it began.
	backlog bool
	marks   uint64
	signal  chan struct{} // cap 1: a slot came back or a claim was handed
}

func newSlots(maxInFlight int) *slots {
	return &slots{max: maxInFlight, maxOpen: unfinishedFactor * maxInFlight, signal: make(chan struct{}, 1), backlog: true}
}

func (s *slots) notify() {
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

// free is how many more claims the limits allow now.
func (s *slots) free() int {
	return max(0, min(s.max-s.inFlight, s.maxOpen-s.open))
}

// take takes up to n slots and says how many; forIngest also counts them
// reserved, and takes none while the dispatcher is not running or the
// destination has a backlog.
func (s *slots) take(n int, forIngest bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if forIngest && (!s.open_ || s.backlog) {
		return 0
	}
	n = min(n, s.free())
	s.inFlight += n
	s.open += n
	if forIngest {
		s.reserved += n
	}
	return n
}

// giveBack returns n slots taken and not used; fromIngest also ends their
// reservation.
func (s *slots) giveBack(n int, fromIngest bool) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	s.inFlight -= n
	s.open -= n
	if fromIngest {
		s.reserved -= n
	}
	s.mu.Unlock()
	s.notify()
}

// sent gives back a request's slot once it ended; finish the claim's once
// its outcome is recorded (or given up).
func (s *slots) sent() {
	s.mu.Lock()
	s.inFlight--
	s.mu.Unlock()
	s.notify()
}

func (s *slots) finish() {
	s.mu.Lock()
	s.open--
	s.finished++
	s.mu.Unlock()
	s.notify()
}

// leftPending says deliveries may wait for the dispatcher's claim.
func (s *slots) leftPending() {
	s.mu.Lock()
	s.backlog = true
	s.marks++
	s.mu.Unlock()
}

// mark is taken before a claim of the dispatcher's; drained(mark) after
// it came back short ends the backlog, unless a delivery was left pending
// since (the claim may not have seen it).
func (s *slots) mark() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.marks
}

func (s *slots) drained(mark uint64) {
	s.mu.Lock()
	if s.marks == mark {
		s.backlog = false
	}
	s.mu.Unlock()
}

// hand passes claims made at ingest, whose slots were reserved, to the
// dispatcher.
func (s *slots) hand(cs []store.Claim) {
	s.mu.Lock()
	s.handed = append(s.handed, cs...)
	s.reserved -= len(cs)
	s.mu.Unlock()
	s.notify()
}

// state is what the dispatcher reads at the top of its loop: the claims
// handed to it (taken), the slots in use, and whether an outcome was
// recorded since the last look.
func (s *slots) state() (handed []store.Claim, inFlight, free int, finished bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	handed, s.handed = s.handed, nil
	finished, s.finished = s.finished > 0, 0
	return handed, s.inFlight, s.free(), finished
}

// setOpen says whether the dispatcher runs. Closing returns whether
// reservations are still out: their claims will be handed (or their slots
// given back) soon, and the stopping dispatcher must send them.
func (s *slots) setOpen(open bool) (reserved bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open_ = open
	return s.reserved > 0
}

// Recorder records events: the store's Ingest, or the ingest batcher's.
type Recorder interface {
	Ingest(ctx context.Context, evs []store.NewEvent) ([]store.IngestResult, error)
}

// ClaimAtIngest returns a Recorder that records through rec and claims,
// in the same transaction, the new deliveries to destinations that have
// a free slot now (store.NewEvent.Lease), then hands them to their
// dispatchers in memory: a new event's delivery goes out without a claim
// transaction and without reading the event back (issue 15). It claims
// only for destinations that would send at once: not those with order:
// per_object (the order decides which delivery is next) or a rate (the
// rate decides when). Destinations whose deliveries it left pending are
// woken, as after any ingest.
func (e *Engine) ClaimAtIngest(rec Recorder) Recorder { return &claimer{e: e, rec: rec} }

type claimer struct {
	e   *Engine
	rec Recorder
}

func (c *claimer) Ingest(ctx context.Context, evs []store.NewEvent) ([]store.IngestResult, error) {
	reserved := c.reserve(evs)
	if len(reserved) == 0 {
		res, err := c.rec.Ingest(ctx, evs)
		if err == nil {
			c.wake(evs, res)
		}
		return res, err
	}
	evs = slices.Clone(evs) // the leases are this call's
	left := make(map[string]int, len(reserved))
	for d, n := range reserved {
		left[d] = n
	}
	for i := range evs {
		ne := &evs[i]
		ne.Lease = nil
		for j, d := range ne.Destinations {
			if left[d] == 0 {
				continue
			}
			left[d]--
			if ne.Lease == nil {
				ne.Lease = make([]time.Duration, len(ne.Destinations))
			}
			ne.Lease[j] = c.e.Lease(c.e.dests[d])
		}
	}
	res, err := c.rec.Ingest(ctx, evs)
	if err != nil {
		// Before answering: the batcher may record these events again
		// (request by request), and their claims then must not be
		// taken for this ingest's.
		c.settle(reserved, c.recover(evs))
		return res, err
	}
	c.wake(evs, res)
	byDest := map[string][]store.Claim{}
	for i := range res {
		for _, cl := range res[i].Claims {
			byDest[cl.Delivery.Destination] = append(byDest[cl.Delivery.Destination], cl)
		}
		res[i].Claims = nil
	}
	c.settle(reserved, byDest)
	return res, err
}

// settle hands each destination the claims made on its reserved slots
// and gives back the rest.
func (c *claimer) settle(reserved map[string]int, byDest map[string][]store.Claim) {
	for d, n := range reserved {
		sl := c.e.slots[d]
		cs := byDest[d]
		cs = cs[:min(len(cs), n)] // never more than reserved
		sl.giveBack(n-len(cs), true)
		if len(cs) > 0 {
			sl.hand(cs)
		}
	}
}

// eventReader reads an event back with its deliveries (store.Store's
// Event).
type eventReader interface {
	Event(ctx context.Context, id string) (anyhook.Event, error)
}

// recoverTimeout bounds the reads of recover (a database that does not
// answer delays a failed ingest's answer that much more).
const recoverTimeout = 2 * time.Second

// recover finds the claims an ingest that failed may still have
// committed: a COMMIT whose answer was lost (the connection dropped)
// leaves the deliveries claimed with nobody to send them; their lease would run out and a hold destination would hold them,
// never sent. It reads each leased event back: a delivery of it still
// delivering in its first attempt, none recorded, and leased beyond now,
// is a claim of this ingest (no one else claims a delivery before its
// first attempt ends). What it cannot read is left to the lease.
func (c *claimer) recover(evs []store.NewEvent) map[string][]store.Claim {
	r, ok := c.e.st.(eventReader)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), recoverTimeout)
	defer cancel()
	byDest := map[string][]store.Claim{}
	for i := range evs {
		ne := &evs[i]
		if ne.Lease == nil {
			continue
		}
		ev, err := r.Event(ctx, ne.Event.ID)
		if err != nil {
			continue // not recorded, or not readable now
		}
		now := c.e.opt.Now()
		for _, d := range ev.Deliveries {
			leased := false
			for j, dest := range ne.Destinations {
				leased = leased || (dest == d.Destination && ne.Lease[j] != 0)
			}
			if !leased || d.Status != anyhook.StatusDelivering || d.AttemptCount != 1 || len(d.Attempts) > 0 || !d.LeaseUntil.After(now) {
				continue
			}
			cl := store.Claim{Event: ne.Event, Delivery: d}
			cl.Event.Stale = ev.Stale
			byDest[d.Destination] = append(byDest[d.Destination], cl)
		}
	}
	return byDest
}

// reserve takes, per destination of evs that claims at ingest, a slot for
// each of its deliveries as far as the destination has free ones.
func (c *claimer) reserve(evs []store.NewEvent) map[string]int {
	var want map[string]int
	for i := range evs {
		for _, d := range evs[i].Destinations {
			if dd := c.e.dests[d]; dd == nil || dd.InOrder || dd.Rate > 0 {
				continue
			}
			if want == nil {
				want = map[string]int{}
			}
			want[d]++
		}
	}
	var got map[string]int
	for d, n := range want {
		if k := c.e.slots[d].take(n, true); k > 0 {
			if got == nil {
				got = map[string]int{}
			}
			got[d] = k
		}
	}
	return got
}

// wake wakes the dispatchers of the destinations that got a new pending
// delivery in res, one not claimed at ingest (a paused destination's, say).
func (c *claimer) wake(evs []store.NewEvent, res []store.IngestResult) {
	for i := range res {
		r := &res[i]
		if r.Err != nil || r.Duplicate {
			continue
		}
		for _, d := range evs[i].Destinations {
			if !slices.ContainsFunc(r.Claims, func(cl store.Claim) bool { return cl.Delivery.Destination == d }) {
				if sl := c.e.slots[d]; sl != nil {
					sl.leftPending()
				}
				c.e.wakeOne(d)
			}
		}
	}
}
