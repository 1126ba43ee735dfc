package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/anyhook/anyhook/internal/testkit/syncio"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

const pullSigning = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// pullConfig is a gateway with a stripe source and one pull destination,
// dev, that signs with pullSigning and takes stale leases as policy.
func pullConfig(database, policy string) string {
	return fmt.Sprintf(`listen: 127.0.0.1:0
database: %q
admin_token: test-token
delivery: {poll_interval: 100ms, grace: 1s, shutdown: 1s}
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  dev:
    type: pull
    sources: [stripe]
    signing_secret: %s
    on_stale_claim: %s
    backoff: {initial: 50ms, max: 200ms}
`, database, secret, pullSigning, policy)
}

// verifiedHandler is a local handler that checks each request with the
// reference Standard Webhooks library and records the webhook ids it
// accepted; status answers each.
type verifiedHandler struct {
	*httptest.Server
	mu     sync.Mutex
	got    []string // webhook-id of each verified request
	status func(n int) int
}

func newVerifiedHandler(t *testing.T, status func(n int) int) *verifiedHandler {
	h := &verifiedHandler{status: status}
	wh, err := standardwebhooks.NewWebhook(pullSigning)
	if err != nil {
		t.Fatal(err)
	}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := wh.Verify(body, r.Header); err != nil {
			t.Errorf("the forwarded request does not verify: %v", err)
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		h.mu.Lock()
		h.got = append(h.got, r.Header.Get("Webhook-Id"))
		n := len(h.got)
		h.mu.Unlock()
		w.WriteHeader(h.status(n))
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *verifiedHandler) ids() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.got...)
}

// startListen runs anyhook listen and returns its output lines.
func startListen(t *testing.T, args ...string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"listen"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncio.Buffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("listen's stderr:\n%s", stderr.String())
		}
	})
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	return cmd, lines
}

func nextLine(t *testing.T, lines <-chan string) string {
	t.Helper()
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatal("listen exited")
		}
		return l
	case <-time.After(30 * time.Second):
		t.Fatal("listen printed nothing for 30s")
	}
	return ""
}

