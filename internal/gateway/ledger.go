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
	"github.com/anyhook/anyhook/internal/alert"
	"github.com/anyhook/anyhook/internal/dashboard"
	"github.com/anyhook/anyhook/internal/ledger"
	"github.com/anyhook/anyhook/internal/store"
)

// ledgerParts are the tamper-evident ledger's background parts (docs/ledger.md).
type ledgerParts struct {
	reader ledger.Reader
	seq    *ledger.Sequencer
	cpr    *ledger.Checkpointer

	mu        sync.Mutex
	problem   string // the last failed self-check or late event
	problemAt time.Time
}

// newLedger loads (or creates) the signing key, makes sure it is the ledger's
// key (recorded in the database by the first process to start), and builds
// the sequencer and checkpointer over l.
func (g *Gateway) newLedger(ctx context.Context, l store.Ledger) error {
	_, statErr := os.Stat(g.cfg.LedgerKeyPath())
	created := errors.Is(statErr, fs.ErrNotExist)
	key, err := ledger.LoadOrCreateKey(g.cfg.LedgerKeyPath(), g.cfg.Ledger.Origin)
	if err != nil {
		return &ConfigError{g.cfg.Errorf("log.key_file", "%v", err)}
	}
	if err := ledger.PinKey(ctx, l, key); err != nil {
		var km *ledger.KeyMismatchError
		if errors.As(err, &km) {
			if created {
				// A key made just now for a ledger that has one already
				// would only be a stray file next to the config; the
				// file that is missing is the one to restore.
				os.Remove(g.cfg.LedgerKeyPath())
				return &ConfigError{g.cfg.Errorf("log.key_file", "the log's key file %s is missing: after restoring a database from a backup, restore the key file kept with it (docs/reliability.md, \"Backup and restore\"). A new key made in its place was refused and removed: %s",
					g.cfg.LedgerKeyPath(), km.Reason)}
			}
			return &ConfigError{g.cfg.Errorf("log.key_file", "%s: %s", g.cfg.LedgerKeyPath(), km.Reason)}
		}
		return fmt.Errorf("%s: database: %w", g.cfg.Path, err)
	}
	cpo := checkpointerOptions(g.cfg, key)
	cpo.Logger, cpo.Now, cpo.Incidents = g.log, g.now, g.store
	cpo.OnFailure = func(err error) {
		g.ledgerAlert("", "the tamper-evident log failed its self-check: "+err.Error()+". Run anyhook log verify.")
	}
	g.ledger = &ledgerParts{
		reader: ledger.Reader{Store: l, Key: key},
		seq: ledger.NewSequencer(l, ledger.SequencerOptions{
			Interval: g.seqInterval,
			Logger:   g.log,
			OnLate: func(ev anyhook.Event) {
				g.ledgerAlert(ev.ID, fmt.Sprintf("event %s (source %s, received %s) entered the log long after a checkpoint that should have held it: was it inserted into the database directly? Run anyhook log verify.",
					ev.ID, ev.Source, ev.ReceivedAt.Format(time.RFC3339)))
			},
		}),
		cpr: ledger.NewCheckpointer(l, cpo),
	}
	return nil
}

// ledgerStatus is the ledger's state for the dashboard: the latest checkpoint
// and the last problem this process saw.
func (g *Gateway) ledgerStatus(ctx context.Context) (dashboard.LedgerStatus, error) {
	var ls dashboard.LedgerStatus
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

func (g *Gateway) ledgerAlert(eventID, msg string) {
	g.ledger.mu.Lock()
	g.ledger.problem, g.ledger.problemAt = msg, g.now()
	g.ledger.mu.Unlock()
	g.alerts.Notify(context.Background(), alert.Alert{Kind: alert.LedgerVerificationFailed, EventID: eventID, Message: msg, Time: g.now(), URL: g.eventURL(eventID)})
}

func (g *Gateway) startLedger(ctx context.Context) {
	g.ledger.seq.Start(ctx)
	g.ledger.cpr.Start(ctx)
}

// stopLedger sequences what ingest committed and signs a last checkpoint.
func (g *Gateway) stopLedger() {
	g.ledger.seq.Stop()
	g.ledger.cpr.Stop()
}
