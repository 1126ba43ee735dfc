package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/lifecycle"
	"github.com/anyhook/anyhook/internal/store"
)

// Defaults.
const (
	DefaultSequenceInterval = time.Second
	DefaultBatchSize        = 128
	// DefaultLag bounds how long a genuine event may take from its receive
	// time to its commit plus sequencing. An event older than that with no
	// ledger position, or one that turns up that much after a checkpoint that
	// should have held it, is reported as inserted.
	DefaultLag = 5 * time.Minute
)

// SequencerOptions configure a Sequencer.
type SequencerOptions struct {
	Interval  time.Duration // between rounds; default 1s
	BatchSize int           // events per transaction; default 128
	Lag       time.Duration // see DefaultLag
	Logger    *slog.Logger
	// OnLate is called for an event that entered the ledger suspiciously late
	// (see store.LedgerEntry.Late).
	OnLate func(ev anyhook.Event)
}

// Sequencer gives ledger positions to committed events, in batches.
type Sequencer struct {
	st  store.Ledger
	opt SequencerOptions
	loop
}

// NewSequencer returns a sequencer over st; Start runs it.
func NewSequencer(st store.Ledger, opt SequencerOptions) *Sequencer {
	if opt.Interval <= 0 {
		opt.Interval = DefaultSequenceInterval
	}
	if opt.BatchSize <= 0 {
		opt.BatchSize = DefaultBatchSize
	}
	if opt.Lag <= 0 {
		opt.Lag = DefaultLag
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Sequencer{st: st, opt: opt}
	var warned time.Time // when a failed round was last logged
	s.loop = newLoop(opt.Interval, func(ctx context.Context) {
		// A failure usually lasts (a table gone, the disk full): logged
		// at most once a second however short the interval.
		if _, err := s.Run(ctx); err != nil && ctx.Err() == nil && time.Since(warned) >= time.Second {
			warned = time.Now()
			s.opt.Logger.Warn("ledger: sequencing failed", "err", err)
		}
	})
	return s
}

// Run sequences every event waiting, batch by batch, and returns how many
// it appended.
func (s *Sequencer) Run(ctx context.Context) (int, error) {
	total := 0
	for {
		n, err := s.Once(ctx)
		total += n
		if err != nil || n < s.opt.BatchSize {
			return total, err
		}
	}
}

// Once appends one batch of at most BatchSize events.
func (s *Sequencer) Once(ctx context.Context) (int, error) {
	var lateBefore time.Time
	cp, err := s.st.LatestCheckpoint(ctx)
	switch {
	case err == nil:
		lateBefore = cp.CreatedAt.Add(-s.opt.Lag)
	case !errors.Is(err, anyhook.ErrNotFound):
		return 0, err
	}
	var late []anyhook.Event
	n, err := s.st.Sequence(ctx, s.opt.BatchSize, func(size int64, evs []anyhook.Event, read func([]int64) ([]store.Hash, error)) (store.LedgerBatch, error) {
		late = late[:0]
		b := store.LedgerBatch{HashIndex: tlog.StoredHashCount(size)}
		pending := map[int64]tlog.Hash{}
		r := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
			out := make([]tlog.Hash, len(idx))
			var want []int64
			for _, x := range idx {
				if _, ok := pending[x]; !ok {
					want = append(want, x)
				}
			}
			got, err := read(want)
			if err != nil {
				return nil, err
			}
			for i, x := range idx {
				h, ok := pending[x]
				if !ok {
					h, got = got[0], got[1:]
				}
				out[i] = h
			}
			return out, nil
		})
		for i := range evs {
			ev := &evs[i]
			n := size + int64(i)
			leaf := LeafOf(ev)
			hs, err := tlog.StoredHashesForRecordHash(n, leaf.Hash, r)
			if err != nil {
				return b, fmt.Errorf("ledger: hashes for entry %d: %w", n, err)
			}
			first := tlog.StoredHashCount(n)
			for j, h := range hs {
				pending[first+int64(j)] = h
				b.Hashes = append(b.Hashes, h)
			}
			e := store.LedgerEntry{Index: n, EventID: ev.ID, HeaderHash: leaf.HeaderHash, BodyHash: leaf.BodyHash, LeafHash: leaf.Hash}
			if !lateBefore.IsZero() && ev.ReceivedAt.Before(lateBefore) {
				e.Late = true
				late = append(late, anyhook.Event{ID: ev.ID, Source: ev.Source, DedupKey: ev.DedupKey, ReceivedAt: ev.ReceivedAt})
			}
			b.Entries = append(b.Entries, e)
		}
		return b, nil
	})
	if err != nil {
		return 0, fmt.Errorf("ledger: sequence: %w", err)
	}
	for _, ev := range late {
		s.opt.Logger.Warn("ledger: event entered the log long after a checkpoint that should have held it; was it inserted into the database directly?",
			"event_id", ev.ID, "source", ev.Source, "received_at", ev.ReceivedAt)
		if s.opt.OnLate != nil {
			s.opt.OnLate(ev)
		}
	}
	return n, nil
}

// finalRound bounds the round run at Stop.
const finalRound = 5 * time.Second

// loop runs round every interval (and at once on Start) until Stop.
type loop struct {
	interval time.Duration
	round    func(ctx context.Context)

	run lifecycle.Runner
}

func newLoop(interval time.Duration, round func(ctx context.Context)) loop {
	return loop{interval: interval, round: round}
}

// Start runs the loop in the background until ctx ends or Stop.
func (l *loop) Start(ctx context.Context) {
	l.run.Start(ctx, func(ctx context.Context) {
		t := time.NewTicker(l.interval)
		defer t.Stop()
		for {
			l.round(ctx)
			select {
			case <-ctx.Done():
				// One last round, so that a clean shutdown leaves nothing
				// waiting.
				fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalRound)
				l.round(fctx)
				cancel()
				return
			case <-t.C:
			}
		}
	})
}

// Stop ends the loop after one last round and waits for it. It is
// idempotent.
func (l *loop) Stop() { l.run.Stop() }
