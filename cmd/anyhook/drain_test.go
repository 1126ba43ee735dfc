package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

// TestSIGTERMDrainsAndReleases: SIGTERM says the gateway is draining, and
// the attempts it aborts do not wait for their lease: one never sent (a
// TLS handshake that never ends) is released, pending again with its
// attempt not counted; one sent to a handler that never answers (it may
// have run) is recorded as a failed attempt, due again at once, as a
// reclaim would.
func TestSIGTERMDrainsAndReleases(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// stuck accepts connections and never says a word: a TLS client
	// waits for its handshake.
	stuck, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stuck.Close() })
	go func() {
		for {
			c, err := stuck.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
		}
	}()
	reading := make(chan struct{}, 1)
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		reading <- struct{}{}
		<-r.Context().Done()
	}))
	t.Cleanup(hang.Close)
	cfg := writeConfig(t, dir, fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:%s
admin_token: test-token
delivery: {poll_interval: 100ms, grace: 1s, shutdown: 100ms}
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  handshake: {url: "https://%s/hooks", sources: [stripe], timeout: 1h}
  hang: {url: "%s/hooks", sources: [stripe], timeout: 1h}
`, filepath.Join(dir, "anyhook.db"), secret, stuck.Addr(), hang.URL))
	p, listening, err := launch(t, exec.Command(binary, "serve", "--config", cfg, "--log-level", "info"))
	if err != nil {
		t.Fatal(err)
	}
	p.url = <-listening
	if code, _, err := sendEvent(p.url, "evt_drain"); err != nil || code != 200 {
		t.Fatalf("send = %d, %v", code, err)
	}
	<-reading // the hang destination's handler has the request
	p.stopExitsZero(t)
	if log := p.stderr.String(); !strings.Contains(log, "draining") {
		t.Errorf("stderr after SIGTERM lacks draining:\n%s", log)
	}

	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "anyhook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ds, _, err := st.ListDeliveries(context.Background(), store.DeliveryFilter{Limit: 10})
	if err != nil || len(ds) != 2 {
		t.Fatalf("deliveries %v, %v", ds, err)
	}
	got := map[string]anyhook.Delivery{}
	for _, d := range ds {
		got[d.Destination] = d
	}
	if d := got["handshake"]; d.Status != anyhook.StatusPending || d.AttemptCount != 0 || !d.LeaseUntil.IsZero() {
		t.Errorf("the delivery never sent: %s, attempt %d, lease %v; want pending, no attempt, no lease (released)", d.Status, d.AttemptCount, d.LeaseUntil)
	}
	d := got["hang"]
	if d.Status != anyhook.StatusRetrying || d.AttemptCount != 1 || !d.LeaseUntil.IsZero() {
		t.Errorf("the delivery sent, unanswered: %s, attempt %d, lease %v; want retrying after attempt 1, no lease", d.Status, d.AttemptCount, d.LeaseUntil)
	}
	ev, err := st.Event(context.Background(), d.EventID)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ev.Deliveries {
		if x.Destination == "hang" && (len(x.Attempts) != 1 || x.Attempts[0].Outcome != anyhook.OutcomeNoAnswer) {
			t.Errorf("hang's attempts %+v; want one, sent without an answer", x.Attempts)
		}
	}
}
