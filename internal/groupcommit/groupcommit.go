// Package groupcommit shares one durable commit among concurrent callers:
// the items that are queued while a commit is in progress go into the
// next one, and each caller is answered only after the commit that holds
// its item has returned. Ingest records events through it, delivery
// records outcomes.
//
// Batches form naturally, with no timer: a writer takes whatever is
// queued when it is free (up to Options.Max), so a lone item waits for
// nobody and a busy store gets bigger batches. A batch whose commit fails
// is committed again item by item, so one bad item fails nobody else.
package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anyhook/anyhook/internal/lifecycle"
)

// CommitFunc writes items in one durable transaction and returns one
// result per item, in order. It is all or nothing: an error means that
// nothing of the batch was written, so that each item can be committed
// again on its own. It must not keep items after it returns.
type CommitFunc[I, R any] func(ctx context.Context, items []I) ([]R, error)

// Options shape the batches. The zero value is one writer and batches of
// any size.
type Options[I any] struct {
	// Max bounds a batch's total Weight; 0 is no bound. An item heavier
	// than Max is committed alone.
	Max int
	// Weight is an item's share of Max; nil counts 1 per item.
	Weight func(I) int
	// Writers is how many commits may be in progress at once, one per
	// lane; default 1.
	Writers int
	// Lane picks an item's writer (taken modulo Writers); nil spreads
	// items over the writers in turn. Items that must meet in one writer
	// (say, copies of one event that would otherwise wait on each
	// other's row locks) get one lane.
	Lane func(I) int
	// Apart, when set, keeps items with one non-empty key out of a
	// single batch: a batch ends before the first item whose key is
	// already in it, and that item starts the next one, so the order of
	// the queue is kept.
	Apart func(I) string
	// Whole, when set, says of a failed batch's error that retrying its
	// items one by one cannot help (the database is unavailable): every
	// item gets the error at once, rather than a retry per item, each
	// waiting out the outage on its own. nil: every failed batch is
	// retried item by item.
	Whole func(error) bool
	// Now times the commits for Backlog; nil is time.Now.
	Now func() time.Time
}

// ErrStopped answers items offered after Stop, and those queued before a
// Stop of a committer that was never started.
var ErrStopped = errors.New("groupcommit: stopped")

// ErrShortResult answers every item of a batch whose commit returned no
// error but not one result per item. Such a batch is not committed again:
// its transaction may be durable.
var ErrShortResult = errors.New("groupcommit: commit returned fewer results than items")

// Committer queues items and commits them in batches; see the package
// documentation.
type Committer[I, R any] struct {
	commit CommitFunc[I, R]
	opt    Options[I]
	lanes  []*lane[I, R]
	next   atomic.Uint32 // the next lane when Options.Lane is nil
	run    lifecycle.Runner

	// For Backlog: the weight queued and not yet taken, and the recent
	// commit rate (weight per second of a writer's busy time, a moving
	// average; float64 bits, 0 until a commit was timed) and when it was
	// last timed (Options.Now, Unix nanoseconds).
	queued  atomic.Int64
	rate    atomic.Uint64
	timedAt atomic.Int64
}

// lane is one writer's queue.
type lane[I, R any] struct {
	mu     sync.Mutex
	queue  []*Pending[I, R]
	closed bool          // no more items are queued
	wake   chan struct{} // holds a signal when items may be queued
	// busySince is when the commit in progress began (Options.Now, Unix
	// nanoseconds); 0 while the writer is idle.
	busySince atomic.Int64
}

// Pending is an item's place in a committer's queue; Wait gives its
// result.
type Pending[I, R any] struct {
	item  I
	c     *Committer[I, R]
	lane  *lane[I, R]
	taken bool // in a batch (under lane.mu): it will be answered
	res   R
	err   error
	done  chan struct{}
}

// New returns a committer that writes through commit. Start starts its
// writers.
func New[I, R any](commit CommitFunc[I, R], opt Options[I]) *Committer[I, R] {
	opt.Writers = max(1, opt.Writers)
	if opt.Now == nil {
		opt.Now = time.Now
	}
	c := &Committer[I, R]{commit: commit, opt: opt, lanes: make([]*lane[I, R], opt.Writers)}
	for i := range c.lanes {
		c.lanes[i] = &lane[I, R]{wake: make(chan struct{}, 1)}
	}
	return c
}

// Start starts the writers. They run until Stop or until ctx ends (pass
// context.WithoutCancel to keep them past a cancelled parent); either
// way, each first commits what is queued in its lane. A commit's context
// is ctx without its cancellation: a commit in progress is never cut.
func (c *Committer[I, R]) Start(ctx context.Context) {
	c.run.Start(ctx, func(ctx context.Context) {
		var wg sync.WaitGroup
		for _, l := range c.lanes {
			wg.Go(func() { c.write(ctx, l) })
		}
		wg.Wait()
	})
}

