package backfill

import (
	"context"
	"fmt"
	"time"
)

// Backfiller runs backfills of a set of sources (docs/backfill.md): it
// reads each from its provider's API with the source's api_key and records
// what is missing through Recorder, so the store path (dedup, stale rules,
// deliveries) is the one webhooks take. The wiring (internal/gateway)
// builds it from the config.
type Backfiller struct {
	// Sources are the configured sources, by name.
	Sources map[string]Source
	// Unknown is the error of a source that Sources lacks.
	Unknown  func(source string) error
	Recorder Recorder
	Lookup   Lookup // a dry run's "already had"
	// Sleep, when set, replaces the waits after a 429 (tests).
	Sleep func(ctx context.Context, d time.Duration) error
}

// Source is how one source is backfilled.
type Source struct {
	// Refused says why the source cannot be backfilled (a provider
	// without a backfill, no api_key), naming its key in the config; nil:
	// it can.
	Refused  error
	Provider string // stripe, paddle or github
	// Client reads the provider's API; its Sleep is the Backfiller's.
	Client Client
	// Repo or Org, and HookID, name the hook a GitHub source's
	// deliveries are redelivered from.
	Repo, Org string
	HookID    int64
}

// Check says why source cannot be backfilled, if it cannot: no such
// source, no api_key, a provider without a backfill. Its error names the
// source's key in the file.
func (b *Backfiller) Check(source string) error {
	src, ok := b.Sources[source]
	if !ok {
		return b.Unknown(source)
	}
	return src.Refused
}

// Run backfills source over [from, to] (to zero: now); progress, when
// set, is told of each page and batch.
func (b *Backfiller) Run(ctx context.Context, source string, from, to time.Time, dryRun bool, progress func(Progress)) (Progress, error) {
	if err := b.Check(source); err != nil {
		return Progress{}, err
	}
	src := b.Sources[source]
	r := Request{Source: source, From: from, To: to, DryRun: dryRun, Recorder: b.Recorder, Lookup: b.Lookup, Progress: progress}
	c := src.Client
	c.Sleep = b.Sleep
	switch src.Provider {
	case "stripe":
		r.Lister = &Stripe{Client: c}
	case "paddle":
		r.Lister = &Paddle{Client: c}
	case "github":
		r.Redeliverer = &GitHub{Client: c, Repo: src.Repo, Org: src.Org, HookID: src.HookID}
	default:
		return Progress{}, fmt.Errorf("source %s: provider %s has no backfill", source, src.Provider)
	}
	return Run(ctx, r)
}
