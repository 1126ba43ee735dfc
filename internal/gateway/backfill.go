package gateway

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/anyhook/anyhook/internal/backfill"
	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/ingest"
	"github.com/anyhook/anyhook/internal/store"
)

// NewBackfiller returns the backfiller of cfg's sources, recording
// through h (the gateway's own ingest handler, or one over the store for
// the command line; see IngestHandler).
func NewBackfiller(cfg *config.Config, h *ingest.Handler, st store.Store) *backfill.Backfiller {
	return &backfill.Backfiller{
		Sources: backfillSources(cfg),
		Unknown: func(source string) error {
			return fmt.Errorf("no source %q in %s (its sources: %s)", source, cfg.Path, strings.Join(slices.Sorted(maps.Keys(cfg.Sources)), ", "))
		},
		Recorder: h,
		Lookup: func(ctx context.Context, source, key string) (bool, error) {
			evs, _, err := st.ListEvents(ctx, store.EventFilter{Source: source, Q: key, Limit: 1})
			return len(evs) > 0, err
		},
	}
}

// IngestHandler is an ingest handler for the named sources of cfg (every
// one when none is named) that records into st directly (the command
// line's backfill; serve's goes through its batcher and wakes its
// workers).
func IngestHandler(cfg *config.Config, st store.Store, names ...string) (*ingest.Handler, error) {
	sources, err := ingestSources(cfg, names...)
	if err != nil {
		return nil, err
	}
	return ingest.New(ingest.Options{Sources: sources, Recorder: st}), nil
}

// backfillAPI is what the admin API and the dashboard start and watch
// backfills with.
type backfillAPI struct {
	b    *backfill.Backfiller
	jobs *backfill.Jobs
}

// Start checks source and starts a backfill of it in the background.
func (a backfillAPI) Start(source string, from, to time.Time, dryRun bool, by string) (backfill.Job, error) {
	if err := a.b.Check(source); err != nil {
		return backfill.Job{}, err
	}
	return a.jobs.Start(source, from, to, dryRun, by)
}

// Get returns the latest backfill of source.
func (a backfillAPI) Get(source string) (backfill.Job, bool, error) { return a.jobs.Get(source) }

// Wait waits for the latest backfill of source to finish.
func (a backfillAPI) Wait(ctx context.Context, source string) (backfill.Job, bool, error) {
	return a.jobs.Wait(ctx, source)
}
