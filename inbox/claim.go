package inbox

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Statuses of a row in inbox_events.
const (
	statusDone     = "done"     // processed; later deliveries are duplicates
	statusFailed   = "failed"   // permanent failure recorded; acknowledged
	statusClaimed  = "claimed"  // an owner (token) is running the effect
	statusHeld     = "held"     // parked for a person
	statusReleased = "released" // the next delivery runs it (NotApplied, Rerun, or swept under Reclaim)
)

type policyKind int

const (
	policyReclaim policyKind = iota + 1
	policyHold
)

// Policy says what happens to a claim that has been claimed for longer than
// a duration, judged by the database clock: its owner crashed, hung, or
// failed uncertainly. There is no default; the zero Policy is rejected with
// ErrNoPolicy, because only the handler's author knows whether running the
// effect twice is worse than not running it.
//
// The policy is applied by whichever comes first: a later delivery of the
// event (Do, with the policy of that call), or Inbox.Sweep (with the policy
// stored with the claim when it was taken). Run Sweep on a timer (Sweeper):
// a sender that has given up never delivers the event again.
type Policy struct {
	kind  policyKind
	after time.Duration
	max   int
}

// Reclaim returns a policy that lets the effect run again once its claim is
// older than after: for effects the downstream dedupes by Claim.Key (an
// email provider's idempotency key). A delivery that meets the stale claim
// takes it over with a new token and runs the effect at once; Sweep
// releases it (status released, listed by Inbox.Released) so that the next
// delivery of the event runs it. Sweep cannot run the effect itself: only
// Do has the code.
//
// maxAttempts bounds the claims of the event in all, so the effect runs
// at most maxAttempts times; a stale claim after that is held. Every claim
// counts, including one whose owner died before starting the effect.
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

// column is the policy's name as stored in inbox_events.policy.
func (p Policy) column() string {
	switch p.kind {
	case policyReclaim:
		return "reclaim"
	case policyHold:
		return "hold"
	}
	return ""
}

// storedPolicy rebuilds a Policy from its inbox_events columns.
func storedPolicy(name string, afterMicros int64, max int) Policy {
	p := Policy{after: time.Duration(afterMicros) * time.Microsecond, max: max}
	switch name {
	case "reclaim":
		p.kind = policyReclaim
	case "hold":
		p.kind = policyHold
	}
	return p
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
	// Attempt numbers the claims of (source, handler, event id): 1 for the
	// first claim, and one more for each later claim — a reclaim of a stale
	// claim, a claim after NotApplied released the event, or after a person
	// chose Rerun. It counts claims, not runs of the effect: a claim whose
	// owner died before starting the effect counts too, so the first real
	// run may have Attempt 2. Attempt > 1 means an earlier claim may have
	// run the effect.
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
	// done. If the claim was lost meanwhile, these writes roll back. It
	// runs only after Run succeeded in this Do call: never for a claim a
	// person settles with Resolve(MarkDone).
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
// Outcomes: Processed; Duplicate (done before, or failed permanently, or
// marked done by a person); InFlight (claimed by another owner, not yet
// stale, or another reclaimer won); Held (stale under Hold, or Reclaim out
// of attempts, or held before); Released, Failed, Uncertain (by e.Run's
// error, which is returned); Conflict (ErrConflict). A stale claim this call
// holds or takes over is reported to Config.OnStale. Taking the claim, and
// recording the result after the effect ran, use a context that is not
// cancelled with ctx; if ctx ends while the claim is taken, the claim is
// released unrun and Do returns Released with ctx's error. So is a claim
// whose answer came back too close to its stale time (the database stalled
// between taking it and answering): a redelivery or the sweep may take it
// over at once, and the effect would run twice at the same time; Do
// returns Released with ErrClaimLate. A serialization failure or
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
	var (
		c     Claim
		stale *StaleClaim
	)
	// The claim is taken under a context the caller cannot cancel (bounded
	// by claimTimeout): a caller that gives up while the claim's COMMIT is
	// in flight would otherwise be told it failed although the database
	// carried it out, leaving a claim nobody works on, to be held when
	// stale although the effect never ran. If the caller has gone once the
	// claim stands, the claim is released below, unrun.
	asked := time.Now() // the claim's age is counted from later, in the database
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), claimTimeout)
	out, err := ib.retry(cctx, func() (Outcome, error) {
		var err error
		c, stale, err = ib.claim(cctx, handler, ev, e.Policy)
		if err != nil {
			return 0, err
		}
		return 0, nil
	})
	cancel()
	if err != nil {
		var o outcomeErr
		if errors.As(err, &o) {
			if o.stale != nil {
				ib.reportStale(ctx, *o.stale)
			}
			if o.wait > 0 {
				hintRetry(ctx, o.wait)
			}
			if o.out == Conflict {
				return Conflict, wrap(o.err)
			}
			return o.out, nil
		}
		return out, wrap(err)
	}
	if stale != nil {
		ib.reportStale(ctx, *stale)
	}
	late := time.Since(asked) > e.Policy.after-staleMargin(e.Policy.after)
	if ctx.Err() != nil || late {
		// The caller gave up while the claim was taken, or the claim is
		// about to go stale: nothing ran, so the next delivery may run
		// it at once.
		cause := ErrClaimLate
		if ctx.Err() != nil {
			cause = context.Cause(ctx)
		}
		if err := ib.settleRetry(context.WithoutCancel(ctx), handler, ev, c, statusReleased, cause); err != nil {
			if errors.Is(err, ErrLostClaim) {
				return InFlight, wrap(cause) // taken over, stale, by another owner: nothing ran here
			}
			return Uncertain, wrap(errors.Join(cause, err))
		}
		return Released, wrap(cause)
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
	// The claim stays until it is stale: nothing changes before then.
	hintRetry(ctx, e.Policy.after)
	return Uncertain, runErr
}

