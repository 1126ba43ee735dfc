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

	mu                   sync.Mutex
	inFlight, unfinished int
	reserved             int // taken by ingest, neither handed nor given back yet
	// send starts the sends of claims made at ingest (set while the
	// dispatcher runs), whose attempts must end by deadline: at once, in
	// the hand-off, not when the dispatcher next looks, because their
	// lease runs from the ingest's commit.
	send     func(cs []store.Claim, deadline time.Time)
	finished int  // outcomes recorded since the dispatcher last looked
	running  bool // the dispatcher runs: ingest may claim
	// drained: the dispatcher's last claim found fewer due deliveries than
	// it asked for, and nothing said since that more are waiting (a wake
	// clears it). Ingest claims only then, so that new events never go
	// ahead of a backlog of older due deliveries (a queue after an
	// outage, retries that came due): the backlog goes first, in the
	// dispatcher's order, and claims at ingest resume once it is drained.
	drained bool
	marks   uint64        // counts undrain calls: a claim that began before one does not drain
	signal  chan struct{} // cap 1: a slot came back or a reservation ended
	// holdUntil: claims were released for lack of lease (the store is
	// slow to answer even a renewal), so the dispatcher claims again
	// only from then on, not at once: claiming what it just gave back
	// would spin on the store. backoff is the next hold, doubled at each
	// release and reset by a claim that is sent.
	holdUntil time.Time
	backoff   time.Duration
}

// The hold after claims were released for lack of lease starts at
// firstHold and doubles up to the lease.
const firstHold = 100 * time.Millisecond

// released holds the dispatcher's claims off (holdUntil), up to lease.
// The hold is on real time, as every wait of the engine's.
func (s *slots) released(lease time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.backoff = min(max(2*s.backoff, firstHold), lease)
	s.holdUntil = time.Now().Add(s.backoff)
}

// sending says a claim is sent: the store answers in time again.
func (s *slots) sending() {
	s.mu.Lock()
	s.backoff = 0
	s.mu.Unlock()
}

// held is how long the dispatcher is still to hold off claiming.
func (s *slots) held() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Until(s.holdUntil)
}

func newSlots(maxInFlight int) *slots {
	return &slots{max: maxInFlight, maxOpen: unfinishedFactor * maxInFlight, signal: make(chan struct{}, 1)}
}

func (s *slots) notify() {
	select {
	case s.signal <- struct{}{}:
	default:
	}
}

// free is how many more claims the limits allow now.
func (s *slots) free() int {
	return max(0, min(s.max-s.inFlight, s.maxOpen-s.unfinished))
}

// take takes up to n slots for the dispatcher and says how many.
func (s *slots) take(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n = min(n, s.free())
	s.inFlight += n
	s.unfinished += n
	return n
}

// reserve takes up to n slots for ingest and says how many: none unless
// the dispatcher runs and its queue is drained. When the free slots are
// fewer than n, the deliveries left over will wait pending: a backlog, so
// the queue is no longer drained.
func (s *slots) reserve(n int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running || !s.drained {
		return 0
	}
	got := min(n, s.free())
	if got < n {
		s.undrainLocked() // the leftovers wait pending: a backlog
	}
	s.inFlight += got
	s.unfinished += got
	s.reserved += got
	return got
}

// giveBack returns n slots taken and not used; fromIngest also ends their
// reservation.
func (s *slots) giveBack(n int, fromIngest bool) {
	if n == 0 {
		return
	}
	s.mu.Lock()
	s.inFlight -= n
	s.unfinished -= n
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
	s.unfinished--
	s.finished++
	s.mu.Unlock()
	s.notify()
}

// undrain says older deliveries may be waiting for the dispatcher's
// claim: ingest claims nothing until the dispatcher finds its queue empty.
func (s *slots) undrain() {
	s.mu.Lock()
	s.undrainLocked()
	s.mu.Unlock()
}

func (s *slots) undrainLocked() {
	s.drained = false
	s.marks++
}

// mark is taken before a claim of the dispatcher's; drainedAt(mark), once
// that claim came back short, lets ingest claim again, unless something
// undrained the queue since the claim began (it may not have seen it).
func (s *slots) mark() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.marks
}

func (s *slots) drainedAt(mark uint64) {
	s.mu.Lock()
	if s.marks == mark {
		s.drained = true
	}
	s.mu.Unlock()
}

