package inbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/anyhook/anyhook/inbox/inboxdriver"
)

// Record inserts the processed row for (ev.Source, handler, ev.ID) inside
// the caller's transaction tx, for callers that manage the transaction
// themselves. Apply is Record plus the transaction, waiting and retries.
//
// Processed means the row was inserted: go on with the business writes and
// commit; rolling back forgets the event. Duplicate means it was processed
// before: do nothing. InFlight means Do holds a claim on it. Conflict (with
// ErrConflict) means the body differs from the first delivery. On
// PostgreSQL, Record waits while another open transaction has inserted the
// same row.
func (ib *Inbox[TTx]) Record(ctx context.Context, tx TTx, handler string, ev Event) (Outcome, error) {
	if err := validKey(handler, ev); err != nil {
		return 0, err
	}
	out, err := ib.record(ctx, ib.drv.WrapTx(tx), handler, ev)
	if err != nil && out == 0 {
		return 0, fmt.Errorf("inbox: record %s/%s/%s: %w", ev.Source, handler, ev.ID, err)
	}
	return out, err
}

func (ib *Inbox[TTx]) record(ctx context.Context, x inboxdriver.Executor, handler string, ev Event) (Outcome, error) {
	hash := ev.hash()
	n, err := x.Exec(ctx, ib.q(`INSERT INTO inbox_events (source, handler, event_id, body_hash, status, updated_at)
		VALUES ($1, $2, $3, $4, 'done', {now}) ON CONFLICT DO NOTHING`), ev.Source, handler, ev.ID, hash)
	if err != nil {
		return 0, err
	}
	if n == 1 {
		return Processed, nil
	}
	var status, stored string
	var untilStale int64
	if err := x.QueryRow(ctx, ib.q(`SELECT status, body_hash,
			CASE WHEN status = 'claimed' AND stale_after > 0 THEN claimed_at + stale_after - {now} ELSE 0 END
		FROM inbox_events WHERE source = $1 AND handler = $2 AND event_id = $3`), ev.Source, handler, ev.ID).Scan(&status, &stored, &untilStale); err != nil {
		return 0, err
	}
	if hash != "" && stored != "" && hash != stored {
		return Conflict, fmt.Errorf("%w: %s/%s/%s", ErrConflict, ev.Source, handler, ev.ID)
	}
	switch status {
	case statusDone, statusFailed:
		return Duplicate, nil
	}
	// Do holds a claim on the event (or parked it): nothing changes before
	// that claim goes stale.
	hintRetry(ctx, time.Duration(untilStale)*time.Microsecond)
	return InFlight, nil
}

// Apply runs fn in a new transaction that also records (ev.Source, handler,
// ev.ID) as processed; both commit together or not at all.
//
//   - First delivery: fn runs; Processed once committed.
//   - Already processed: Duplicate; fn does not run.
//   - Another transaction is processing the same event and has not finished
//     within Config.InFlightWait (PostgreSQL), or Do holds a claim on it:
//     InFlight; fn does not run. (If that transaction rolls back, a later
//     delivery processes the event.) On SQLite a twin is not InFlight: the
//     transaction waits for the database lock, as the connection's
//     busy_timeout says, and then sees the twin's fate.
//   - Same id, different body: Conflict with ErrConflict; fn does not run.
//
// If fn returns an error the transaction rolls back and the error is
// returned with the zero Outcome, unless it is marked Permanent: then the
// failure is recorded in place of the business writes and Apply returns
// Failed with the error, so the sender is acknowledged and later deliveries
// are Duplicate. Serialization failures and deadlocks (from inbox's
// statements or fn's) re-run the whole transaction, fn included, up to
// Config.Retries times.
func (ib *Inbox[TTx]) Apply(ctx context.Context, handler string, ev Event, fn func(ctx context.Context, tx TTx) error) (Outcome, error) {
	if err := validKey(handler, ev); err != nil {
		return 0, err
	}
	if fn == nil {
		return 0, fmt.Errorf("%w: nil function", ErrInvalid)
	}
	out, err := ib.retry(ctx, func() (Outcome, error) { return ib.applyOnce(ctx, handler, ev, fn) })
	if err != nil && out == 0 {
		err = fmt.Errorf("inbox: apply %s/%s/%s: %w", ev.Source, handler, ev.ID, err)
	}
	if out == Failed {
		if ferr := ib.recordFailure(ctx, handler, ev, err); ferr != nil {
			return 0, fmt.Errorf("inbox: apply %s/%s/%s: record permanent failure: %w", ev.Source, handler, ev.ID, errors.Join(ferr, err))
		}
	}
	return out, err
}

func (ib *Inbox[TTx]) applyOnce(ctx context.Context, handler string, ev Event, fn func(ctx context.Context, tx TTx) error) (out Outcome, err error) {
	tx, err := ib.drv.Begin(ctx)
	if err != nil {
		return 0, err
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback(context.WithoutCancel(ctx))
		}
	}()
	restore, err := ib.waitLimit(ctx, tx)
	if err != nil {
		return 0, err
	}
	out, err = ib.record(ctx, tx, handler, ev)
	if err != nil {
		if out == 0 && ib.inFlight(err) {
			return InFlight, nil
		}
		return out, err
	}
	if out != Processed {
		return out, nil
	}
	restore()
	if err := fn(ctx, tx.Unwrap()); err != nil {
		if IsPermanent(err) {
			return Failed, err
		}
		return 0, err
	}
	if err := ib.hook(ctx, ApplyBeforeCommit); err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	committed = true
	return Processed, nil
}

// recordFailure stores a permanent failure of Apply's function in its own
// transaction, after the business transaction rolled back.
func (ib *Inbox[TTx]) recordFailure(ctx context.Context, handler string, ev Event, cause error) error {
	ctx = context.WithoutCancel(ctx)
	_, err := ib.drv.Exec(ctx, ib.q(`INSERT INTO inbox_events (source, handler, event_id, body_hash, status, updated_at, error)
		VALUES ($1, $2, $3, $4, 'failed', {now}, $5) ON CONFLICT DO NOTHING`), ev.Source, handler, ev.ID, ev.hash(), errText(cause))
	return err
}

// errText is the text of err as stored: at most 1000 bytes, cut between
// characters, with bytes that are not UTF-8 and NUL bytes as U+FFFD
// (PostgreSQL's text refuses them, and the failure would go unrecorded).
func errText(err error) string {
	if err == nil {
		return ""
	}
	s := strings.ReplaceAll(strings.ToValidUTF8(err.Error(), "\uFFFD"), "\x00", "\uFFFD")
	if len(s) > 1000 {
		n := 1000
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	return s
}
