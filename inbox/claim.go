package inbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/anyhook/anyhook/inbox/inboxdriver"
)

// Statuses of a row in inbox_events.
const (
	statusDone     = "done"     // processed; later deliveries are duplicates
	statusFailed   = "failed"   // permanent failure recorded; acknowledged
	statusClaimed  = "claimed"  // an owner (token) is running the effect
	statusHeld     = "held"     // parked for a person
	statusReleased = "released" // provably not applied; the next delivery runs it
)

type policyKind int

const (
	policyReclaim policyKind = iota + 1
	policyHold
)

// Policy says what Do does with a claim that has been claimed for longer than
// a duration, judged by the database clock: its owner crashed, hung, or
// failed uncertainly. There is no default; the zero Policy is rejected with
// ErrNoPolicy, because only the handler's author knows whether running the
// effect twice is worse than not running it.
type Policy struct {
	kind  policyKind
	after time.Duration
	max   int
}

// Reclaim returns a policy that takes over a claim older than after, with a
// new token, and runs the effect again: for effects the downstream dedupes by
// Claim.Key (an email provider's idempotency key). The effect runs at most
// maxAttempts times in all; a stale claim after that is held.
func Reclaim(after time.Duration, maxAttempts int) Policy {
	return Policy{kind: policyReclaim, after: after, max: maxAttempts}
}

// Hold returns a policy that parks a claim older than after as Held without
// running the effect again: for effects where a duplicate is worse than a
// delay (capturing a charge). A person lists held claims with Inbox.Held and
// settles them with Inbox.Resolve.
func Hold(after time.Duration) Policy {
	return Policy{kind: policyHold, after: after}
}

func (p Policy) String() string {
	switch p.kind {
	case policyReclaim:
		return fmt.Sprintf("reclaim after %v (max %d)", p.after, p.max)
	case policyHold:
		return fmt.Sprintf("hold after %v", p.after)
	}
	return "no policy"
}

func (p Policy) validate() error {
	switch p.kind {
	case 0:
		return ErrNoPolicy
	case policyReclaim:
		if p.max < 1 {
			return fmt.Errorf("%w: Reclaim max attempts %d < 1", ErrInvalid, p.max)
		}
	}
	if p.after <= 0 {
		return fmt.Errorf("%w: stale duration %v must be positive", ErrInvalid, p.after)
	}
	return nil
}

// Claim is a worker's ownership of one event for one handler.
type Claim struct {
	// Key is stable across every claim and reclaim of (source, handler,
	// event id). Send it as the idempotency key of the side effect so the
	// downstream service dedupes a re-run.
	Key string
	// Token fences this owner: a finish with a token that is no longer
	// current fails with ErrLostClaim.
	Token string
	// Attempt is 1 for the first run of the effect, 2 for the next, ….
	Attempt int
}

// ClaimKey returns the stable Claim.Key of (source, handler, eventID).
func ClaimKey(source, handler, eventID string) string {
	h := sha256.New()
	for _, s := range []string{source, handler, eventID} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	return "inbox_" + hex.EncodeToString(h.Sum(nil)[:16])
}

// Effect is a side effect that cannot roll back, for Do.
type Effect[TTx any] struct {
	// Policy for stale claims: Reclaim or Hold. Required.
	Policy Policy
	// Run performs the side effect. Return nil when it is done, an error
	// marked NotApplied when it provably did not happen, an error marked
	// Permanent when it can never succeed, and any other error when the
	// outcome is unknown. Required.
	Run func(ctx context.Context, c Claim) error
	// Finish, if set, writes the local consequences of the effect (the
	// charge id, "receipt sent") in the transaction that marks the claim
	// done. If the claim was lost meanwhile, these writes roll back.
	Finish func(ctx context.Context, tx TTx, c Claim) error
}