// Stop refuses new items, lets the writers commit what is queued, and
// returns once they have. Items queued in a committer that was never
// started are answered ErrStopped. It is idempotent.
func (c *Committer[I, R]) Stop() {
	// Refuse new items first: a writer sees Stop only once its queue is
	// empty, and items arriving all along would keep it committing.
	for _, l := range c.lanes {
		l.close()
	}
	c.run.Stop()
	for _, l := range c.lanes {
		l.mu.Lock()
		left := l.queue // never started: nobody will take them
		l.queue = nil
		l.mu.Unlock()
		for _, p := range left {
			c.queued.Add(-int64(c.weight(p.item)))
			p.err = ErrStopped
			close(p.done)
		}
	}
}

// Add queues item and returns its place; the order of Adds is the order
// of the queue. It fails only after Stop.
func (c *Committer[I, R]) Add(item I) (*Pending[I, R], error) {
	var i int
	if c.opt.Lane != nil {
		i = c.opt.Lane(item)
	} else {
		i = int(c.next.Add(1))
	}
	i %= len(c.lanes)
	if i < 0 {
		i += len(c.lanes)
	}
	l := c.lanes[i]
	p := &Pending[I, R]{item: item, c: c, lane: l, done: make(chan struct{})}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, ErrStopped
	}
	l.queue = append(l.queue, p)
	c.queued.Add(int64(c.weight(item)))
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return p, nil
}

// Submit queues item and waits for the commit that holds it.
func (c *Committer[I, R]) Submit(ctx context.Context, item I) (R, error) {
	p, err := c.Add(item)
	if err != nil {
		var zero R
		return zero, err
	}
	return p.Wait(ctx)
}

// Wait returns the item's result once the commit that holds it has
// returned. If ctx ends while the item is still queued, the item is
// withdrawn (it will not be committed) and Wait returns ctx's error; once
// a writer has taken it, Wait waits for the commit whatever ctx says,
// since the commit may already be durable. Call it once.
func (p *Pending[I, R]) Wait(ctx context.Context) (R, error) {
	select {
	case <-p.done:
		return p.res, p.err
	case <-ctx.Done():
	}
	l := p.lane
	l.mu.Lock()
	if !p.taken {
		if i := slices.Index(l.queue, p); i >= 0 {
			l.queue = slices.Delete(l.queue, i, i+1)
			p.c.queued.Add(-int64(p.c.weight(p.item)))
			l.mu.Unlock()
			var zero R
			return zero, ctx.Err()
		}
	}
	l.mu.Unlock()
	<-p.done
	return p.res, p.err
}

// write is one lane's writer.
func (c *Committer[I, R]) write(ctx context.Context, l *lane[I, R]) {
	cctx := context.WithoutCancel(ctx)
	var batch []*Pending[I, R]
	var items []I // the batch's items, reused: a commit does not keep them
	keys := map[string]bool{}
	// A commit taken straight after the previous one is timed from that
	// one's end: the pace is what the writer drains while it has work,
	// the time it waits for a CPU between two commits included (past the
	// CPU's capacity that wait is long, and a pace of the commits alone
	// would promise more than the writer does).
	var prevEnd time.Time
	for {
		batch = c.take(l, batch[:0], keys)
		if len(batch) > 0 {
			start := c.opt.Now()
			l.busySince.Store(start.UnixNano())
			var ok bool
			items, ok = c.commitBatch(cctx, batch, items)
			l.busySince.Store(0)
			end := c.opt.Now()
			if prevEnd.IsZero() {
				prevEnd = start
			}
			if ok { // a failed batch's time says nothing of the pace
				c.timed(batch, end.Sub(prevEnd), end)
			}
			prevEnd = end
			clear(batch)
			continue
		}
		prevEnd = time.Time{}
		select {
		case <-l.wake:
		case <-ctx.Done():
			l.close()
			for batch = c.take(l, batch[:0], keys); len(batch) > 0; batch = c.take(l, batch[:0], keys) {
				items, _ = c.commitBatch(cctx, batch, items)
			}
			return
		}
	}
}

// close refuses new items in l.
func (l *lane[I, R]) close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
}

// take moves the next batch from l's queue to batch: its first item and
// the following ones until Max or an item that must be kept apart.
func (c *Committer[I, R]) take(l *lane[I, R], batch []*Pending[I, R], keys map[string]bool) []*Pending[I, R] {
	clear(keys)
	l.mu.Lock()
	defer l.mu.Unlock()
	n, i := 0, 0
	for ; i < len(l.queue); i++ {
		p := l.queue[i]
		w := c.weight(p.item)
		if i > 0 && c.opt.Max > 0 && n+w > c.opt.Max {
			break
		}
		if c.opt.Apart != nil {
			if k := c.opt.Apart(p.item); k != "" {
				if keys[k] {
					break
				}
				keys[k] = true
			}
		}
		n += w
		p.taken = true
		batch = append(batch, p)
	}
	clear(l.queue[:i]) // the batch holds them now
	l.queue = l.queue[i:]
	c.queued.Add(-int64(n))
	return batch
}

