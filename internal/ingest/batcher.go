package ingest

import (
	"context"
	"errors"
	"hash/fnv"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/groupcommit"
	"github.com/anyhook/anyhook/internal/store"
)

// Batcher is the group committer of events (a groupcommit.Committer whose
// items are requests): concurrent Ingest calls that arrive while a commit
// is in progress share the next transaction, and each caller is answered
// only after that transaction is durable. Batches form naturally
// (whatever is queued when the writer is free), so a lone request waits
// for nobody. A failed batch is committed again request by request.
type Batcher struct {
	rec Recorder
	max int
	c   *groupcommit.Committer[[]store.NewEvent, []store.IngestResult]
	// writers is how many lanes there are: a request goes to the lane of
	// its dedup key, so that concurrent copies of one event meet in one
	// writer rather than wait on each other's row locks.
	writers int
}

// NewBatcher returns a Batcher that writes through rec, at most maxEvents
// events per transaction (a single request's events are never split; a
// request of more than maxEvents is committed alone).
func NewBatcher(rec Recorder, maxEvents int) *Batcher {
	b := &Batcher{rec: rec, max: max(1, maxEvents)}
	b.SetWriters(1)
	return b
}

// SetWriters sets how many transactions may be in progress at once (each
// takes the requests queued when it starts); default 1. One suits SQLite,
// which has one writer; PostgreSQL commits concurrent transactions in
// parallel (and groups their WAL flushes), so a few writers overlap the
// round trips of one batch with the next. Call it before Start.
func (b *Batcher) SetWriters(n int) {
	b.writers = max(1, n)
	b.c = groupcommit.New(b.commit, groupcommit.Options[[]store.NewEvent]{
		Max:     b.max,
		Weight:  func(evs []store.NewEvent) int { return len(evs) },
		Writers: b.writers,
		Lane:    b.lane,
		Whole:   unavailable,
	})
}

// lane is the writer for evs: by the hash of the first event's source and
// content key, else its dedup key (events without a key cannot collide:
// any lane will do). The content key comes first because it is the one a
// replay with a fresh id header shares with the original; a provider's
// own retry shares both.
func (b *Batcher) lane(evs []store.NewEvent) int {
	if b.writers == 1 || len(evs) == 0 {
		return 0
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
	return int(h.Sum32() % uint32(b.writers))
}

// Start starts the writers; cancelling ctx does not stop them (Stop
// does), so that a request already taken is always answered.
func (b *Batcher) Start(ctx context.Context) { b.c.Start(context.WithoutCancel(ctx)) }

// Stop refuses new requests, lets the writers commit what is queued and
// returns. It is idempotent.
func (b *Batcher) Stop() { b.c.Stop() }

// errStopped answers requests that arrive after Stop.
var errStopped = errors.New("ingest is shutting down")

// Ingest implements Recorder.
func (b *Batcher) Ingest(ctx context.Context, evs []store.NewEvent) ([]store.IngestResult, error) {
	res, err := b.c.Submit(ctx, evs)
	switch {
	case errors.Is(err, groupcommit.ErrStopped):
		return nil, errStopped
	case errors.Is(err, groupcommit.ErrShortResult):
		return nil, errors.Join(anyhook.ErrUnavailable, errors.New("store returned a short result"))
	}
	return res, err
}

// commit writes the events of reqs in one transaction and splits the
// results by request. A short answer from the store yields fewer results
// than requests, which the committer reports as ErrShortResult.
func (b *Batcher) commit(ctx context.Context, reqs [][]store.NewEvent) ([][]store.IngestResult, error) {
	var all []store.NewEvent
	if len(reqs) == 1 {
		all = reqs[0]
	} else {
		n := 0
		for _, evs := range reqs {
			n += len(evs)
		}
		all = make([]store.NewEvent, 0, n)
		for _, evs := range reqs {
			all = append(all, evs...)
		}
	}
	res, err := b.rec.Ingest(ctx, all)
	if err != nil {
		return nil, err
	}
	if len(res) != len(all) {
		return nil, nil
	}
	out := make([][]store.IngestResult, len(reqs))
	for i, evs := range reqs {
		out[i], res = res[:len(evs):len(evs)], res[len(evs):]
	}
	return out, nil
}

// unavailable says a failed batch failed for the database, not for one
// of its events: its requests are answered 503 at once rather than each
// retried alone against a database that is down.
func unavailable(err error) bool { return errors.Is(err, anyhook.ErrUnavailable) }

// Backlog implements Backlogger: how long a request queued now would wait
// for a writer, from what is queued and the recent commit rate.
func (b *Batcher) Backlog() time.Duration { return b.c.Backlog() }

// Pace implements Backlogger: the recent commit rate, events per second
// (groupcommit.Committer.Pace).
func (b *Batcher) Pace() float64 { return b.c.Pace() }

// Drain implements Backlogger: how long the store takes to commit n
// events at its recent pace, 0 while n is less than batches of the
// batches that time it (groupcommit.Committer.Drain).
func (b *Batcher) Drain(n int64, batches int) time.Duration { return b.c.Drain(n, batches) }
