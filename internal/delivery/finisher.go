package delivery

import (
	"context"
	"sync"
	"time"

	"github.com/anyhook/anyhook/internal/store"
)

// finisher is a group committer for outcomes, like ingest.Batcher for
// events: the outcomes of attempts that end while a Finish is in progress
// share the next one, so a busy destination costs one commit per batch of
// attempts rather than one per attempt. Each caller is answered after the
// commit that holds its outcome.
//
// The fence is unchanged: Finish still writes each outcome only where
// (delivery, attempt, delivering) holds. Since Finish reports lost claims
// by delivery id, a batch never holds two outcomes of one delivery (a
// reclaimed delivery whose old attempt ends late): the second waits for
// the next batch, so each caller learns its own fate. A failed batch is
// retried outcome by outcome, so one bad outcome fails nobody else.
type finisher struct {
	st   Store
	max  int
	reqs chan *finishReq

	mu   sync.Mutex
	stop chan struct{} // closed by Stop
	done chan struct{} // closed when run returns
}

type finishReq struct {
	out  store.Outcome
	lost bool
	err  error
	done chan struct{}
}

// finishTimeout bounds one Finish call.
const finishTimeout = 30 * time.Second

func newFinisher(st Store, max int) *finisher {
	return &finisher{st: st, max: max, reqs: make(chan *finishReq)}
}

// Start starts the committer. Stop must be called only once nobody calls
// finish any more.
func (f *finisher) Start(ctx context.Context) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done != nil {
		return
	}
	f.stop, f.done = make(chan struct{}), make(chan struct{})
	go f.run(context.WithoutCancel(ctx))
}

// Stop ends the committer after its current batch. It is idempotent.
func (f *finisher) Stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done == nil {
		return
	}
	select {
	case <-f.stop:
	default:
		close(f.stop)
	}
	<-f.done
}

// finish records out and reports whether its claim was lost.
func (f *finisher) finish(ctx context.Context, out store.Outcome) (lost bool, err error) {
	req := &finishReq{out: out, done: make(chan struct{})}
	select {
	case f.reqs <- req:
	case <-ctx.Done():
		return false, ctx.Err()
	}
	<-req.done // once taken, always answered: the commit may be durable
	return req.lost, req.err
}

func (f *finisher) run(ctx context.Context) {
	defer close(f.done)
	var batch []*finishReq
	var held *finishReq // the next batch's first: its delivery was in this one
	in := map[string]bool{}
	for {
		batch = batch[:0]
		clear(in)
		if held != nil {
			batch, held = append(batch, held), nil
		} else {
			select {
			case req := <-f.reqs:
				batch = append(batch, req)
			case <-f.stop:
				return
			}
		}
		in[batch[0].out.DeliveryID] = true
	fill:
		for len(batch) < f.max {
			select {
			case req := <-f.reqs:
				if in[req.out.DeliveryID] {
					held = req
					break fill
				}
				in[req.out.DeliveryID] = true
				batch = append(batch, req)
			default:
				break fill
			}
		}
		f.commit(ctx, batch)
	}
}

func (f *finisher) commit(ctx context.Context, batch []*finishReq) {
	outs := make([]store.Outcome, len(batch))
	for i, req := range batch {
		outs[i] = req.out
	}
	lost, err := f.call(ctx, outs)
	if err != nil && len(batch) > 1 {
		// Isolate the failure: each outcome on its own.
		for _, req := range batch {
			lost, err := f.call(ctx, []store.Outcome{req.out})
			req.lost, req.err = len(lost) > 0, err
			close(req.done)
		}
		return
	}
	gone := make(map[string]bool, len(lost))
	for _, id := range lost {
		gone[id] = true
	}
	for _, req := range batch {
		req.lost, req.err = gone[req.out.DeliveryID], err
		close(req.done)
	}
}

func (f *finisher) call(ctx context.Context, outs []store.Outcome) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, finishTimeout)
	defer cancel()
	return f.st.Finish(ctx, outs)
}
