package alert

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/lifecycle"
	"github.com/anyhook/anyhook/internal/store"
)

// writeLoop writes raised alerts to the outbox, a batch per transaction,
// until end ends: by Stop, after writing what is queued; by ctx, at once.
func (n *Notifier) writeLoop(ctx, end context.Context) {
	for {
		select {
		case a := <-n.queue:
			n.write(ctx, end, n.take([]store.RaisedAlert{a}))
		case <-end.Done():
			if !lifecycle.Stopped(end) {
				return
			}
			for batch := n.take(nil); len(batch) > 0; batch = n.take(nil) {
				n.write(ctx, end, batch)
			}
			return
		}
	}
}

// take adds to batch what is queued, up to maxBatch.
func (n *Notifier) take(batch []store.RaisedAlert) []store.RaisedAlert {
	for len(batch) < maxBatch {
		select {
		case a := <-n.queue:
			batch = append(batch, a)
		default:
			return batch
		}
	}
	return batch
}

// write folds batch into the outbox and wakes the sender. While the store
// fails it tries again, with backoff, for a few minutes or until the
// Notifier stops (then once more); after that it drops the batch, logged:
// the queue behind it must not wait for ever.
func (n *Notifier) write(ctx, end context.Context, batch []store.RaisedAlert) {
	for try := 1; ; try++ {
		err := n.outbox.RaiseAlerts(ctx, batch, n.keys, n.window)
		if err == nil {
			break
		}
		if end.Err() != nil && try > 1 || ctx.Err() != nil || try == writeTries {
			n.log.Error("alerts dropped: the store did not take them", "count", len(batch), "err", err)
			return
		}
		wait := delivery.Backoff(try, time.Second, time.Minute, n.rand())
		n.log.Warn("alerts not yet recorded: the store did not take them; retrying", "count", len(batch), "retry_in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-end.Done():
		}
		t.Stop()
	}
	if n.wrote != nil {
		n.wrote <- len(batch)
	}
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// sendLoop sends what the outbox holds for this Notifier's channels: at
// once when the writer queued something, and on every tick, which also
// queues the summaries whose window is over and, now and then, prunes.
// Posts run under ctx, which Stop does not cancel (a post in progress when
// Stop is called completes), until end ends: by Stop, after a final
// flush and one attempt at each due message; by ctx, at once.
func (n *Notifier) sendLoop(ctx, end context.Context, tick <-chan time.Time) {
	n.prune(ctx)
	for ticks := 1; ; ticks++ {
		select {
		case <-end.Done():
			if lifecycle.Stopped(end) {
				// The last words are bounded: what a channel does not take
				// now stays in the outbox for the next start.
				last, cancel := context.WithTimeout(ctx, n.client.Timeout+time.Second)
				n.flush(last, 0)
				n.send(last)
				cancel()
			}
			return
		case <-n.wake:
			n.send(ctx)
		case <-tick:
			n.flush(ctx, n.window)
			n.send(ctx)
			if ticks%pruneEvery == 0 {
				n.prune(ctx)
			}
			if n.tickDone != nil {
				n.tickDone <- struct{}{}
			}
		}
	}
}

// flush queues the summaries whose window is over; all of them for a
// window of 0.
func (n *Notifier) flush(ctx context.Context, window time.Duration) {
	if _, err := n.outbox.FlushAlerts(ctx, n.keys, window); err != nil {
		n.log.Warn("alert summaries not queued: the store failed; next flush retries", "err", err)
	}
}

// send claims the due messages of this Notifier's channels and posts
// each, until none is left due.
func (n *Notifier) send(ctx context.Context) {
	for ctx.Err() == nil {
		ms, err := n.outbox.ClaimAlerts(ctx, n.keys, claimLimit, lease)
		if err != nil {
			n.log.Warn("alerts not claimed: the store failed; next flush retries", "err", err)
			return
		}
		if len(ms) == 0 {
			return
		}
		for _, m := range ms {
			n.deliver(ctx, m)
		}
	}
}

// deliver posts m to its channel once and records what came of it: sent
// on a 2xx, else due again after a backoff.
func (n *Notifier) deliver(ctx context.Context, m store.AlertMessage) {
	s := n.byKey[m.Channel]
	var a Alert
	out := store.AlertOutcome{ID: m.ID, Attempt: m.Attempt}
	if err := json.Unmarshal(m.Message, &a); err != nil {
		// Not one of ours: left to be given up.
		out.RetryIn, out.Error = giveUp, "unreadable message: "+err.Error()
		n.log.Error("alert unreadable", "sink", s.name(), "kind", m.Kind, "err", err)
	} else {
		msg := message{Alert: a, More: m.More, Action: m.Action, DedupKey: m.DedupKey}
		// The log lines keep their old words ("sink"): operators match them.
		if err := n.post(ctx, s, msg); err != nil {
			out.RetryIn = delivery.Backoff(m.Attempt, retryInitial, retryMax, n.rand())
			out.Error = err.Error()
			n.log.Warn("alert sink failed", "sink", s.name(), "kind", m.Kind, "destination", m.Destination,
				"event_id", a.EventID, "delivery_id", a.DeliveryID, "more", m.More, "attempt", m.Attempt, "retry_in", out.RetryIn, "err", err)
		} else {
			out.Sent = true
			n.log.Debug("alert sent", "sink", s.name(), "kind", m.Kind, "destination", m.Destination, "more", m.More, "attempt", m.Attempt)
		}
	}
	// Recorded even when ctx ended (Stop's last words ran out of time):
	// a post that happened is not to be made again.
	held, err := n.outbox.FinishAlert(context.WithoutCancel(ctx), out)
	switch {
	case err != nil:
		n.log.Warn("alert outcome not recorded: the message may be sent again when its lease ends", "sink", s.name(), "kind", m.Kind, "err", err)
	case !held:
		n.log.Warn("alert outcome too late: its lease ran out, another sender may send it again", "sink", s.name(), "kind", m.Kind)
	}
}

// prune gives up on messages no channel took within giveUp (logging
// each) and deletes old finished ones.
func (n *Notifier) prune(ctx context.Context) {
	gone, err := n.outbox.PruneAlerts(ctx, giveUp, keep)
	if err != nil {
		n.log.Warn("alert outbox not pruned", "err", err)
	}
	for _, m := range gone {
		name := m.Channel
		if s, ok := n.byKey[m.Channel]; ok {
			name = s.name()
		}
		n.log.Log(ctx, slog.LevelError, "alert given up: no channel took it in a day", "sink", name, "kind", m.Kind,
			"destination", m.Destination, "attempts", m.Attempt, "err", m.LastError)
	}
}
