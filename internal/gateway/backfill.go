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

// Backfiller runs backfills of the sources of one configuration
// (docs/backfill.md): it reads each from its provider's API with the
// source's api_key and records what is missing through an ingest
// handler, so the store path (dedup, stale rules, deliveries) is the one
// webhooks take.
type Backfiller struct {
	cfg   *config.Config
	rec   backfill.Recorder
	store store.Store
	// Sleep, when set, replaces the waits after a 429 (tests).
	Sleep func(ctx context.Context, d time.Duration) error
}

// NewBackfiller returns a Backfiller that records through h (the
// gateway's own ingest handler, or one over the store for the command
// line; see IngestHandler).
func NewBackfiller(cfg *config.Config, h *ingest.Handler, st store.Store) *Backfiller {
	return &Backfiller{cfg: cfg, rec: h, store: st}
}

// IngestHandler is an ingest handler for cfg's sources that records into
// st directly (the command line's backfill; serve's goes through its
// batcher and wakes its workers).
func IngestHandler(cfg *config.Config, st store.Store) (*ingest.Handler, error) {
	sources, err := ingestSources(cfg)
	if err != nil {
		return nil, err
	}
	return ingest.New(ingest.Options{Sources: sources, Recorder: st}), nil
}

// Check says why source cannot be backfilled, if it cannot: no such
// source, no api_key, a provider without a backfill. Its error names the
// source's key in the file.
func (b *Backfiller) Check(source string) error {
	src := b.cfg.Sources[source]
	if src == nil {
		return fmt.Errorf("no source %q in %s (its sources: %s)", source, b.cfg.Path, strings.Join(slices.Sorted(maps.Keys(b.cfg.Sources)), ", "))
	}
	if !slices.Contains(config.BackfillProviders, src.Provider) {
		// Said first: an api_key would not help.
		return b.cfg.Errorf("sources."+source+".provider", "provider %s has no backfill (backfill reads %s)", src.Provider, strings.Join(config.BackfillProviders, ", "))
	}
	if src.APIKey == "" {
		return b.cfg.Errorf("sources."+source, "%v", backfill.ErrNoAPIKey)
	}
	return nil
}

// client sets r's API client for source: a Lister, or a Redeliverer.
func (b *Backfiller) client(source string, r *backfill.Request) error {
	src := b.cfg.Sources[source]
	c := backfill.Client{Base: src.APIBase, Key: src.APIKey, Sleep: b.Sleep, UserAgent: userAgent()}
	switch {
	case src.Provider == "stripe":
		r.Lister = &backfill.Stripe{Client: c}
	case src.Provider == "paddle":
		r.Lister = &backfill.Paddle{Client: c}
	case src.Provider == "github" && src.Backfill != nil:
		r.Redeliverer = &backfill.GitHub{Client: c, Repo: src.Backfill.Repo, Org: src.Backfill.Org, HookID: src.Backfill.HookID}
	default:
		return b.cfg.Errorf("sources."+source+".provider", "provider %s has no backfill", src.Provider)
	}
	return nil
}

// Run backfills source over [from, to] (to zero: now); progress, when
// set, is told of each page and batch.
func (b *Backfiller) Run(ctx context.Context, source string, from, to time.Time, dryRun bool, progress func(backfill.Progress)) (backfill.Progress, error) {
	if err := b.Check(source); err != nil {
		return backfill.Progress{}, err
	}
	r := backfill.Request{Source: source, From: from, To: to, DryRun: dryRun, Recorder: b.rec, Lookup: b.lookup, Progress: progress}
	if err := b.client(source, &r); err != nil {
		return backfill.Progress{}, err
	}
	return backfill.Run(ctx, r)
}

// lookup reports whether source holds an event with provider event id
// key (a dry run's "already had").
func (b *Backfiller) lookup(ctx context.Context, source, key string) (bool, error) {
	evs, _, err := b.store.ListEvents(ctx, store.EventFilter{Source: source, Q: key, Limit: 1})
	return len(evs) > 0, err
}

// backfillAPI is what the admin API and the dashboard start and watch
// backfills with.
type backfillAPI struct {
	b    *Backfiller
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
