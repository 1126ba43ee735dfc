package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/postgres"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// The caller of Claim gives up (shutdown) while the COMMIT
// is in flight and the database has already carried it out. Claim must
// not report a failure for a claim that stands: the engine would send
// nothing, and the lease would expire into held (under hold) although
// nothing was sent. The commit is seen through instead.
func TestClaimCommitOutlivesCancel(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	h := pgtest.HoldCommit(t, dsn)
	s, err := postgres.Open(t.Context(), h.DSN, postgres.Options{MaxConns: 2, Tracer: h.Tracer})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := s.Ingest(t.Context(), []store.NewEvent{newEvent("stripe", "evt_1", "charges")})
	if err != nil || res[0].Err != nil {
		t.Fatalf("Ingest: %v %+v", err, res)
	}

	ctx, cancel := context.WithCancel(t.Context())
	type result struct {
		claims []store.Claim
		err    error
	}
	done := make(chan result, 1)
	h.Tracer.Armed.Store(true)
	go func() {
		cs, err := s.Claim(ctx, "charges", 1, time.Minute)
		done <- result{cs, err}
	}()
	<-h.Committing
	// Wait (directly, not through the proxy) until the claim is committed.
	testwait.For(t, "the claim to be committed", func() bool {
		return query[string](t, dsn, `SELECT status FROM deliveries`) == "delivering"
	})
	cancel()
	var r result
	select {
	case r = <-done: // gave up on the commit: the defect
	case <-time.After(300 * time.Millisecond): // still waiting for the answer, as it should
		h.Proxy.ReleaseReplies()
		r = <-done
	}
	h.Proxy.ReleaseReplies()
	if r.err != nil {
		t.Fatalf("Claim = %v after the database committed the claim; the claim stands but its worker was told it failed", r.err)
	}
	if len(r.claims) != 1 || r.claims[0].Delivery.Status != anyhook.StatusDelivering {
		t.Fatalf("Claim = %+v, want the committed claim", r.claims)
	}
}
