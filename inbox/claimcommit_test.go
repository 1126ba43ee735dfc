package inbox_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/anyhook/anyhook/inbox"
	"github.com/anyhook/anyhook/inbox/inboxpgx"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// The sender gives up (its request's context ends) while the claim's
// COMMIT is in flight and the database has already carried it out. Do must
// not walk away from a claim that stands without running the effect: the
// claim stayed claimed with nobody working on it, and under Hold it was
// held once stale, although the effect never ran. Now the commit is seen
// through and the claim released unrun (the next delivery runs it).
// heldInbox is an inbox on a fresh PostgreSQL database reached through a
// pgtest.CommitHold (its replies held from the next COMMIT on, once
// armed), and a direct pool on the same database.
func heldInbox(t *testing.T) (*inbox.Inbox[pgx.Tx], *pgtest.CommitHold, *pgxpool.Pool) {
	dsn := pgtest.DSN(t)
	h := pgtest.HoldCommit(t, dsn)
	cfg, err := pgxpool.ParseConfig(h.DSN)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = h.Tracer
	cfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	t.Cleanup(h.Proxy.ReleaseReplies) // before the pool closes
	direct, err := pgxpool.New(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(direct.Close)
	ib, err := inbox.New(inboxpgx.New(pool), inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := ib.Migrate(t.Context()); err != nil {
		t.Fatal(err)
	}
	return ib, h, direct
}

func TestClaimCommitOutlivesCancel(t *testing.T) {
	t.Parallel()
	ib, h, direct := heldInbox(t)
	ctx, cancel := context.WithCancel(t.Context())
	var ran atomic.Bool
	type result struct {
		out inbox.Outcome
		err error
	}
	done := make(chan result, 1)
	h.Tracer.Armed.Store(true)
	go func() {
		out, err := ib.Do(ctx, "capture", inbox.Event{Source: "s", ID: "evt_1", Body: []byte("{}")}, inbox.Effect[pgx.Tx]{
			Policy: inbox.Hold(time.Minute),
			Run:    func(context.Context, inbox.Claim) error { ran.Store(true); return nil },
		})
		done <- result{out, err}
	}()
	<-h.Committing
	status := func() string {
		var s string
		if err := direct.QueryRow(t.Context(), `SELECT status FROM inbox_events`).Scan(&s); err != nil {
			return err.Error()
		}
		return s
	}
	// Committed, its answer held by the proxy.
	testwait.For(t, "the claim to be committed", func() bool { return status() == "claimed" })
	cancel()
	time.Sleep(300 * time.Millisecond)
	h.Proxy.ReleaseReplies()
	r := <-done
	if st := status(); !ran.Load() && st != "released" {
		t.Fatalf("Do = %v, %v without running the effect, and left the committed claim behind (status %s): it will be held when stale although nothing ran", r.out, r.err, st)
	}
	if !ran.Load() && r.out != inbox.Released {
		t.Fatalf("Do = %v, %v; want Released: the claim was released unrun", r.out, r.err)
	}
}

// The database stalls between taking a claim and answering for longer
// than the claim's stale duration: a redelivery or the sweep may take the
// claim over the moment the answer arrives, and an effect started then
// would run twice at once. Do measures the wait itself, from before it
// asked, and releases the claim unrun instead (ErrClaimLate).
func TestClaimAnsweredLateReleased(t *testing.T) {
	t.Parallel()
	ib, h, direct := heldInbox(t)
	var ran atomic.Bool
	type result struct {
		out inbox.Outcome
		err error
	}
	done := make(chan result, 1)
	h.Tracer.Armed.Store(true)
	go func() {
		out, err := ib.Do(t.Context(), "email", inbox.Event{Source: "s", ID: "evt_1", Body: []byte("{}")}, inbox.Effect[pgx.Tx]{
			Policy: inbox.Reclaim(time.Second, 3),
			Run:    func(context.Context, inbox.Claim) error { ran.Store(true); return nil },
		})
		done <- result{out, err}
	}()
	<-h.Committing
	testwait.For(t, "the claim to be committed and then stale, by the database's clock", func() bool {
		var stale bool
		err := direct.QueryRow(t.Context(), `SELECT claimed_at + stale_after < (extract(epoch from clock_timestamp()) * 1000000)::bigint
			FROM inbox_events`).Scan(&stale)
		return err == nil && stale
	})
	h.Proxy.ReleaseReplies()
	r := <-done
	var status string
	if err := direct.QueryRow(t.Context(), `SELECT status FROM inbox_events`).Scan(&status); err != nil {
		t.Fatal(err)
	}
	if ran.Load() || r.out != inbox.Released || !errors.Is(r.err, inbox.ErrClaimLate) || status != "released" {
		t.Fatalf("Do = %v, %v, effect run %v, claim %s; want Released with ErrClaimLate, not run, the claim released for the next delivery",
			r.out, r.err, ran.Load(), status)
	}
}
