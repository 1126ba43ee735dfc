package inbox_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook/inbox"
	"github.com/anyhook/anyhook/inbox/inboxtest"
)

// staleLog collects what Config.OnStale receives.
type staleLog struct {
	mu     sync.Mutex
	claims []inbox.StaleClaim
	signal chan struct{} // receives one value per report, if not nil
}

func (l *staleLog) onStale(_ context.Context, c inbox.StaleClaim) {
	l.mu.Lock()
	l.claims = append(l.claims, c)
	l.mu.Unlock()
	if l.signal != nil {
		l.signal <- struct{}{}
	}
}

func (l *staleLog) got() []inbox.StaleClaim {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.claims)
}

// abandon leaves a live claim on (source, handler, id) under policy, as a
// worker that died right after claiming would.
func abandon[TTx any](t *testing.T, e *env[TTx], handler, id string, policy inbox.Policy) {
	t.Helper()
	var crash inboxtest.Faults
	crash.FailAt(inbox.AfterClaim, nil)
	_, err := e.inbox(inbox.Config{Hook: crash.Hook}).Do(context.Background(), handler, inbox.Event{ID: id},
		inbox.Effect[TTx]{Policy: policy, Run: func(context.Context, inbox.Claim) error { return nil }})
	if !errors.Is(err, inboxtest.ErrInjected) {
		t.Fatalf("abandon %s: %v", id, err)
	}
}

