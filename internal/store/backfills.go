package store

import (
	"context"
	"errors"
	"time"
)

// Backfill is one backfill of a source as the database keeps it: every
// process of a gateway sharing the database sees the latest of each source,
// and it outlives the process that ran it (docs/backfill.md).
type Backfill struct {
	Source string
	// Run is the backfill's own id, made when it starts: only the process
	// running it writes it (SaveBackfill), and a later backfill of the
	// source replaces it.
	Run        string
	From, To   time.Time // To zero: up to the start
	DryRun     bool
	By         string // who started it
	State      string // running, done or failed (internal/backfill)
	Progress   []byte // its counts, JSON (internal/backfill.Progress)
	Error      string
	StartedAt  time.Time
	FinishedAt time.Time // zero while it runs
	// HeardAt is when the process running it last wrote it, by the
	// database's clock (set by StartBackfill and SaveBackfill): a running
	// backfill not heard from for long ran in a process that stopped.
	HeardAt time.Time
	// Stale, read by LatestBackfill, says it is running and was not heard
	// from for the staleAfter asked, by the database's clock (so clock
	// skew between the gateway's hosts cannot make a live one look
	// stopped).
	Stale bool
}

// ErrBackfillRunning answers StartBackfill when the source's latest
// backfill is running and its process was heard from lately.
var ErrBackfillRunning = errors.New("a backfill of this source is running")

// BackfillLog is the part of Store that keeps the latest backfill of each
// source.
type BackfillLog interface {
	// StartBackfill records b as its source's latest backfill, heard from
	// now, unless the latest is running and was heard from within
	// staleAfter: then it returns that one and ErrBackfillRunning. Two
	// processes starting a backfill of one source at once: one of them
	// starts it.
	StartBackfill(ctx context.Context, b Backfill, staleAfter time.Duration) (Backfill, error)
	// SaveBackfill writes b, heard from now, over its source's latest
	// backfill if that is still b's run, and says whether it was.
	SaveBackfill(ctx context.Context, b Backfill) (bool, error)
	// LatestBackfill returns source's latest backfill, Stale when it is
	// running and was not heard from within staleAfter; false when none
	// was ever started.
	LatestBackfill(ctx context.Context, source string, staleAfter time.Duration) (Backfill, bool, error)
}
