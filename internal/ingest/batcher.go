package ingest

import (
	"context"
	"errors"
	"hash/fnv"
	"sync"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// Batcher is a group committer: concurrent Ingest calls that arrive while a
// commit is in progress share the next transaction, and each caller is
// answered only after that transaction is durable. Batches form naturally
// (whatever is queued when the writer is free), so a lone request waits for
// nobody.
type Batcher struct {
	rec Recorder
	max int
	// lanes are the writers' queues, one each: a request goes to the
	// lane of its dedup key, so that concurrent copies of one event meet
	// in one writer rather than wait on each other's row locks.
	lanes []chan *batchReq

	mu      sync.Mutex
	stop    context.CancelFunc
	done    chan struct{}
	stopped chan struct{} // closed by Stop: no more requests are taken
}

type batchReq struct {
	evs  []store.NewEvent
	res  []store.IngestResult
	err  error
	done chan struct{}
}

// NewBatcher returns a Batcher that writes through rec, at most maxEvents
// events per transaction (a single request's events are never split).
func NewBatcher(rec Recorder, maxEvents int) *Batcher {
	if maxEvents < 1 {
		maxEvents = 1
	}
	return &Batcher{rec: rec, max: maxEvents, lanes: []chan *batchReq{make(chan *batchReq)}, stopped: make(chan struct{})}
}

// SetWriters sets how many transactions may be in progress at once (each
// takes the requests queued when it starts); default 1. One suits SQLite,
// which has one writer; PostgreSQL commits concurrent transactions in
// parallel (and groups their WAL flushes), so a few writers overlap the
// round trips of one batch with the next. Call it before Start.
func (b *Batcher) SetWriters(n int) {
	b.lanes = make([]chan *batchReq, max(1, n))
	for i := range b.lanes {
		b.lanes[i] = make(chan *batchReq)
	}
}

// lane is the queue for evs: by the hash of the first event's source and
// content key, else its dedup key (events without a key cannot collide:
// any lane will do). The content key comes first because it is the one a
// replay with a fresh id header shares with the original; a provider's
// own retry shares both.
func (b *Batcher) lane(evs []store.NewEvent) chan *batchReq {
	if len(b.lanes) == 1 || len(evs) == 0 {
		return b.lanes[0]
	}
	h := fnv.New32a()
	ev := &evs[0].Event
	h.Write([]byte(ev.Source))
	h.Write([]byte{0})
	if evs[0].ContentKey != "" {
		h.Write([]byte(evs[0].ContentKey))
	} else if ev.DedupKey != "" {
		h.Write([]byte(ev.DedupKey))
	} else {
		h.Write([]byte(ev.ID))
	}
	return b.lanes[h.Sum32()%uint32(len(b.lanes))]
}

// Start starts the writer.
func (b *Batcher) Start(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done != nil {
		return
	}
	ctx, b.stop = context.WithCancel(context.WithoutCancel(ctx))
	b.done = make(chan struct{})
	var wg sync.WaitGroup
	for _, lane := range b.lanes {
		wg.Go(func() { b.run(ctx, lane) })
	}
	go func() {
		wg.Wait()
		b.stop()
		close(b.done)
	}()
}

// Stop refuses new requests, lets the writer finish the batch it holds and
// returns. It is idempotent.
func (b *Batcher) Stop() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.done == nil {
		return
	}
	select {
	case <-b.stopped:
	default:
		close(b.stopped)
	}
	<-b.done
}

// errStopped answers requests that arrive after Stop.
var errStopped = errors.New("ingest is shutting down")

// Ingest implements Recorder.
func (b *Batcher) Ingest(ctx context.Context, evs []store.NewEvent) ([]store.IngestResult, error) {
	req := &batchReq{evs: evs, done: make(chan struct{})}
	select {
	case b.lane(evs) <- req:
	case <-b.stopped:
		return nil, errStopped
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	<-req.done // once taken, always answered: the commit may already be durable
	return req.res, req.err
}

func (b *Batcher) run(ctx context.Context, reqs chan *batchReq) {
	var batch []*batchReq
	for {
		batch = batch[:0]
		select {
		case req := <-reqs:
			batch = append(batch, req)
		case <-b.stopped:
			return
		}
		n := len(batch[0].evs)
	fill:
		for n < b.max {
			select {
			case req := <-reqs:
				batch = append(batch, req)
				n += len(req.evs)
			default:
				break fill
			}
		}
		b.commit(ctx, batch, n)
	}
}

func (b *Batcher) commit(ctx context.Context, batch []*batchReq, n int) {
	all := make([]store.NewEvent, 0, n)
	for _, req := range batch {
		all = append(all, req.evs...)
	}
	res, err := b.rec.Ingest(ctx, all)
	if err != nil && len(batch) > 1 {
		// Isolate the failure: each request gets its own transaction.
		for _, req := range batch {
			req.res, req.err = b.rec.Ingest(ctx, req.evs)
			close(req.done)
		}
		return
	}
	if err == nil && len(res) != n {
		err = errors.Join(anyhook.ErrUnavailable, errors.New("store returned a short result"))
	}
	for _, req := range batch {
		if err != nil {
			req.err = err
		} else {
			req.res, res = res[:len(req.evs):len(req.evs)], res[len(req.evs):]
		}
		close(req.done)
	}
}