// Do runs a side effect that cannot roll back at most once per (ev.Source,
// handler, ev.ID), unless e.Policy says to re-run it after a crash:
//
//  1. claim: a transaction of its own inserts or takes over the claim with a
//     fresh token, and commits;
//  2. run: e.Run performs the effect;
//  3. finish: one transaction runs e.Finish and marks the claim done, fenced
//     by the token, so a worker that lost its claim cannot overwrite the
//     new owner (ErrLostClaim, its Finish writes roll back).
//
// Outcomes: Processed; Duplicate (done before, or failed permanently); InFlight
// (claimed by another owner, not yet stale, or another reclaimer won);
// Held (stale under Hold, or Reclaim out of attempts, or held before);
// Released, Failed, Uncertain (by e.Run's error, which is returned);
// Conflict (ErrConflict). Recording the result after the effect ran uses a
// context that is not cancelled with ctx. A serialization failure or
// deadlock in the finish (inbox's statement or e.Finish's) re-runs the
// finish transaction, e.Finish included but not e.Run, up to
// Config.Retries times, like Apply.
func (ib *Inbox[TTx]) Do(ctx context.Context, handler string, ev Event, e Effect[TTx]) (Outcome, error) {
	if err := validKey(handler, ev); err != nil {
		return 0, err
	}
	if err := e.Policy.validate(); err != nil {
		return 0, fmt.Errorf("inbox: do %s/%s/%s: %w", ev.Source, handler, ev.ID, err)
	}
	if e.Run == nil {
		return 0, fmt.Errorf("%w: nil Effect.Run", ErrInvalid)
	}
	wrap := func(err error) error {
		return fmt.Errorf("inbox: do %s/%s/%s: %w", ev.Source, handler, ev.ID, err)
	}
	var c Claim
	out, err := ib.retry(ctx, func() (Outcome, error) {
		var err error
		c, err = ib.claim(ctx, handler, ev, e.Policy)
		if err != nil {
			return 0, err
		}
		return 0, nil
	})
	if err != nil {
		var o outcomeErr
		if errors.As(err, &o) {
			if o.out == Conflict {
				return Conflict, wrap(o.err)
			}
			return o.out, nil
		}
		return out, wrap(err)
	}
	if err := ib.hook(ctx, AfterClaim); err != nil {
		return 0, wrap(err)
	}
	runErr := e.Run(ctx, c)
	// From here on the effect may have happened: record what we know even if
	// the caller has gone away.
	ctx = context.WithoutCancel(ctx)
	if err := ib.hook(ctx, AfterEffect); err != nil {
		return 0, wrap(errors.Join(err, runErr))
	}
	switch {
	case runErr == nil:
		// A deadlock or serialization failure in the finish (inbox's
		// statement or e.Finish's) re-runs the finish transaction, e.Finish
		// included; the effect itself is not run again.
		out, err := ib.retry(ctx, func() (Outcome, error) { return ib.finish(ctx, handler, ev, c, e.Finish) })
		if err != nil {
			return out, wrap(err)
		}
		return out, nil
	case IsNotApplied(runErr):
		if err := ib.settleRetry(ctx, handler, ev, c, statusReleased, runErr); err != nil {
			return Uncertain, wrap(errors.Join(runErr, err))
		}
		return Released, runErr
	case IsPermanent(runErr):
		if err := ib.settleRetry(ctx, handler, ev, c, statusFailed, runErr); err != nil {
			return Uncertain, wrap(errors.Join(runErr, err))
		}
		return Failed, runErr
	}
	return Uncertain, runErr
}

// outcomeErr carries a final outcome of the claim step through retry;
// commit says whether the claim transaction's writes must be kept.
type outcomeErr struct {
	out    Outcome
	err    error
	commit bool
}

func (o outcomeErr) Error() string { return o.out.String() }