// hand sends claims made at ingest, whose slots were reserved and whose
// attempts must end by deadline, and only then ends their reservation: a
// stopping dispatcher waits for that, so every send is started before
// the engine waits for its sends.
func (s *slots) hand(cs []store.Claim, deadline time.Time) {
	s.mu.Lock()
	send := s.send
	s.mu.Unlock()
	send(cs, deadline)
	s.mu.Lock()
	s.reserved -= len(cs)
	s.mu.Unlock()
	s.notify()
}

// state is what the dispatcher reads at the top of its loop: the slots in
// use and free, and whether an outcome was recorded since the last look.
func (s *slots) state() (inFlight, free int, finished bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	finished, s.finished = s.finished > 0, 0
	return s.inFlight, s.free(), finished
}

// open lets ingest claim, sending what it claims with send; close stops
// it and waits until no reservation is out (each ends with its claims'
// sends started, or its slots given back).
func (s *slots) open(send func(cs []store.Claim, deadline time.Time)) {
	s.mu.Lock()
	s.running, s.send = true, send
	s.mu.Unlock()
}

func (s *slots) close() {
	s.mu.Lock()
	s.running = false
	for s.reserved > 0 {
		s.mu.Unlock()
		<-s.signal
		s.mu.Lock()
	}
	s.mu.Unlock()
}

// Recorder records events: the store's Ingest, or the ingest batcher's.
type Recorder interface {
	Ingest(ctx context.Context, evs []store.NewEvent) ([]store.IngestResult, error)
}

// ClaimAtIngest returns a Recorder that records through rec and claims,
// in the same transaction, the new deliveries to destinations that have
// a free slot now (store.NewEvent.Lease), then hands them to their
// dispatchers in memory: a new event's delivery goes out without a claim
// transaction and without reading the event back. It claims
// only for destinations that would send at once: not those with order:
// per_object (the order decides which delivery is next) or a rate (the
// rate decides when), and only while the destination's queue is drained
// (no older due delivery waits: they go first). Destinations whose
// deliveries it left pending are woken, as after any ingest.
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
	asked := c.e.opt.Now() // the leases start later, in the store
	res, err := c.rec.Ingest(ctx, evs)
	if err != nil {
		// Before answering: the batcher may record these events again
		// (request by request), and their claims then must not be taken
		// for this ingest's.
		c.settle(reserved, c.recover(evs), asked)
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
	c.settle(reserved, byDest, asked)
	return res, nil
}

// settle hands each destination the claims made on its reserved slots,
// by an ingest that went to the store at asked, and gives back the rest.
func (c *claimer) settle(reserved map[string]int, byDest map[string][]store.Claim, asked time.Time) {
	for d, n := range reserved {
		sl := c.e.slots[d]
		cs := byDest[d]
		cs = cs[:min(len(cs), n)] // never more than reserved
		sl.giveBack(n-len(cs), true)
		if len(cs) > 0 {
			sl.hand(cs, c.e.deadline(c.e.dests[d], asked))
		}
	}
}

// recoverTimeout bounds the reads of recover: a database that does not
// answer delays a failed ingest's answer (a 503) that much more.
const recoverTimeout = time.Second

// recover finds the claims an ingest that failed may still have
// committed: a COMMIT whose answer was lost (the connection dropped after
// the server committed) leaves the deliveries claimed with nobody to send
// them; their lease would run out and a hold destination would hold them,
// never sent. It reads each leased event back: a delivery of it still
// delivering in its first attempt, none recorded, and leased beyond now,
// is a claim of this ingest (no one else claims a delivery before its
// first attempt ends). What it cannot read is left to the lease.
func (c *claimer) recover(evs []store.NewEvent) map[string][]store.Claim {
	r := c.e.st
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
			if dd := c.e.dests[d]; dd == nil || dd.InOrder || dd.Rate > 0 || dd.Pull {
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
		if k := c.e.slots[d].reserve(n); k > 0 {
			if got == nil {
				got = map[string]int{}
			}
			got[d] = k
		}
	}
	return got
}

// wake wakes the dispatchers of the destinations that got a new pending
// delivery in res, one not claimed at ingest (a paused destination's, one
// that found no free slot or a queue not drained). It leaves the queue's
// drained state alone: deliveries that waited for a slot made it not
// drained already (reserve), and the others are new events, not a
// backlog they should wait behind.
func (c *claimer) wake(evs []store.NewEvent, res []store.IngestResult) {
	for i := range res {
		r := &res[i]
		if r.Err != nil || r.Duplicate {
			continue
		}
		for _, d := range evs[i].Destinations {
			if !slices.ContainsFunc(r.Claims, func(cl store.Claim) bool { return cl.Delivery.Destination == d }) {
				c.e.nudge(d)
			}
		}
	}
}
