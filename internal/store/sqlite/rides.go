package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"

	"github.com/anyhook/anyhook/internal/store"
)

// Outcomes ride along with ingest. At a low rate an event's ingest and
// its outcome each had a write transaction of their own, and the one
// writer spent most of its time beginning and committing them
// (BENCHMARKS.md, "Outcomes ride along with ingest"). So a Finish first
// queues its outcomes here and then waits for the writer's turn; an
// ingest transaction that runs meanwhile writes them too, after its
// events, and its commit answers the Finish. A Finish whose turn
// comes first writes its outcomes in a transaction of its own, as
// before.
//
// The outcomes are fenced as ever by (delivery, attempt, delivering), so
// a ride changes when they are written, not what. An ingest transaction
// commits synced, so a ridden outcome is durable at once (one of its own
// is durable at the next synced commit: Finish). What a ride writes is
// settled under the writer's turn: a Finish that gets the next turn finds
// its outcomes answered, or queued again when the ingest failed.

// ride is one Finish's outcomes and, once they are written, which of
// them lost their claim. A ride is answered when it was written; a failed
// one is queued again, unless its Finish has given up waiting.
type ride struct {
	outs []store.Outcome
	lost []string
	done chan struct{} // closed once it is written, or failed and gone
	// gone: its Finish's context ended while a transaction held it;
	// failed: that transaction then failed (both under rides.mu).
	gone, failed bool
}

// rides is the queue of Finishes waiting for the writer.
type rides struct {
	mu sync.Mutex
	q  []*ride
}

func (r *rides) add(outs []store.Outcome) *ride {
	x := &ride{outs: outs, done: make(chan struct{})}
	r.mu.Lock()
	r.q = append(r.q, x)
	r.mu.Unlock()
	return x
}

// remove takes x out of the queue; false means a transaction holds it
// (or answered it). giveUp marks a held x, so that should its
// transaction fail, it is answered as failed rather than queued again
// for a Finish that no longer waits at the writer's gate.
func (r *rides) remove(x *ride, giveUp bool) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, y := range r.q {
		if y == x {
			r.q = append(r.q[:i], r.q[i+1:]...)
			return true
		}
	}
	x.gone = giveUp
	return false
}

// take takes the queued rides up to the first that shares a delivery
// with an earlier one: finishIn judges only the first outcome of a
// delivery, and two Finishes of one delivery (a late outcome of an
// attempt that lost its claim, then the current one's) must each be
// judged as if alone. The rest wait for the next transaction.
func (r *rides) take() []*ride {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.q)
	if n > 1 {
		seen := map[string]bool{}
	apart:
		for i, x := range r.q {
			for _, o := range x.outs {
				if seen[o.DeliveryID] {
					n = i
					break apart
				}
			}
			for _, o := range x.outs {
				seen[o.DeliveryID] = true
			}
		}
	}
	taken := r.q[:n:n]
	r.q = slices.Clone(r.q[n:])
	return taken
}

// rideResult is what a transaction wrote of the rides it took: lost
// tells, for each outcome of theirs in order, whether its claim was lost.
type rideResult struct {
	rides []*ride
	lost  []bool
}

// settle answers the rides of res once their transaction ended with err;
// after a failure they are queued again, ahead of later ones, for the
// next transaction or their own Finish to write.
func (r *rides) settle(res *rideResult, err error) {
	if res == nil || len(res.rides) == 0 {
		return
	}
	if err != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		var again []*ride
		for _, x := range res.rides {
			if x.gone {
				x.failed = true
				close(x.done)
			} else {
				again = append(again, x)
			}
		}
		r.q = append(again, r.q...)
		return
	}
	lost := res.lost
	for _, x := range res.rides {
		x.lost = lostIDs(x.outs, lost[:len(x.outs)])
		lost = lost[len(x.outs):]
		close(x.done)
	}
}

// lostIDs is the delivery ids of the outcomes whose claim was lost.
func lostIDs(outs []store.Outcome, lost []bool) []string {
	var ids []string
	for i, o := range outs {
		if lost[i] {
			ids = append(ids, o.DeliveryID)
		}
	}
	return ids
}

// outcomesOf is the rides' outcomes in one slice, in order.
func outcomesOf(rs []*ride) []store.Outcome {
	if len(rs) == 1 {
		return rs[0].outs
	}
	var outs []store.Outcome
	for _, x := range rs {
		outs = append(outs, x.outs...)
	}
	return outs
}

// rideAlong writes, in tx, the outcomes queued for the writer. Should
// they fail, they are queued again, for their own Finish to write and
// report, and it returns errRideFailed: the caller rolls tx back and runs
// its own work again alone (a savepoint would cost two statements in
// every ride, for a failure that a store whose ingest works hardly meets).
func (s *Store) rideAlong(ctx context.Context, tx *sql.Tx) (*rideResult, error) {
	rs := s.rides.take()
	if len(rs) == 0 {
		return nil, nil
	}
	failed := true
	defer func() {
		if failed { // finishIn's error, or a panic on its way up
			s.rides.settle(&rideResult{rides: rs}, errRideFailed)
		}
	}()
	lost, err := s.finishIn(s.stmts(ctx, tx), outcomesOf(rs))
	if err != nil {
		return nil, errRideFailed
	}
	failed = false
	return &rideResult{rides: rs, lost: lost}, nil
}

// errRideFailed says that the outcomes riding along failed (rideAlong).
var errRideFailed = errors.New("the outcomes riding along failed")