func (ib *Inbox[TTx]) claim(ctx context.Context, handler string, ev Event, p Policy) (c Claim, err error) {
	tx, err := ib.drv.Begin(ctx)
	if err != nil {
		return c, err
	}
	restore := func() {}
	defer func() {
		restore()
		var o outcomeErr
		isOutcome := errors.As(err, &o)
		if err != nil && !(isOutcome && o.commit) {
			_ = tx.Rollback(context.WithoutCancel(ctx))
			if !isOutcome && ib.inFlight(err) {
				err = outcomeErr{out: InFlight}
			}
			return
		}
		if cerr := tx.Commit(ctx); cerr != nil {
			err = fmt.Errorf("commit claim: %w", cerr)
		}
	}()
	if restore, err = ib.waitLimit(ctx, tx); err != nil {
		restore = func() {}
		return c, err
	}
	c = Claim{Key: ClaimKey(ev.Source, handler, ev.ID), Token: newToken(), Attempt: 1}
	hash := ev.hash()
	n, err := tx.Exec(ctx, ib.q(`INSERT INTO inbox_events (source, handler, event_id, body_hash, status, token, attempts, claimed_at, updated_at)
		VALUES ($1, $2, $3, $4, 'claimed', $5, 1, {now}, {now}) ON CONFLICT DO NOTHING`),
		ev.Source, handler, ev.ID, hash, c.Token)
	if err != nil {
		return c, err
	}
	if n == 1 {
		return c, nil
	}
	var (
		status, stored, oldToken string
		attempts, stale          int
	)
	err = tx.QueryRow(ctx, ib.q(`SELECT status, body_hash, token, attempts,
		CASE WHEN claimed_at <= {now} - $4 THEN 1 ELSE 0 END
		FROM inbox_events WHERE source = $1 AND handler = $2 AND event_id = $3 FOR UPDATE`),
		ev.Source, handler, ev.ID, p.after.Microseconds()).Scan(&status, &stored, &oldToken, &attempts, &stale)
	if err != nil {
		return c, err
	}
	if hash != "" && stored != "" && hash != stored {
		return c, outcomeErr{out: Conflict, err: fmt.Errorf("%w: %s/%s/%s", ErrConflict, ev.Source, handler, ev.ID)}
	}
	c.Attempt = attempts + 1
	take := func(where string, args ...any) error {
		args = append([]any{ev.Source, handler, ev.ID, c.Token}, args...)
		n, err := tx.Exec(ctx, ib.q(`UPDATE inbox_events SET status = 'claimed', token = $4, attempts = attempts + 1,
			claimed_at = {now}, updated_at = {now}, error = ''
			WHERE source = $1 AND handler = $2 AND event_id = $3 AND `+where), args...)
		if err != nil {
			return err
		}
		if n != 1 {
			return outcomeErr{out: InFlight}
		}
		return nil
	}
	switch status {
	case statusDone, statusFailed:
		return c, outcomeErr{out: Duplicate}
	case statusHeld:
		return c, outcomeErr{out: Held}
	case statusReleased:
		return c, take(`status = 'released'`)
	case statusClaimed:
		if stale == 0 {
			return c, outcomeErr{out: InFlight}
		}
		if p.kind == policyReclaim && attempts < p.max {
			return c, take(`status = 'claimed' AND token = $5`, oldToken)
		}
		reason := fmt.Sprintf("claim stale after %d attempt(s); policy %v", attempts, p)
		n, err := tx.Exec(ctx, ib.q(`UPDATE inbox_events SET status = 'held', token = '', updated_at = {now}, error = $5
			WHERE source = $1 AND handler = $2 AND event_id = $3 AND status = 'claimed' AND token = $4`),
			ev.Source, handler, ev.ID, oldToken, reason)
		if err != nil {
			return c, err
		}
		if n != 1 {
			return c, outcomeErr{out: InFlight}
		}
		return c, outcomeErr{out: Held, commit: true}
	}
	return c, fmt.Errorf("unknown status %q in inbox_events", status)
}

func (ib *Inbox[TTx]) finish(ctx context.Context, handler string, ev Event, c Claim, fn func(context.Context, TTx, Claim) error) (Outcome, error) {
	tx, err := ib.drv.Begin(ctx)
	if err != nil {
		return Uncertain, err
	}
	committed := false
	defer func() {
		if !committed {
			_ = tx.Rollback(ctx)
		}
	}()
	if fn != nil {
		if err := fn(ctx, tx.Unwrap(), c); err != nil {
			return Uncertain, fmt.Errorf("finish: %w", err)
		}
	}
	n, err := tx.Exec(ctx, ib.q(`UPDATE inbox_events SET status = 'done', token = '', updated_at = {now}, error = ''
		WHERE source = $1 AND handler = $2 AND event_id = $3 AND status = 'claimed' AND token = $4`),
		ev.Source, handler, ev.ID, c.Token)
	if err != nil {
		return Uncertain, fmt.Errorf("finish: %w", err)
	}
	if n != 1 {
		return Uncertain, ErrLostClaim
	}
	if err := ib.hook(ctx, BeforeFinishCommit); err != nil {
		return 0, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Uncertain, fmt.Errorf("finish: commit: %w", err)
	}
	committed = true
	if err := ib.hook(ctx, AfterFinishCommit); err != nil {
		return 0, err
	}
	return Processed, nil
}

