package inbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/anyhook/anyhook/inbox/inboxdriver"
)

// StaleAction is what was done with a stale claim.
type StaleAction int

// Stale actions.
const (
	// StaleHeld: the claim was parked (Hold, or Reclaim out of claims).
	// Held lists it and Resolve settles it; the effect does not run again
	// on its own.
	StaleHeld StaleAction = iota + 1
	// StaleReleased: Sweep released the claim under Reclaim. The effect may
	// or may not have run. The next delivery of the event runs it again,
	// with the same Key; until one comes, Released lists it. Behind
	// AnyHook, `anyhook replay --event <EventID>` sends one.
	StaleReleased
	// StaleReclaimed: a delivery of the event took the claim over under
	// Reclaim and runs the effect again now.
	StaleReclaimed
)

func (a StaleAction) String() string {
	switch a {
	case StaleHeld:
		return "held"
	case StaleReleased:
		return "released"
	case StaleReclaimed:
		return "reclaimed"
	}
	return "StaleAction(" + strconv.Itoa(int(a)) + ")"
}

// StaleClaim is a claim found stale — its owner crashed, hung, or failed
// uncertainly, and its policy's duration has passed — and what its policy
// made of it. Sweep returns them; Config.OnStale receives each one, from
// Sweep or from a Do that met it.
type StaleClaim struct {
	Source, Handler, EventID string
	// Key is the Claim.Key the effect was given.
	Key string
	// Claims is how many claims the event had taken when it went stale
	// (see Claim.Attempt): an upper bound on the runs of the effect.
	Claims int
	// Policy is the stale policy applied.
	Policy Policy
	// Action is what the policy did.
	Action StaleAction
	// ClaimedAt is when the stale claim was taken, by the database clock.
	ClaimedAt time.Time
}

func (s StaleClaim) reason(by string) string {
	return fmt.Sprintf("claim stale after %d claim(s), found by %s; policy %v", s.Claims, by, s.Policy)
}

// reportStale logs a stale claim at warn and hands it to Config.OnStale.
func (ib *Inbox[TTx]) reportStale(ctx context.Context, s StaleClaim) {
	ib.log.WarnContext(ctx, "inbox: stale claim", "source", s.Source, "handler", s.Handler, "event_id", s.EventID,
		"action", s.Action.String(), "claims", s.Claims, "policy", s.Policy.String(), "claimed_at", s.ClaimedAt)
	if ib.cfg.OnStale != nil {
		ib.cfg.OnStale(ctx, s)
	}
}

// Sweep applies the stale policy to every claim that has outlived it, by
// the database clock, without waiting for a delivery of its event — which
// may never come: the sender may have given up. Each claim is judged by the
// policy stored with it when it was taken:
//
//   - Hold, or Reclaim with its claims used up: the claim is held. Held
//     lists it; Resolve settles it.
//   - Reclaim with claims left: the claim is released. Sweep cannot run the
//     effect (only Do has the code): the next delivery of the event runs it
//     again with the same Key, at once; until one comes, Released lists it.
//
// Either way the stale owner loses its claim: if it wakes up, its finish
// fails with ErrLostClaim. Sweep returns what it changed and reports each
// to Config.OnStale (and the log, at warn). Several processes may sweep at
// once: each claim is changed, and reported, by one of them. Claims taken
// by versions of inbox that did not store their policy are left to a
// redelivery.
//
// Run it on a timer: see Sweeper.
func (ib *Inbox[TTx]) Sweep(ctx context.Context) ([]StaleClaim, error) {
	var found []StaleClaim
	for {
		var (
			s                     StaleClaim
			token, policy         string
			staleAfter, claimedAt int64
			maxClaims             int
		)
		err := ib.drv.QueryRow(ctx, ib.q(`SELECT source, handler, event_id, token, attempts, policy, stale_after, max_claims, claimed_at
			FROM inbox_events
			WHERE status = 'claimed' AND policy <> '' AND claimed_at <= {now} - stale_after
			ORDER BY claimed_at, source, handler, event_id LIMIT 1`)).
			Scan(&s.Source, &s.Handler, &s.EventID, &token, &s.Claims, &policy, &staleAfter, &maxClaims, &claimedAt)
		if errors.Is(err, inboxdriver.ErrNoRows) {
			return found, nil
		}
		if err != nil {
			return found, fmt.Errorf("inbox: sweep: %w", err)
		}
		s.Key = ClaimKey(s.Source, s.Handler, s.EventID)
		s.Policy = storedPolicy(policy, staleAfter, maxClaims)
		s.ClaimedAt = time.UnixMicro(claimedAt)
		status := statusHeld
		s.Action = StaleHeld
		if s.Policy.kind == policyReclaim && s.Claims < s.Policy.max {
			status, s.Action = statusReleased, StaleReleased
		}
		// Fenced by the token: a claim taken over or finished meanwhile is
		// no longer this one, and another sweeper may have won the race.
		n, err := ib.drv.Exec(ctx, ib.q(`UPDATE inbox_events SET status = $5, token = '', updated_at = {now}, error = $6
			WHERE source = $1 AND handler = $2 AND event_id = $3 AND status = 'claimed' AND token = $4`),
			s.Source, s.Handler, s.EventID, token, status, s.reason("the sweep"))
		if err != nil {
			return found, fmt.Errorf("inbox: sweep %s/%s/%s: %w", s.Source, s.Handler, s.EventID, err)
		}
		if n == 1 {
			found = append(found, s)
			ib.reportStale(ctx, s)
		}
	}
}