func (c *Committer[I, R]) weight(item I) int {
	if c.opt.Weight == nil {
		return 1
	}
	return c.opt.Weight(item)
}

// timed adds a commit of batch that took d to the commit rate. Only
// batches of at least a quarter of Max count: a store commits a batch in
// about the time of a single item, so the rate of small batches (a quiet
// gateway's) says nothing of what it can commit when loaded.
func (c *Committer[I, R]) timed(batch []*Pending[I, R], d time.Duration, at time.Time) {
	if d <= 0 {
		return
	}
	w := 0
	for _, p := range batch {
		w += c.weight(p.item)
	}
	if w < max(1, c.opt.Max/4) {
		return
	}
	sample := float64(w) / d.Seconds()
	// A pace that aged out (Pace reads 0) is not averaged in: it was the
	// store of a while ago, a cold one after a start, say.
	aged := at.UnixNano()-c.timedAt.Load() > int64(paceTTL)
	for {
		old := c.rate.Load()
		r := math.Float64frombits(old)
		// A moving average over about the last eight commits: it follows
		// the store's pace within a few commits and forgets a single
		// slow one.
		if r == 0 || aged {
			r = sample
		} else {
			r += (sample - r) / 8
		}
		if c.rate.CompareAndSwap(old, math.Float64bits(r)) {
			c.timedAt.Store(at.UnixNano())
			return
		}
	}
}

// Backlog estimates how long an item added now would wait before a
// writer takes it: the weight queued ahead of it over the recent commit
// rate of all writers, and at least as long as the commits in progress
// have already taken (a stalled store, or one never timed). It is 0 while
// what is queued fits in one batch (the next commit takes it all). A
// caller that answers someone who can come back later (a
// provider that retries) can refuse work past a bound on it, so that what
// it accepts is answered in time instead of everything queueing without
// bound.
func (c *Committer[I, R]) Backlog() time.Duration {
	q := c.queued.Load()
	if q <= 0 || c.opt.Max <= 0 || q <= int64(c.opt.Max)*int64(len(c.lanes)) {
		return 0
	}
	var est time.Duration
	if r := math.Float64frombits(c.rate.Load()); r > 0 {
		est = time.Duration(float64(q) / (r * float64(len(c.lanes))) * float64(time.Second))
	}
	now := c.opt.Now().UnixNano()
	stalled := time.Duration(math.MaxInt64)
	for _, l := range c.lanes {
		b := l.busySince.Load()
		if b == 0 {
			stalled = 0 // a writer is free: it takes the queue next
			break
		}
		stalled = min(stalled, time.Duration(now-b))
	}
	return max(est, stalled)
}

// Pace is the recent commit rate of all writers, items per second, as
// Backlog uses it; 0 until a batch of at least a quarter of Max was
// committed, and again once none was for paceTTL.
func (c *Committer[I, R]) Pace() float64 {
	if c.opt.Now().UnixNano()-c.timedAt.Load() > int64(paceTTL) {
		return 0
	}
	return math.Float64frombits(c.rate.Load()) * float64(len(c.lanes))
}

// paceTTL is how long a timed pace stands: one from a burst long gone
// (or one made slow by a store that was slow then) must not judge the
// load of today, which may not form a batch big enough to be timed.
const paceTTL = 5 * time.Second

// Drain is how long the writers take to commit n items at the recent
// pace: 0 while the pace is not known, and while n is less than batches
// of the smallest batches that time it, in every lane. With two, a load
// that small can form such a batch while another commits, so that a pace
// once slow is timed again; a caller that measures what it waited for
// may ask for one.
func (c *Committer[I, R]) Drain(n int64, batches int) time.Duration {
	r := c.Pace()
	if r <= 0 || n < int64(batches*max(1, c.opt.Max/4)*len(c.lanes)) {
		return 0
	}
	return time.Duration(float64(n) / r * float64(time.Second))
}

// commitBatch commits batch and answers its items; a failed batch is
// committed again item by item. It returns buf, the buffer it built the
// items in, for the next batch, and whether the batch committed whole.
func (c *Committer[I, R]) commitBatch(ctx context.Context, batch []*Pending[I, R], buf []I) ([]I, bool) {
	items := buf[:0]
	for _, p := range batch {
		items = append(items, p.item)
	}
	res, err := c.commit(ctx, items)
	clear(items)
	if err != nil && len(batch) > 1 && (c.opt.Whole == nil || !c.opt.Whole(err)) {
		for i := range batch {
			items, _ = c.commitBatch(ctx, batch[i:i+1], items)
		}
		return items, false
	}
	if err == nil && len(res) != len(batch) {
		err = fmt.Errorf("%w (%d for %d)", ErrShortResult, len(res), len(batch))
	}
	for i, p := range batch {
		if err != nil {
			p.err = err
		} else {
			p.res = res[i]
		}
		close(p.done)
	}
	return items, err == nil
}