// staleMargin is how long before a claim of a policy of duration after
// goes stale Do no longer starts its effect: a tenth of it and at least
// 250 ms, but never more than half (the database's clock and this
// process's may run apart a little).
func staleMargin(after time.Duration) time.Duration {
	return min(max(after/10, 250*time.Millisecond), after/2)
}

// claimTimeout bounds taking a claim, which the caller cannot cancel (Do):
// its waits for a lock are bounded anyway (Config.InFlightWait on
// PostgreSQL, the connection's busy_timeout on SQLite).
const claimTimeout = 30 * time.Second

// outcomeErr carries a final outcome of the claim step through retry;
// commit says whether the claim transaction's writes must be kept, stale
// what a committed stale claim became, wait how long until a live claim of
// another owner goes stale.
type outcomeErr struct {
	out    Outcome
	err    error
	commit bool
	stale  *StaleClaim
	wait   time.Duration
}

func (o outcomeErr) Error() string { return o.out.String() }

func (ib *Inbox[TTx]) claim(ctx context.Context, handler string, ev Event, p Policy) (c Claim, stale *StaleClaim, err error) {
	tx, err := ib.drv.Begin(ctx)
	if err != nil {
		return c, nil, err
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
		return c, nil, err
	}
	c = Claim{Key: ClaimKey(ev.Source, handler, ev.ID), Token: newToken(), Attempt: 1}
	hash := ev.hash()
	n, err := tx.Exec(ctx, ib.q(`INSERT INTO inbox_events (source, handler, event_id, body_hash, status, token, attempts,
			claimed_at, updated_at, policy, stale_after, max_claims)
		VALUES ($1, $2, $3, $4, 'claimed', $5, 1, {now}, {now}, $6, $7, $8) ON CONFLICT DO NOTHING`),
		ev.Source, handler, ev.ID, hash, c.Token, p.column(), p.after.Microseconds(), p.max)
	if err != nil {
		return c, nil, err
	}
	if n == 1 {
		return c, nil, nil
	}
	var (
		status, stored, oldToken string
		attempts                 int
		claimedAt, untilStale    int64
	)
	err = tx.QueryRow(ctx, ib.q(`SELECT status, body_hash, token, attempts, claimed_at, claimed_at + $4 - {now}
		FROM inbox_events WHERE source = $1 AND handler = $2 AND event_id = $3 FOR UPDATE`),
		ev.Source, handler, ev.ID, p.after.Microseconds()).Scan(&status, &stored, &oldToken, &attempts, &claimedAt, &untilStale)
	if err != nil {
		return c, nil, err
	}
	if hash != "" && stored != "" && hash != stored {
		return c, nil, outcomeErr{out: Conflict, err: fmt.Errorf("%w: %s/%s/%s", ErrConflict, ev.Source, handler, ev.ID)}
	}
	c.Attempt = attempts + 1
	take := func(where string, args ...any) error {
		args = append([]any{ev.Source, handler, ev.ID, c.Token, p.column(), p.after.Microseconds(), p.max}, args...)
		n, err := tx.Exec(ctx, ib.q(`UPDATE inbox_events SET status = 'claimed', token = $4, attempts = attempts + 1,
			claimed_at = {now}, updated_at = {now}, error = '', policy = $5, stale_after = $6, max_claims = $7
			WHERE source = $1 AND handler = $2 AND event_id = $3 AND `+where), args...)
		if err != nil {
			return err
		}
		if n != 1 {
			return outcomeErr{out: InFlight}
		}
		return nil
	}
	found := &StaleClaim{Source: ev.Source, Handler: handler, EventID: ev.ID, Key: c.Key, Claims: attempts,
		Policy: p, ClaimedAt: time.UnixMicro(claimedAt)}
	switch status {
	case statusDone, statusFailed:
		return c, nil, outcomeErr{out: Duplicate}
	case statusHeld:
		return c, nil, outcomeErr{out: Held}
	case statusReleased:
		return c, nil, take(`status = 'released'`)
	case statusClaimed:
		if untilStale > 0 {
			return c, nil, outcomeErr{out: InFlight, wait: time.Duration(untilStale) * time.Microsecond}
		}
		if p.kind == policyReclaim && attempts < p.max {
			if err := take(`status = 'claimed' AND token = $8`, oldToken); err != nil {
				return c, nil, err
			}
			found.Action = StaleReclaimed
			return c, found, nil
		}
		found.Action = StaleHeld
		n, err := tx.Exec(ctx, ib.q(`UPDATE inbox_events SET status = 'held', token = '', updated_at = {now}, error = $5
			WHERE source = $1 AND handler = $2 AND event_id = $3 AND status = 'claimed' AND token = $4`),
			ev.Source, handler, ev.ID, oldToken, found.reason("a redelivery"))
		if err != nil {
			return c, nil, err
		}
		if n != 1 {
			return c, nil, outcomeErr{out: InFlight}
		}
		return c, nil, outcomeErr{out: Held, commit: true, stale: found}
	}
	return c, nil, fmt.Errorf("unknown status %q in inbox_events", status)
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
