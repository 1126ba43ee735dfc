package ingest

import (
	"context"
	"errors"
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
	rec  Recorder
	max  int
	reqs chan *batchReq

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
	return &Batcher{rec: rec, max: maxEvents, reqs: make(chan *batchReq), stopped: make(chan struct{})}
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
	go b.run(ctx)
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
	case b.reqs <- req:
	case <-b.stopped:
		return nil, errStopped
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	<-req.done // once taken, always answered: the commit may already be durable
	return req.res, req.err
}

func (b *Batcher) run(ctx context.Context) {
	defer close(b.done)
	defer b.stop()
	var batch []*batchReq
	for {
		batch = batch[:0]
		select {
		case req := <-b.reqs:
			batch = append(batch, req)
		case <-b.stopped:
			return
		}
		n := len(batch[0].evs)
	fill:
		for n < b.max {
			select {
			case req := <-b.reqs:
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
