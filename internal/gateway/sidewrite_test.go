package gateway_test

import (
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
)

// brokenWriter fails every write, as a full disk or a closed pipe would.
type brokenWriter struct{}

func (brokenWriter) Write([]byte) (int, error) { return 0, errors.New("write failed") }

// A side write that fails after a destination's 2xx — the
// tamper-evident log (its tables broken), the alerts (a channel that never
// answers), the process log (a writer that fails) — must not make the
// gateway send the delivery again: the 2xx is recorded and the delivery is
// delivered, once.
func TestSideWriteFailuresNeverRedeliver(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	alerts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-hang }))
	t.Cleanup(alerts.Close) // after the gateway stopped
	// Five failures open an incident (an alert), the sixth attempt
	// succeeds.
	sk := sinktest.New(t, 500, 500, 500, 500, 500)
	db := filepath.Join(t.TempDir(), "anyhook.db")
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:%s
admin_token: test-token
delivery: {poll_interval: 50ms, grace: 1s}
log: {checkpoint_interval: 50ms}
alerts:
  - webhook: %s/alerts
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  billing:
    url: %s/hooks
    sources: [stripe]
    timeout: 5s
    max_attempts: 10
    backoff: {initial: 10ms, max: 20ms}
`, db, alerts.URL, stripeSecret, sk.URL)
	base, g := gatewaytest.Start(t, yaml, gateway.Options{
		Logger: slog.New(slog.NewJSONHandler(brokenWriter{}, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	t.Cleanup(func() { close(hang) }) // before the gateway stops: its alert flush must not wait for the timeout
	e := &env{url: base, gw: g, store: g.Store(), sink: sk}

	raw, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`DROP TABLE ledger_hashes`); err != nil {
		t.Fatal(err)
	}

	first := e.sendStripe(t, "evt_side_1")
	if first.Code != 200 {
		t.Fatalf("send: %+v", first)
	}
	d := e.waitStatus(t, first.ID, anyhook.StatusDelivered)
	second := e.sendStripe(t, "evt_side_2")
	e.waitStatus(t, second.ID, anyhook.StatusDelivered)

	ev, err := e.store.Event(t.Context(), first.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := ev.Deliveries[0].Attempts; len(got) != 6 || got[5].StatusCode != 200 || d.AttemptCount != 6 {
		t.Fatalf("attempts = %+v, want five failures and one 200", got)
	}
	perEvent := map[string]int{}
	for _, r := range sk.Requests() {
		perEvent[r.Header.Get("X-AnyHook-Delivery")]++
	}
	if perEvent[first.ID] != 6 || perEvent[second.ID] != 1 {
		t.Fatalf("requests per event = %v, want 6 for the first (5 failed) and 1 for the second", perEvent)
	}
}