// anyhook listen forwards a pull destination's deliveries with a
// signature the reference Standard Webhooks library accepts, prints a
// line for each, nacks a failure (retried) and acks a 2xx: each event
// ends delivered once.
func TestListenForwards(t *testing.T) {
	t.Parallel()
	p := start(t, writeConfig(t, t.TempDir(), pullConfig("sqlite:anyhook.db", "reclaim")))
	// The first request fails: it is nacked and comes again.
	h := newVerifiedHandler(t, func(n int) int {
		if n == 1 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	_, lines := startListen(t, "--gateway", p.url, "--destination", "dev", "--token", "test-token", "--forward", h.URL)
	var ids []string
	for i := range 2 {
		code, id, err := sendEvent(p.url, fmt.Sprintf("evt_listen_%d", i))
		if err != nil || code != http.StatusOK {
			t.Fatalf("send: %d %v", code, err)
		}
		ids = append(ids, id)
	}
	seen := map[string]bool{}
	for len(seen) < 2 {
		l := nextLine(t, lines)
		if !strings.Contains(l, "charge.succeeded") {
			t.Fatalf("line %q does not name the event type", l)
		}
		for _, id := range ids {
			if strings.Contains(l, id) && strings.Contains(l, " 200 ") {
				seen[id] = true
			}
		}
	}
	for _, id := range ids {
		ev := getEvent(t, p.url, id)
		if len(ev.Deliveries) != 1 || ev.Deliveries[0].Status != "delivered" {
			t.Fatalf("event %s deliveries: %+v", id, ev.Deliveries)
		}
	}
	if got := h.ids(); len(got) != 3 {
		t.Fatalf("the handler verified %d requests, want 3 (one failed, then both): %v", len(got), got)
	}
}

type eventView struct {
	Deliveries []struct {
		Status   string `json:"status"`
		Attempts []struct {
			Number int    `json:"number"`
			Error  string `json:"error"`
		} `json:"attempts"`
	} `json:"deliveries"`
}

func getEvent(t *testing.T, base, id string) eventView {
	t.Helper()
	var ev eventView
	deadline := time.Now().Add(10 * time.Second)
	for {
		req, _ := http.NewRequest("GET", base+"/api/events/"+id, nil)
		req.Header.Set("Authorization", "Bearer test-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		err = json.NewDecoder(resp.Body).Decode(&ev)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		// The ack follows the printed line: wait for it to be recorded.
		if len(ev.Deliveries) == 1 && ev.Deliveries[0].Status == "delivered" || time.Now().After(deadline) {
			return ev
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A consumer killed (kill -9) mid-lease loses nothing: under reclaim
// the delivery is leased again as the next attempt after the lease runs
// out, and delivered once by the next consumer.
func TestListenKilledMidLease(t *testing.T) {
	t.Parallel()
	p := start(t, writeConfig(t, t.TempDir(), pullConfig("sqlite:anyhook.db", "reclaim")))
	// hold is buffered: the forward can come before the test waits for it
	// (the delivery is handed over before sendEvent returns), and an
	// unbuffered signal sent then was dropped, so the test killed the
	// consumer only at its second forward.
	hold, release := make(chan struct{}, 1), make(chan struct{})
	stuck := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case hold <- struct{}{}:
		default:
		}
		select { // never answers
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(stuck.Close)
	t.Cleanup(func() { close(release) }) // before Close, which waits for the handler
	first, _ := startListen(t, "--gateway", p.url, "--destination", "dev", "--token", "test-token", "--forward", stuck.URL, "--lease", "2s")
	code, id, err := sendEvent(p.url, "evt_listen_kill")
	if err != nil || code != http.StatusOK {
		t.Fatalf("send: %d %v", code, err)
	}
	select {
	case <-hold:
	case <-time.After(30 * time.Second):
		t.Fatal("the first consumer never forwarded")
	}
	first.Process.Kill() // mid-lease: no ack, no nack
	h := newVerifiedHandler(t, func(int) int { return http.StatusOK })
	_, lines := startListen(t, "--gateway", p.url, "--destination", "dev", "--token", "test-token", "--forward", h.URL)
	for l := nextLine(t, lines); !strings.Contains(l, id); l = nextLine(t, lines) {
	}
	ev := getEvent(t, p.url, id)
	d := ev.Deliveries[0]
	if d.Status != "delivered" || len(d.Attempts) != 2 || d.Attempts[1].Number != 2 {
		t.Fatalf("after the kill: %+v, want delivered at attempt 2 after the lost attempt 1", d)
	}
	if got := h.ids(); len(got) != 1 || got[0] != id {
		t.Fatalf("the second consumer got %v, want %s once", got, id)
	}
}

// SIGTERM does not wait for consumers: a lease request long polling and
// a lease stream are answered and ended as the shutdown begins, and the
// gateway exits 0 (a graceful shutdown would otherwise wait out its
// deadline for them, and fail).
func TestSIGTERMEndsPulls(t *testing.T) {
	t.Parallel()
	p := start(t, writeConfig(t, t.TempDir(), pullConfig("sqlite:anyhook.db", "reclaim")))
	pull := func(method, path, body string) (*http.Response, error) {
		req, err := http.NewRequest(method, p.url+path, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer test-token")
		return http.DefaultClient.Do(req)
	}
	stream, err := pull("GET", "/api/destinations/dev/stream", "")
	if err != nil || stream.StatusCode != http.StatusOK {
		t.Fatalf("stream: %v %v", stream, err)
	}
	defer stream.Body.Close()
	polled := make(chan error, 1)
	go func() {
		resp, err := pull("POST", "/api/destinations/dev/lease", `{"wait": "60s"}`)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"deliveries":[]`) {
				err = fmt.Errorf("the long poll answered %d %s", resp.StatusCode, body)
			}
		}
		polled <- err
	}()
	time.Sleep(200 * time.Millisecond) // the long poll is waiting (were it not yet, it would be refused: also a failure below)
	p.stopExitsZero(t)
	if strings.Contains(p.stderr.String(), "stop was not clean") {
		t.Fatalf("the shutdown waited for the consumers until its deadline: %s", p.stderr)
	}
	if err := <-polled; err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, stream.Body); err != nil {
		t.Logf("the stream ended with %v", err)
	}
}

// Two gateway processes on one PostgreSQL database, a listen consumer on
// each: every event is forwarded and acked once, never to both
// consumers. Then one gateway is killed (kill -9) under its consumer's
// open stream and the other consumer stopped; what is sent meanwhile is
// delivered once the killed gateway is back, by its consumer, which
// reconnected by itself.
func TestListenTwoGatewaysPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgDSN(t)
	// The second gateway restarts on its own address: its consumer knows
	// no other.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ps := startConfigs(t, 2, func(i int) string {
		c := pullConfig(dsn, "reclaim")
		if i == 2 {
			c = strings.Replace(c, "listen: 127.0.0.1:0", "listen: "+addr, 1)
		}
		return c
	})
	h := newVerifiedHandler(t, func(int) int { return http.StatusOK })
	var consumers []*exec.Cmd
	for _, p := range ps {
		c, _ := startListen(t, "--gateway", p.url, "--destination", "dev", "--token", "test-token", "--forward", h.URL, "--lease", "10s")
		consumers = append(consumers, c)
	}
	send := func(prefix string, n int) map[string]bool {
		ids := map[string]bool{}
		for i := range n {
			code, id, err := sendEvent(ps[0].url, fmt.Sprintf("%s_%d", prefix, i))
			if err != nil || code != http.StatusOK {
				t.Fatalf("send: %d %v", code, err)
			}
			ids[id] = true
		}
		return ids
	}
	delivered := func(ids map[string]bool) {
		t.Helper()
		testwait.For(t, "every event delivered", func() bool {
			n := 0
			for id := range ids {
				if ev := getEventNow(t, ps[0].url, id); len(ev.Deliveries) == 1 && ev.Deliveries[0].Status == "delivered" {
					n++
				}
			}
			return n == len(ids)
		})
	}
	first := send("evt_two", 20)
	delivered(first)
	seen := map[string]int{}
	for _, id := range h.ids() {
		seen[id]++
	}
	for id := range first {
		if seen[id] != 1 {
			t.Errorf("event %s forwarded %d times, want once (no lease ran out)", id, seen[id])
		}
	}
	cfg := ps[1].cmd.Args[3] // serve --config FILE
	ps[1].kill()
	consumers[0].Process.Kill()
	second := send("evt_after_kill", 10)
	ps[1] = start(t, cfg)
	delivered(second)
}

// getEventNow reads the event once (getEvent waits for it to be
// delivered).
func getEventNow(t *testing.T, base, id string) eventView {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api/events/"+id, nil)
	req.Header.Set("Authorization", "Bearer test-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ev eventView
	json.NewDecoder(resp.Body).Decode(&ev)
	return ev
}