// Claims whose owners died are surfaced by Sweep alone, no delivery
// needed: Hold and a spent Reclaim are held, a Reclaim with claims left is
// released, a claim not yet stale is left alone; each is reported once.
// Then deliveries act on what Sweep left: the released one runs again, the
// held one waits for a person.
func (suite[TTx]) Sweep(t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	var log staleLog
	ib := e.inbox(inbox.Config{OnStale: log.onStale})
	abandon(t, e, "h", "hold", inbox.Hold(time.Hour))
	abandon(t, e, "h", "reclaim", inbox.Reclaim(time.Hour, 3))
	abandon(t, e, "h", "spent", inbox.Reclaim(time.Hour, 1))
	abandon(t, e, "h", "fresh", inbox.Hold(time.Hour))
	if _, err := ib.Apply(ctx, "h", inbox.Event{ID: "applied"}, func(context.Context, TTx) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if found, err := ib.Sweep(ctx); len(found) != 0 || err != nil {
		t.Fatalf("Sweep before any claim is stale = %+v, %v; want nothing", found, err)
	}
	for _, id := range []string{"hold", "reclaim", "spent"} {
		if err := inboxtest.AgeClaim(ctx, e.drv, "", "h", id, 2*time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	found, err := ib.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	actions := map[string]inbox.StaleAction{}
	for _, c := range found {
		actions[c.EventID] = c.Action
		if c.Claims != 1 || c.Key != inbox.ClaimKey("", "h", c.EventID) || c.ClaimedAt.IsZero() {
			t.Errorf("stale claim %+v", c)
		}
	}
	want := map[string]inbox.StaleAction{"hold": inbox.StaleHeld, "reclaim": inbox.StaleReleased, "spent": inbox.StaleHeld}
	if fmt.Sprint(actions) != fmt.Sprint(want) {
		t.Fatalf("Sweep found %v; want %v", actions, want)
	}
	if reported := log.got(); len(reported) != 3 {
		t.Fatalf("OnStale got %d claims; want 3", len(reported))
	}
	if again, err := ib.Sweep(ctx); len(again) != 0 || err != nil {
		t.Fatalf("second Sweep = %+v, %v; want nothing", again, err)
	}
	for id, status := range map[string]string{"hold": "held", "reclaim": "released", "spent": "held", "fresh": "claimed", "applied": "done"} {
		if got, _, _ := e.row("", "h", id); got != status {
			t.Errorf("%s: status %q; want %q", id, got, status)
		}
	}
	held, err := ib.Held(ctx)
	if err != nil || len(held) != 2 || held[0].Claims != 1 || held[0].Reason == "" {
		t.Fatalf("Held() = %+v, %v; want hold and spent, 1 claim each, with a reason", held, err)
	}
	released, err := ib.Released(ctx)
	if err != nil || len(released) != 1 || released[0].EventID != "reclaim" {
		t.Fatalf("Released() = %+v, %v; want reclaim", released, err)
	}

	// A delivery (a replay) of the released event runs the effect again.
	var runs []inbox.Claim
	eff := func(p inbox.Policy) inbox.Effect[TTx] {
		return inbox.Effect[TTx]{Policy: p, Run: func(_ context.Context, c inbox.Claim) error { runs = append(runs, c); return nil }}
	}
	if out, err := ib.Do(ctx, "h", inbox.Event{ID: "reclaim"}, eff(inbox.Reclaim(time.Hour, 3))); out != inbox.Processed || err != nil {
		t.Fatalf("delivery of the released event = %v, %v; want processed", out, err)
	}
	if len(runs) != 1 || runs[0].Attempt != 2 {
		t.Fatalf("runs %+v; want one, as claim 2", runs)
	}
	// The held one does not run until a person resolves it.
	if out, _ := ib.Do(ctx, "h", inbox.Event{ID: "hold"}, eff(inbox.Hold(time.Hour))); out != inbox.Held || len(runs) != 1 {
		t.Fatalf("delivery of the held event = %v, %d runs; want held, not run", out, len(runs))
	}
	if err := ib.Resolve(ctx, "", "h", "spent", inbox.MarkDone); err != nil {
		t.Fatal(err)
	}
	if out, _ := ib.Do(ctx, "h", inbox.Event{ID: "spent"}, eff(inbox.Reclaim(time.Hour, 1))); out != inbox.Duplicate || len(runs) != 1 {
		t.Fatalf("delivery after MarkDone = %v, %d runs; want duplicate, not run", out, len(runs))
	}
	// A delivery that meets a stale claim before the sweep applies the
	// policy itself, and reports it too.
	abandon(t, e, "h", "met", inbox.Reclaim(time.Hour, 3))
	if err := inboxtest.AgeClaim(ctx, e.drv, "", "h", "met", 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	if out, err := ib.Do(ctx, "h", inbox.Event{ID: "met"}, eff(inbox.Reclaim(time.Hour, 3))); out != inbox.Processed || err != nil {
		t.Fatalf("delivery meeting a stale claim = %v, %v; want processed", out, err)
	}
	if r := log.got(); len(r) != 4 || r[3].EventID != "met" || r[3].Action != inbox.StaleReclaimed {
		t.Fatalf("OnStale got %+v; want a fourth report, met reclaimed", r)
	}
}

// An owner that hung in its effect past the stale duration wakes up after
// the sweep parked its claim: its finish fails with ErrLostClaim and its
// writes roll back, under either policy.
func (suite[TTx]) SweepFencesTheStaleOwner(t *testing.T, b backend[TTx]) {
	bothPolicies(t, b, time.Hour, func(t *testing.T, e *env[TTx], policy inbox.Policy, hold bool) {
		ctx := context.Background()
		inEffect, wake := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			_, err := e.ib.Do(ctx, "h", inbox.Event{ID: "evt_1"}, inbox.Effect[TTx]{
				Policy: policy,
				Run:    func(context.Context, inbox.Claim) error { close(inEffect); <-wake; return nil },
				Finish: func(ctx context.Context, tx TTx, _ inbox.Claim) error { return e.write(ctx, tx, "evt_1", "") },
			})
			done <- err
		}()
		<-inEffect
		if err := inboxtest.AgeClaim(ctx, e.drv, "", "h", "evt_1", 2*time.Hour); err != nil {
			t.Fatal(err)
		}
		if found, err := e.ib.Sweep(ctx); len(found) != 1 || err != nil {
			t.Fatalf("Sweep = %+v, %v; want the hung claim", found, err)
		}
		close(wake)
		if err := <-done; !errors.Is(err, inbox.ErrLostClaim) {
			t.Fatalf("stale owner's Do: %v; want ErrLostClaim", err)
		}
		if n := e.effects("evt_1"); n != 0 {
			t.Fatalf("stale owner's finish committed %d rows", n)
		}
	})
}

// Several sweepers (two Inboxes, as two processes would have, four
// goroutines each) over the same stale claims: each claim is changed and
// reported exactly once in all.
func (suite[TTx]) SweepConcurrent(t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	const claims = 24
	for i := range claims {
		p := inbox.Hold(time.Hour)
		if i%2 == 0 {
			p = inbox.Reclaim(time.Hour, 2)
		}
		abandon(t, e, "h", fmt.Sprintf("evt_%d", i), p)
	}
	if n, err := inboxtest.AgeClaims(ctx, e.drv, 2*time.Hour); n != claims || err != nil {
		t.Fatalf("AgeClaims = %d, %v", n, err)
	}
	var log staleLog
	inboxes := []*inbox.Inbox[TTx]{e.inbox(inbox.Config{OnStale: log.onStale}), e.reopen().inbox(inbox.Config{OnStale: log.onStale})}
	var mu sync.Mutex
	var returned []string
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range 8 {
		wg.Go(func() {
			<-start
			found, err := inboxes[i%2].Sweep(ctx)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			for _, c := range found {
				returned = append(returned, c.EventID)
			}
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	var reported []string
	for _, c := range log.got() {
		reported = append(reported, c.EventID)
	}
	slices.Sort(returned)
	slices.Sort(reported)
	if len(returned) != claims || len(slices.Compact(slices.Clone(returned))) != claims || !slices.Equal(returned, reported) {
		t.Fatalf("sweepers returned %d claims (%d distinct), reported %d; want each of %d once", len(returned), len(slices.Compact(slices.Clone(returned))), len(reported), claims)
	}
	held, _ := e.ib.Held(ctx)
	released, _ := e.ib.Released(ctx)
	if len(held) != claims/2 || len(released) != claims/2 {
		t.Fatalf("%d held, %d released; want %d each", len(held), len(released), claims/2)
	}
	// A person may also settle a released claim: checked, it happened.
	r := released[0]
	if err := e.ib.Resolve(ctx, r.Source, r.Handler, r.EventID, inbox.MarkDone); err != nil {
		t.Fatal(err)
	}
	if status, _, _ := e.row(r.Source, r.Handler, r.EventID); status != "done" {
		t.Fatalf("released claim marked done: %q", status)
	}
}

// The background loop surfaces a claim that goes stale while it runs; Stop
// is idempotent, and a stopped Sweeper sweeps no more.
func (suite[TTx]) Sweeper(t *testing.T, e *env[TTx]) {
	ctx := context.Background()
	log := staleLog{signal: make(chan struct{}, 10)}
	ib := e.inbox(inbox.Config{OnStale: log.onStale, Logger: testLogger(t)})
	sw := ib.NewSweeper(10 * time.Millisecond)
	sw.Start(ctx)
	sw.Start(ctx) // already running: nothing more
	abandon(t, e, "h", "evt_1", inbox.Hold(time.Hour))
	if err := inboxtest.AgeClaim(ctx, e.drv, "", "h", "evt_1", 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	<-log.signal
	if got := log.got(); len(got) != 1 || got[0].EventID != "evt_1" || got[0].Action != inbox.StaleHeld {
		t.Fatalf("OnStale got %+v; want evt_1 held", got)
	}
	sw.Stop()
	sw.Stop()
	abandon(t, e, "h", "evt_2", inbox.Hold(time.Hour))
	if err := inboxtest.AgeClaim(ctx, e.drv, "", "h", "evt_2", 2*time.Hour); err != nil {
		t.Fatal(err)
	}
	if status, _, _ := e.row("", "h", "evt_2"); status != "claimed" {
		t.Fatalf("a stopped Sweeper changed evt_2 to %q", status)
	}
	// Started again, it sweeps at once.
	sw.Start(ctx)
	defer sw.Stop()
	<-log.signal
	if status, _, _ := e.row("", "h", "evt_2"); status != "held" {
		t.Fatalf("evt_2 %q after restart; want held", status)
	}
}

// A database created by the first version of inbox (no policy columns)
// keeps its rows through Migrate; an old claim has no stored policy, so
// Sweep leaves it to a redelivery, which still applies the call's policy.
func (suite[TTx]) MigrateUpgradesOldSchema(t *testing.T, b backend[TTx]) {
	dsn := b.newDSN(t)
	drv := b.open(t, dsn)
	ctx := context.Background()
	for _, s := range []string{
		`CREATE TABLE inbox_events (
			source TEXT NOT NULL, handler TEXT NOT NULL, event_id TEXT NOT NULL, body_hash TEXT NOT NULL DEFAULT '',
			status TEXT NOT NULL, token TEXT NOT NULL DEFAULT '', attempts INTEGER NOT NULL DEFAULT 0,
			claimed_at BIGINT NOT NULL DEFAULT 0, updated_at BIGINT NOT NULL, error TEXT NOT NULL DEFAULT '',
			PRIMARY KEY (source, handler, event_id))`,
		`CREATE INDEX inbox_events_held ON inbox_events (updated_at) WHERE status = 'held'`,
		`INSERT INTO inbox_events (source, handler, event_id, status, updated_at) VALUES ('s', 'h', 'old_done', 'done', 1)`,
		`INSERT INTO inbox_events (source, handler, event_id, status, token, attempts, claimed_at, updated_at)
			VALUES ('s', 'h', 'old_claim', 'claimed', 'tok', 1, 1, 1)`,
	} {
		if _, err := drv.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	ib, err := inbox.New(drv, inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := ib.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if found, err := ib.Sweep(ctx); len(found) != 0 || err != nil {
		t.Fatalf("Sweep over an old claim = %+v, %v; want it left alone", found, err)
	}
	run := func(context.Context, inbox.Claim) error { return nil }
	if out, err := ib.Do(ctx, "h", inbox.Event{Source: "s", ID: "old_done"}, inbox.Effect[TTx]{Policy: inbox.Hold(time.Hour), Run: run}); out != inbox.Duplicate || err != nil {
		t.Fatalf("old done row: Do = %v, %v; want duplicate", out, err)
	}
	if out, err := ib.Do(ctx, "h", inbox.Event{Source: "s", ID: "old_claim"}, inbox.Effect[TTx]{Policy: inbox.Hold(time.Minute), Run: run}); out != inbox.Held || err != nil {
		t.Fatalf("old stale claim met by a delivery: Do = %v, %v; want held", out, err)
	}
	if out, err := ib.Do(ctx, "h", inbox.Event{Source: "s", ID: "new"}, inbox.Effect[TTx]{Policy: inbox.Hold(time.Minute), Run: run}); out != inbox.Processed || err != nil {
		t.Fatalf("new event: Do = %v, %v; want processed", out, err)
	}
}

// The crash kit's "the sender gave up" scenario: a real process is killed
// (SIGKILL) in the middle of its effect, after the provider received the
// call; no delivery of the event ever comes again. The sweep alone surfaces
// the claim and applies the policy: Hold parks it for a person, and the
// provider is never called again; Reclaim releases it, and the re-run a
// person (or a replay) then sends is deduplicated by the provider on the
// claim's key.
func (suite[TTx]) GatewayGaveUp(t *testing.T, b backend[TTx]) {
	bothPolicies(t, b, 5*time.Minute, func(t *testing.T, e *env[TTx], policy inbox.Policy, hold bool) {
		ctx := context.Background()
		ev := inbox.Event{Source: "stripe", ID: "evt_1"}
		effect := func(url string, block bool) inbox.Effect[TTx] {
			return inbox.Effect[TTx]{Policy: policy,
				Run: func(ctx context.Context, c inbox.Claim) error {
					if err := send(ctx, url, c.Key); err != nil {
						return err
					}
					if block { // the parent kills this process now
						<-time.After(time.Hour)
					}
					return nil
				},
				Finish: func(ctx context.Context, tx TTx, _ inbox.Claim) error { return e.write(ctx, tx, ev.ID, "") },
			}
		}
		if _, ok := inboxtest.CrashPoint(); ok {
			out, err := e.ib.Do(ctx, "capture", ev, effect(os.Getenv(envProvider), true))
			t.Fatalf("child was not killed: Do = %v, %v", out, err)
		}
		called := make(chan struct{})
		var once sync.Once
		provider := newFakeProvider(t)
		relay := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := send(r.Context(), provider.URL, r.Header.Get("Idempotency-Key")); err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			once.Do(func() { close(called) })
		}))
		defer relay.Close()
		inboxtest.Kill(t, called, envDSN+"="+e.dsn, envProvider+"="+relay.URL)

		if status, _, _ := e.row("stripe", "capture", "evt_1"); status != "claimed" {
			t.Fatalf("after kill -9: %q; want claimed", status)
		}
		var log staleLog
		ib := e.inbox(inbox.Config{OnStale: log.onStale})
		if found, _ := ib.Sweep(ctx); len(found) != 0 {
			t.Fatalf("Sweep before the stale duration: %+v", found)
		}
		// No redelivery ever comes; time passes.
		if n, err := inboxtest.AgeClaims(ctx, e.drv, 10*time.Minute); n != 1 || err != nil {
			t.Fatalf("AgeClaims = %d, %v", n, err)
		}
		found, err := ib.Sweep(ctx)
		if err != nil || len(found) != 1 || len(log.got()) != 1 {
			t.Fatalf("Sweep = %+v, %v, %d reported; want the killed claim, reported", found, err, len(log.got()))
		}
		if hold {
			held, err := ib.Held(ctx)
			if found[0].Action != inbox.StaleHeld || err != nil || len(held) != 1 || held[0].EventID != "evt_1" {
				t.Fatalf("hold: found %v, Held() = %+v, %v; want it held", found[0].Action, held, err)
			}
			// A person checks with the provider: captured. Mark it done.
			if err := ib.Resolve(ctx, held[0].Source, held[0].Handler, held[0].EventID, inbox.MarkDone); err != nil {
				t.Fatal(err)
			}
		} else {
			released, err := ib.Released(ctx)
			if found[0].Action != inbox.StaleReleased || err != nil || len(released) != 1 {
				t.Fatalf("reclaim: found %v, Released() = %+v, %v; want it released", found[0].Action, released, err)
			}
			// Someone sends the event again (anyhook replay): it runs.
			if out, err := ib.Do(ctx, "capture", ev, effect(provider.URL, false)); out != inbox.Processed || err != nil {
				t.Fatalf("re-run after the sweep: Do = %v, %v; want processed", out, err)
			}
		}
		calls, effects := provider.counts()
		want := 2 // the killed call and the re-run
		if hold {
			want = 1
		}
		if calls != want || effects != 1 {
			t.Fatalf("provider: %d calls, %d effects; want %d, 1", calls, effects, want)
		}
		if status, _, _ := e.row("stripe", "capture", "evt_1"); status != "done" {
			t.Fatalf("final status %q; want done", status)
		}
	})
}
