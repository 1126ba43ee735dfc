package gateway_test

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/ledger"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// TestPrunedEventNeverSent: a pending delivery of an event whose body
// retention pruned (the store never creates one; here it is written behind
// the gateway's back) is not sent with an empty body: the engine records it
// dead, saying why, and the destination gets nothing.
func TestPrunedEventNeverSent(t *testing.T) {
	t.Parallel()
	sk := sinktest.New(t)
	db := filepath.Join(t.TempDir(), "anyhook.db")
	base, g := gatewaytest.Start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:%s
admin_token: test-token
delivery: {poll_interval: 50ms, grace: 1s}
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  billing: {url: %s/hooks, sources: [stripe], timeout: 5s}
`, db, stripeSecret, sk.URL), gateway.Options{})
	e := &env{url: base, gw: g, store: g.Store(), sink: sk}
	a := e.sendStripe(t, "evt_pruned")
	if a.Code != 200 {
		t.Fatalf("ingest: %+v", a)
	}
	e.waitStatus(t, a.ID, anyhook.StatusDelivered)
	l := g.Store().(store.Ledger)
	if _, err := ledger.NewSequencer(l, ledger.SequencerOptions{}).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, err := ledger.Prune(t.Context(), l, time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v", n, err)
	}
	raw, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	now := time.Now().UnixMicro()
	if _, err := raw.ExecContext(t.Context(), `INSERT INTO deliveries (id, event_id, destination, status, replay, next_attempt_at, created_at, updated_at)
		VALUES (?, ?, 'billing', 'pending', 1, ?, ?, ?)`, store.NewID(), a.ID, now, now, now); err != nil {
		t.Fatal(err)
	}
	testwait.Value(t, "the injected delivery dead", func() (struct{}, error) {
		ev, err := e.store.Event(t.Context(), a.ID)
		if err != nil {
			t.Fatal(err)
		}
		var d *anyhook.Delivery
		for i := range ev.Deliveries {
			if ev.Deliveries[i].Replay {
				d = &ev.Deliveries[i]
			}
		}
		if d != nil && d.Status == anyhook.StatusDelivered {
			t.Fatalf("the pruned event was sent, with an empty body: %+v", d)
		}
		if d != nil && d.Status == anyhook.StatusDead {
			if len(d.Attempts) != 1 || !strings.Contains(d.Attempts[0].Error, "not sent: the event's body was pruned by retention") {
				t.Errorf("refused delivery: attempts %+v", d.Attempts)
			}
			return struct{}{}, nil
		}
		return struct{}{}, fmt.Errorf("deliveries %+v", ev.Deliveries)
	})
	if got := sk.Requests(); len(got) != 1 {
		t.Fatalf("the destination got %d requests, want only the original", len(got))
	}
}
