package delivery

import (
	"context"
	"errors"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/groupcommit"
	"github.com/anyhook/anyhook/internal/store"
)

// finisher is the group committer of outcomes (a groupcommit.Committer,
// as ingest.Batcher is for events): the outcomes of attempts that end
// while a Finish is in progress share the next one, so a busy destination
// costs one commit per batch of attempts rather than one per attempt.
// Each caller is answered after the commit that holds its outcome.
//
// The fence is unchanged: Finish still writes each outcome only where
// (delivery, attempt, delivering) holds. Since Finish reports lost claims
// by delivery id, a batch never holds two outcomes of one delivery (a
// reclaimed delivery whose old attempt ends late): the second starts the
// next batch, so each caller learns its own fate. A failed batch is
// retried outcome by outcome, so one bad outcome fails nobody else.
type finisher struct {
	st recorder
	c  *groupcommit.Committer[store.Outcome, bool]
}

// finishTimeout bounds one Finish call.
const finishTimeout = 30 * time.Second

// recorder is what the finisher needs of the store.
type recorder interface {
	Finish(ctx context.Context, outs []store.Outcome) ([]string, error)
}

func newFinisher(st recorder, max int) *finisher {
	f := &finisher{st: st}
	f.c = groupcommit.New(f.commit, groupcommit.Options[store.Outcome]{
		Max:   max,
		Apart: func(o store.Outcome) string { return o.DeliveryID },
		// An unavailable database fails every outcome of the batch at
		// once (the leases expire and the rescuers decide), rather than
		// one 30 s try per outcome while the writer is blocked.
		Whole: func(err error) bool { return errors.Is(err, anyhook.ErrUnavailable) },
	})
	return f
}

// Start starts the committer; cancelling ctx does not stop it (Stop
// does). Stop must be called only once nobody calls finish any more.
func (f *finisher) Start(ctx context.Context) { f.c.Start(context.WithoutCancel(ctx)) }

// Stop ends the committer once it has recorded what is queued. It is
// idempotent.
func (f *finisher) Stop() { f.c.Stop() }

// finish records out and reports whether its claim was lost.
func (f *finisher) finish(ctx context.Context, out store.Outcome) (lost bool, err error) {
	return f.c.Submit(ctx, out)
}

// commit records outs in one Finish and reports, per outcome, whether
// its claim was lost.
func (f *finisher) commit(ctx context.Context, outs []store.Outcome) ([]bool, error) {
	ctx, cancel := context.WithTimeout(ctx, finishTimeout)
	defer cancel()
	lost, err := f.st.Finish(ctx, outs)
	if err != nil {
		return nil, err
	}
	gone := make(map[string]bool, len(lost))
	for _, id := range lost {
		gone[id] = true
	}
	res := make([]bool, len(outs))
	for i, o := range outs {
		res[i] = gone[o.DeliveryID]
	}
	return res, nil
}