// Sweeper runs Inbox.Sweep on a timer, in a goroutine it owns, from Start
// until Stop. Create it with Inbox.NewSweeper.
type Sweeper struct {
	sweep func(context.Context) ([]StaleClaim, error)
	every time.Duration
	log   *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewSweeper returns a Sweeper that sweeps every interval (default, when
// interval <= 0: one minute). A good interval is a fraction of the shortest
// stale duration in use: a stale claim surfaces at most one interval after
// it went stale. Errors are logged to Config.Logger at warn; the next tick
// tries again.
func (ib *Inbox[TTx]) NewSweeper(interval time.Duration) *Sweeper {
	if interval <= 0 {
		interval = time.Minute
	}
	return &Sweeper{sweep: ib.Sweep, every: interval, log: ib.log}
}

// Start sweeps at once, then every interval, until Stop or until ctx ends.
// Starting a running Sweeper does nothing.
func (s *Sweeper) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil {
		return
	}
	ctx, s.cancel = context.WithCancel(ctx)
	s.done = make(chan struct{})
	go s.loop(ctx, s.done)
}

func (s *Sweeper) loop(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		if _, err := s.sweep(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "inbox: sweep failed; retrying at the next tick", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Stop ends the loop and waits for a sweep in progress to return. It is
// idempotent; a stopped Sweeper may be started again.
func (s *Sweeper) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done == nil {
		return
	}
	s.cancel()
	<-s.done
	s.cancel, s.done = nil, nil
}

// HeldClaim is a claim parked for a person (Held) or released for the next
// delivery of its event (Released).
type HeldClaim struct {
	// Source, Handler and EventID are the claim's key; Source is
	// Event.Source (HandlerConfig.Source, DefaultSource by default). Pass
	// them to Resolve as they are.
	Source, Handler, EventID string
	// Key is the Claim.Key the effect was given.
	Key string
	// Claims is how many claims the event has had (see Claim.Attempt): an
	// upper bound on how many times the effect may have run, not a count
	// of runs.
	Claims int
	// Attempts is Claims.
	//
	// Deprecated: the name suggested runs of the effect; use Claims.
	Attempts int
	// Reason says why the claim was parked.
	Reason string
	// Since is when it was parked, by the database clock.
	Since time.Time
}

// Held lists held claims, oldest first.
func (ib *Inbox[TTx]) Held(ctx context.Context) ([]HeldClaim, error) {
	out, err := ib.parked(ctx, statusHeld)
	if err != nil {
		return nil, fmt.Errorf("inbox: list held claims: %w", err)
	}
	return out, nil
}

// Released lists claims released for a re-run that no delivery has taken
// yet, oldest first: released by Sweep under Reclaim, by an effect's
// NotApplied error, or by Resolve(Rerun). Each waits for the next delivery
// of its event, which runs the effect at once; if the sender has given up,
// send one (behind AnyHook: `anyhook replay --event <EventID>`), or settle
// it with Resolve(MarkDone).
func (ib *Inbox[TTx]) Released(ctx context.Context) ([]HeldClaim, error) {
	out, err := ib.parked(ctx, statusReleased)
	if err != nil {
		return nil, fmt.Errorf("inbox: list released claims: %w", err)
	}
	return out, nil
}

func (ib *Inbox[TTx]) parked(ctx context.Context, status string) ([]HeldClaim, error) {
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
			WHERE status = $5 AND (updated_at, source, handler, event_id) > ($1, $2, $3, $4)
			ORDER BY updated_at, source, handler, event_id LIMIT 1`),
			after.at, after.source, after.handler, after.id, status).Scan(&h.Source, &h.Handler, &h.EventID, &h.Claims, &h.Reason, &at)
		if errors.Is(err, inboxdriver.ErrNoRows) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		h.Attempts = h.Claims
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
	// later deliveries are Duplicate. It does not run Effect.Finish —
	// Resolve has no code to run — so write what Finish would have written
	// yourself.
	MarkDone
)

// Resolve settles a held claim, or a released one (Released) with
// MarkDone. source, handler and eventID are the claim's key as Held lists
// it; source is Event.Source, which NewHandler sets to HandlerConfig.Source
// (DefaultSource, "anyhook", when empty). It returns ErrNotHeld if there is
// no such held (or released) claim.
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
		WHERE source = $1 AND handler = $2 AND event_id = $3 AND status IN ('held', 'released')`), source, handler, eventID, status)
	if err != nil {
		return fmt.Errorf("inbox: resolve %s/%s/%s: %w", source, handler, eventID, err)
	}
	if n != 1 {
		return fmt.Errorf("inbox: resolve %s/%s/%s: %w", source, handler, eventID, ErrNotHeld)
	}
	return nil
}

// retryHint collects, for the request NewHandler serves, how long nothing
// will change for the event: until a live claim goes stale.
type retryHint struct {
	mu    sync.Mutex
	after time.Duration
}

type retryHintKey struct{}

func withRetryHint(ctx context.Context) (context.Context, *retryHint) {
	h := new(retryHint)
	return context.WithValue(ctx, retryHintKey{}, h), h
}

// hintRetry tells the handler serving ctx, if any, that nothing changes for
// the event for d.
func hintRetry(ctx context.Context, d time.Duration) {
	if h, ok := ctx.Value(retryHintKey{}).(*retryHint); ok && d > 0 {
		h.mu.Lock()
		h.after = max(h.after, d)
		h.mu.Unlock()
	}
}

func (h *retryHint) get() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.after
}
