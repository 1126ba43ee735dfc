package sqlite

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// writeGate orders the write transactions that wait for the one writer
// connection: ingest first. SQLite has one writer, and besides ingest
// the delivery outcomes, claims, the log's sequencer, incidents and the
// rescuer all wait for it. database/sql hands a freed connection to a
// waiter at random, so an ingest commit, which a provider's request
// waits for, could wait behind several of the others: measured at half
// capacity (anyhook bench --ingest-rate 50%), the ingest's wait for the
// connection had a p99 of 10 ms while each transaction held it ~1 ms,
// most of the tail came from the background work piling up at each
// poll tick (BENCHMARKS.md, "Where the tail came from"). With the gate, an
// ingest waits for at most the transaction in progress. The others are
// not starved: the ingest committer has one transaction at a time and
// takes its next batch between two, so they get their turn in between.
type writeGate struct {
	mu    sync.Mutex
	busy  bool
	first []chan struct{} // ingest
	rest  []chan struct{}
}

// enter waits for the writer's turn; first says the caller is ingest.
// It fails only when ctx ends first; then the caller has no turn.
func (g *writeGate) enter(ctx context.Context, first bool) error {
	return g.enterUnless(ctx, first, nil)
}

// errNoTurnNeeded is enterUnless's answer when its done channel closed
// before the turn came.
var errNoTurnNeeded = errors.New("the work was done in another turn")

// enterUnless is enter that gives up, with errNoTurnNeeded, once done is
// closed: a Finish whose outcomes an ingest transaction took along.
func (g *writeGate) enterUnless(ctx context.Context, first bool, done <-chan struct{}) error {
	g.mu.Lock()
	if !g.busy {
		g.busy = true
		g.mu.Unlock()
		return nil
	}
	ch := make(chan struct{})
	if first {
		g.first = append(g.first, ch)
	} else {
		g.rest = append(g.rest, ch)
	}
	g.mu.Unlock()
	err := errNoTurnNeeded
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	case <-done:
	}
	g.mu.Lock()
	q := &g.rest
	if first {
		q = &g.first
	}
	if i := slices.Index(*q, ch); i >= 0 {
		*q = slices.Delete(*q, i, i+1)
		g.mu.Unlock()
		return err
	}
	g.mu.Unlock()
	// The turn came as ctx ended or done closed: pass it on.
	g.leave()
	return err
}

// leave ends the caller's turn and gives the next one, ingest first.
func (g *writeGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	var q *[]chan struct{}
	switch {
	case len(g.first) > 0:
		q = &g.first
	case len(g.rest) > 0:
		q = &g.rest
	default:
		g.busy = false
		return
	}
	close((*q)[0])
	*q = slices.Delete(*q, 0, 1)
}
