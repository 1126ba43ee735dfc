// Package backfill fetches, after an outage, the events a provider could
// not deliver, through the provider's own API (docs/backfill.md), and
// records the missing ones through the same store path as ingest: the
// store's permanent dedup makes a backfill safe to run any number of
// times, and only what is truly missing becomes a new event.
package backfill

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/anyhook/anyhook/internal/store"
)

// Lister lists the event objects a provider's API holds for a window.
type Lister interface {
	// List calls page with each page of event objects received in
	// [from, to] (each the bytes of one event object as the provider
	// serialised it), in the API's order. An error of page stops it.
	List(ctx context.Context, from, to time.Time, page func(bodies [][]byte) error) error
}

// Recorder turns event objects into the events their webhooks would have
// been, and records them (an *ingest.Handler).
type Recorder interface {
	Fetched(ctx context.Context, source string, bodies [][]byte) ([]store.NewEvent, error)
	RecordFetched(ctx context.Context, evs []store.NewEvent) ([]store.IngestResult, error)
}

// Lookup reports whether source already holds an event with the
// provider's event id key; a dry run counts with it instead of recording.
type Lookup func(ctx context.Context, source, key string) (bool, error)

// Progress is how far a backfill got. Found counts the event objects the
// provider listed; each is AlreadyHad (recorded before, by its webhook or
// an earlier backfill) or New (recorded now, or in a dry run: would be).
type Progress struct {
	Pages      int `json:"pages"`
	Found      int `json:"found"`
	AlreadyHad int `json:"already_had"`
	New        int `json:"new"`
	// Redelivered counts the deliveries the gateway did not have that the
	// provider was asked to send again (GitHub); they arrive as webhooks later.
	Redelivered int `json:"redelivered,omitempty"`
	// RateLimited counts the answers 429 that were waited out.
	RateLimited int `json:"rate_limited"`
}

// Request is one backfill of one source.
type Request struct {
	Source   string
	From, To time.Time
	DryRun   bool
	Lister   Lister
	// Redeliverer replaces Lister for a provider that only redelivers
	// (GitHub).
	Redeliverer Redeliverer
	Recorder    Recorder
	Lookup      Lookup // for DryRun
	// MaxEvents bounds the events (or deliveries) one backfill fetches,
	// all held in memory before any is recorded; default 1,000,000.
	MaxEvents int
	// MaxPages bounds the pages one backfill fetches (events outside the
	// window, which neither count nor are held, still cost a page);
	// default 100,000.
	MaxPages int
	// MaxBytes bounds the bytes of those events; default 1 GiB.
	MaxBytes int64
	// Progress, when set, is told of every page fetched and every batch
	// recorded.
	Progress func(Progress)
}

// batch is how many events one store transaction records.
const batch = 100

// Run fetches every event object of the window, then records them oldest
// first (the order the provider meant them in, so an object's older
// events do not come out stale against its newer ones) in batches of
// batch. A failure while fetching records nothing; a failure while
// recording leaves what was recorded, which a rerun finds as already had.
func Run(ctx context.Context, r Request) (Progress, error) {
	var p Progress
	report := func() {
		if r.Progress != nil {
			r.Progress(p)
		}
	}
	for _, c := range []any{r.Lister, r.Redeliverer} {
		if w, ok := c.(interface{ OnRateLimit(func()) }); ok {
			w.OnRateLimit(func() { p.RateLimited++; report() })
		}
	}
	if r.Redeliverer != nil {
		return p, redeliver(ctx, r, r.Redeliverer, &p, report)
	}
	var bodies [][]byte
	var size int64
	err := r.Lister.List(ctx, r.From, r.To, func(page [][]byte) error {
		p.Pages++
		if limit := cmp.Or(r.MaxPages, 100_000); p.Pages > limit {
			return fmt.Errorf("the provider's API answered more than %d pages: backfill a shorter window", limit)
		}
		p.Found += len(page)
		for _, b := range page {
			size += int64(len(b))
		}
		if err := r.bound(p.Found); err != nil {
			return err
		}
		if limit := cmp.Or(r.MaxBytes, 1<<30); size > limit {
			return fmt.Errorf("the provider's events are more than %d bytes: backfill a shorter window", limit)
		}
		bodies = append(bodies, page...)
		report()
		return nil
	})
	if err != nil {
		return p, err
	}
	slices.Reverse(bodies) // the API lists newest first
	for chunk := range slices.Chunk(bodies, batch) {
		evs, err := r.Recorder.Fetched(ctx, r.Source, chunk)
		if err != nil {
			return p, err
		}
		if r.DryRun {
			for _, ne := range evs {
				had, err := r.Lookup(ctx, r.Source, ne.Event.DedupKey)
				if err != nil {
					return p, err
				}
				count(&p, had)
			}
		} else {
			res, err := r.Recorder.RecordFetched(ctx, evs)
			if err != nil {
				return p, fmt.Errorf("recording: %w", err)
			}
			for _, x := range res {
				count(&p, x.Duplicate)
			}
		}
		report()
	}
	return p, nil
}

// redeliver lists the hook's deliveries of the window, and asks for the
// latest delivery of each event the gateway does not have (by its dedup
// key, hook id and delivery GUID) to be sent again. Found counts the
// events (GUIDs, however many attempts each had); the redelivered ones
// arrive as webhooks, so New stays 0.
func redeliver(ctx context.Context, r Request, rd Redeliverer, p *Progress, report func()) error {
	seen := map[string]bool{}
	var latest []HookDelivery // the newest delivery of each GUID, newest first
	err := rd.Deliveries(ctx, r.From, r.To, func(page []HookDelivery) error {
		p.Pages++
		if limit := cmp.Or(r.MaxPages, 100_000); p.Pages > limit {
			return fmt.Errorf("the provider's API answered more than %d pages: backfill a shorter window", limit)
		}
		for _, d := range page {
			if !seen[d.GUID] {
				seen[d.GUID] = true
				latest = append(latest, d)
				p.Found++
			}
		}
		if err := r.bound(len(seen)); err != nil {
			return err
		}
		report()
		return nil
	})
	if err != nil {
		return err
	}
	slices.Reverse(latest) // oldest first, as they happened
	for _, d := range latest {
		had, err := r.Lookup(ctx, r.Source, rd.DedupKey(d))
		if err != nil {
			return err
		}
		if had {
			p.AlreadyHad++
			report()
			continue
		}
		if !r.DryRun {
			if err := rd.Redeliver(ctx, d); err != nil {
				return fmt.Errorf("redelivering %s: %w", d.GUID, err)
			}
		}
		p.Redelivered++
		report()
	}
	return nil
}

// bound is an error when a backfill has fetched more than MaxEvents.
func (r Request) bound(n int) error {
	limit := r.MaxEvents
	if limit <= 0 {
		limit = 1_000_000
	}
	if n > limit {
		return fmt.Errorf("the provider listed more than %d events: backfill a shorter window", limit)
	}
	return nil
}

func count(p *Progress, had bool) {
	if had {
		p.AlreadyHad++
	} else {
		p.New++
	}
}

// ErrNoAPIKey refuses a backfill of a source without an api_key.
var ErrNoAPIKey = errors.New("the source has no api_key: set one to backfill from the provider's API (docs/backfill.md)")
