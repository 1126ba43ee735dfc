package gateway

import (
	"context"
	"fmt"
	"time"

	"github.com/anyhook/anyhook/internal/alert"
	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/lifecycle"
)

// backlogWatch raises a pull_backlog alert for each pull destination
// whose oldest due delivery has waited longer than its
// alert_backlog_after: nobody is consuming it (docs/pull.md). It alerts
// when the wait crosses the bound, then at most every backlogRepeat while
// it stays above, in each process (the alert outbox folds the copies of
// several processes within its window).
type backlogWatch struct {
	g    *Gateway
	run  lifecycle.Runner
	last map[string]time.Time // destination → when this process last alerted
}

const backlogRepeat = time.Hour

func (b *backlogWatch) Start(ctx context.Context) {
	var every time.Duration
	for _, name := range b.g.cfg.DestinationOrder {
		if d := b.g.cfg.Destinations[name]; d != nil && d.Type == config.TypePull {
			if w := min(d.AlertBacklogAfter.D()/2, time.Minute); every == 0 || w < every {
				every = w
			}
		}
	}
	if every <= 0 {
		return
	}
	b.last = map[string]time.Time{}
	b.run.Start(ctx, func(ctx context.Context) {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			b.check(ctx)
		}
	})
}

func (b *backlogWatch) Stop() { b.run.Stop() }

func (b *backlogWatch) check(ctx context.Context) {
	var pulls []string
	for _, name := range b.g.cfg.DestinationOrder {
		if d := b.g.cfg.Destinations[name]; d != nil && d.Type == config.TypePull {
			pulls = append(pulls, name)
		}
	}
	qs, err := b.g.store.QueueStats(ctx, pulls)
	if err != nil {
		if ctx.Err() == nil {
			b.g.log.Warn("reading the pull destinations' backlog failed", "err", err)
		}
		return
	}
	now := b.g.now()
	for _, name := range pulls {
		bound := b.g.cfg.Destinations[name].AlertBacklogAfter.D()
		age := qs.OverdueFor(name)
		if age <= bound {
			delete(b.last, name) // below again: the next crossing alerts at once
			continue
		}
		if at, ok := b.last[name]; ok && now.Sub(at) < backlogRepeat {
			continue
		}
		b.last[name] = now
		b.g.alerts.Notify(ctx, alert.Alert{Kind: alert.PullBacklog, Destination: name, Time: now,
			Message: fmt.Sprintf("pull destination %s: its oldest due delivery has waited %s for a consumer (alert_backlog_after %s); is its consumer (anyhook listen, a worker) running?",
				name, age.Round(time.Second), bound)})
	}
}
