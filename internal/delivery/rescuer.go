package delivery

import (
	"context"
	"log/slog"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// rescuer handles the claims whose lease ran out (their worker died, or
// stalled past its deadline): every tick it asks the store to apply each
// destination's stale-claim rule, then reports what changed. The store
// decides what is expired, by its own clock; on PostgreSQL the rescuers
// of every process split the expired claims between them.
type rescuer struct {
	st interface {
		Rescue(ctx context.Context, rule func(destination string) (store.StaleRule, bool)) ([]anyhook.Delivery, error)
	}
	rule  func(destination string) (store.StaleRule, bool)
	every time.Duration
	log   *slog.Logger
	// rescued is told of each delivery the store changed (metrics,
	// alerts); wake, once per tick that changed any, that deliveries may
	// be due again.
	rescued func(anyhook.Delivery)
	wake    func()
}

func (e *Engine) rescuer() *rescuer {
	return &rescuer{st: e.st, rule: e.rule, every: e.opt.PollInterval, log: e.log, wake: e.Wake,
		rescued: func(d anyhook.Delivery) {
			if e.opt.Observer != nil {
				e.opt.Observer.Rescued(d.Destination, d.Status)
			}
			e.notify(d)
		}}
}

// run rescues every tick until ctx ends.
func (r *rescuer) run(ctx context.Context) {
	tick := time.NewTicker(r.every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		ds, err := r.st.Rescue(ctx, r.rule)
		if err != nil {
			if ctx.Err() == nil {
				r.log.Warn("rescue failed", "err", err)
			}
			continue
		}
		for _, d := range ds {
			r.log.Warn("claim expired", "delivery_id", d.ID, "event_id", d.EventID, "destination", d.Destination, "attempt", d.AttemptCount, "now", d.Status)
			r.rescued(d)
		}
		if len(ds) > 0 {
			r.wake()
		}
	}
}