// settleRetry is settle, run again on a deadlock or serialization failure.
func (ib *Inbox[TTx]) settleRetry(ctx context.Context, handler string, ev Event, c Claim, status string, cause error) error {
	_, err := ib.retry(ctx, func() (Outcome, error) { return 0, ib.settle(ctx, handler, ev, c, status, cause) })
	return err
}

// settle records a released or failed effect, fenced by the claim token.
func (ib *Inbox[TTx]) settle(ctx context.Context, handler string, ev Event, c Claim, status string, cause error) error {
	n, err := ib.drv.Exec(ctx, ib.q(`UPDATE inbox_events SET status = $5, token = '', updated_at = {now}, error = $6
		WHERE source = $1 AND handler = $2 AND event_id = $3 AND status = 'claimed' AND token = $4`),
		ev.Source, handler, ev.ID, c.Token, status, errText(cause))
	if err != nil {
		return err
	}
	if n != 1 {
		return ErrLostClaim
	}
	return nil
}

// HeldClaim is a claim parked for a person.
type HeldClaim struct {
	Source, Handler, EventID string
	// Key is the Claim.Key the effect was given.
	Key string
	// Attempts is how many times the effect was started.
	Attempts int
	// Reason says why the claim was held.
	Reason string
	// Since is when it was held, by the database clock.
	Since time.Time
}

// Held lists held claims, oldest first.
func (ib *Inbox[TTx]) Held(ctx context.Context) ([]HeldClaim, error) {
	var out []HeldClaim
	// Executor has no multi-row query; page through by key instead.
	var after struct {
		at                  int64
		source, handler, id string
	}
	after.at = -1
	for {
		var h HeldClaim
		var at int64
		err := ib.drv.QueryRow(ctx, ib.q(`SELECT source, handler, event_id, attempts, error, updated_at FROM inbox_events
			WHERE status = 'held' AND (updated_at, source, handler, event_id) > ($1, $2, $3, $4)
			ORDER BY updated_at, source, handler, event_id LIMIT 1`),
			after.at, after.source, after.handler, after.id).Scan(&h.Source, &h.Handler, &h.EventID, &h.Attempts, &h.Reason, &at)
		if errors.Is(err, inboxdriver.ErrNoRows) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("inbox: list held claims: %w", err)
		}
		h.Key = ClaimKey(h.Source, h.Handler, h.EventID)
		h.Since = time.UnixMicro(at)
		out = append(out, h)
		after.at, after.source, after.handler, after.id = at, h.Source, h.Handler, h.EventID
	}
}

// Resolution is a person's decision about a held claim.
type Resolution int

// Resolutions.
const (
	// Rerun releases the claim: the next delivery of the event (a sender
	// retry, an AnyHook replay) runs the effect again with the same Key.
	Rerun Resolution = iota + 1
	// MarkDone records the effect as done (the person checked it happened);
	// later deliveries are Duplicate.
	MarkDone
)

// Resolve settles a held claim. It returns ErrNotHeld if (source, handler,
// eventID) is not held.
func (ib *Inbox[TTx]) Resolve(ctx context.Context, source, handler, eventID string, r Resolution) error {
	var status string
	switch r {
	case Rerun:
		status = statusReleased
	case MarkDone:
		status = statusDone
	default:
		return fmt.Errorf("%w: resolution %d", ErrInvalid, r)
	}
	n, err := ib.drv.Exec(ctx, ib.q(`UPDATE inbox_events SET status = $4, updated_at = {now}, error = ''
		WHERE source = $1 AND handler = $2 AND event_id = $3 AND status = 'held'`), source, handler, eventID, status)
	if err != nil {
		return fmt.Errorf("inbox: resolve %s/%s/%s: %w", source, handler, eventID, err)
	}
	if n != 1 {
		return fmt.Errorf("inbox: resolve %s/%s/%s: %w", source, handler, eventID, ErrNotHeld)
	}
	return nil
}
