package gateway

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/admin"
	"github.com/anyhook/anyhook/internal/alert"
	"github.com/anyhook/anyhook/internal/dashboard"
	"github.com/anyhook/anyhook/internal/ledger"
	"github.com/anyhook/anyhook/internal/store"
)

// logParts are the tamper-evident log's background parts (docs/ledger.md);
// nil when the store keeps no log.
type logParts struct {
	reader ledger.Reader
	seq    *ledger.Sequencer
	cpr    *ledger.Checkpointer

	mu        sync.Mutex
	problem   string // the last failed self-check or late event
	problemAt time.Time
}

// newLog loads (or creates) the signing key, makes sure it is the log's
// key (recorded in the database by the first process to start), and builds
// the sequencer and checkpointer over st, when st keeps a log.
func (g *Gateway) newLog(ctx context.Context, st store.Store) error {
	l, ok := st.(store.Ledger)
	if !ok {
		return nil
	}
	_, statErr := os.Stat(g.cfg.LogKeyPath())
	created := errors.Is(statErr, fs.ErrNotExist)
	key, err := ledger.LoadOrCreateKey(g.cfg.LogKeyPath(), g.cfg.Log.Origin)
	if err != nil {
		return &ConfigError{g.cfg.Errorf("log.key_file", "%v", err)}
	}
	if err := ledger.PinKey(ctx, l, key); err != nil {
		var km *ledger.KeyMismatchError
		if errors.As(err, &km) {
			if created {
				// A key made just now for a log that has one already
				// would only be a stray file next to the config.
				os.Remove(g.cfg.LogKeyPath())
			}
			return &ConfigError{g.cfg.Errorf("log.key_file", "%s: %s", g.cfg.LogKeyPath(), km.Reason)}
		}
		return fmt.Errorf("%s: database: %w", g.cfg.Path, err)
	}
	g.ledger = &logParts{
		reader: ledger.Reader{Store: l, Key: key},
		seq: ledger.NewSequencer(l, ledger.SequencerOptions{
			Interval: g.seqInterval,
			Logger:   g.log,
			OnLate: func(ev anyhook.Event) {
				g.logAlert(ev.ID, fmt.Sprintf("event %s (source %s, received %s) entered the log long after a checkpoint that should have held it: was it inserted into the database directly? Run anyhook log verify.",
					ev.ID, ev.Source, ev.ReceivedAt.Format(time.RFC3339)))
			},
		}),
		cpr: ledger.NewCheckpointer(l, ledger.CheckpointerOptions{
			Key:       key,
			Origin:    g.cfg.Log.Origin,
			Interval:  g.cfg.Log.CheckpointInterval.D(),
			PushURL:   g.cfg.Log.PushURL,
			Retention: g.cfg.Log.Retention.D(),
			Logger:    g.log,
			OnFailure: func(err error) {
				g.logAlert("", "the tamper-evident log failed its self-check: "+err.Error()+". Run anyhook log verify.")
			},
		}),
	}
	return nil
}

// logStatus is the log's state for the dashboard: the latest checkpoint
// and the last problem this process saw. Nil without a log.
func (g *Gateway) logStatus(ctx context.Context) (dashboard.LogStatus, error) {
	var ls dashboard.LogStatus
	if g.ledger == nil {
		return ls, nil
	}
	cp, err := g.ledger.reader.Store.LatestCheckpoint(ctx)
	switch {
	case err == nil:
		ls.Size, ls.CheckpointAt = cp.Size, cp.CreatedAt
	case !errors.Is(err, anyhook.ErrNotFound):
		return ls, err
	}
	g.ledger.mu.Lock()
	ls.Problem, ls.ProblemAt = g.ledger.problem, g.ledger.problemAt
	g.ledger.mu.Unlock()
	return ls, nil
}

func (g *Gateway) logAlert(eventID, msg string) {
	if g.ledger != nil {
		g.ledger.mu.Lock()
		g.ledger.problem, g.ledger.problemAt = msg, time.Now()
		g.ledger.mu.Unlock()
	}
	g.alerts.Notify(context.Background(), alert.Alert{Kind: alert.LogVerificationFailed, EventID: eventID, Message: msg, Time: time.Now(), URL: g.eventURL(eventID)})
}

// logAPI is what the admin API serves the log from; nil without a log.
func (g *Gateway) logAPI() admin.Log {
	if g.ledger == nil {
		return nil
	}
	return g.ledger.reader
}

func (g *Gateway) startLog(ctx context.Context) {
	if g.ledger != nil {
		g.ledger.seq.Start(ctx)
		g.ledger.cpr.Start(ctx)
	}
}

// stopLog sequences what ingest committed and signs a last checkpoint.
func (g *Gateway) stopLog() {
	if g.ledger != nil {
		g.ledger.seq.Stop()
		g.ledger.cpr.Stop()
	}
}
