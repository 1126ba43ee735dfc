package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/syncio"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// binary is the anyhook command built once for the tests that cross
// process boundaries (kill -9, restart, exit statuses).
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "anyhook-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "anyhook")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "go build: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

const secret = "whsec_test_secret"

// proc is one running anyhook serve.
type proc struct {
	cmd    *exec.Cmd
	url    string
	stderr *syncio.Buffer // written by the process's copier, read by the test
	done   chan struct{}
}

func writeConfig(t *testing.T, dir, body string) string {
	t.Helper()
	path := filepath.Join(dir, "anyhook.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// start runs anyhook serve with cfg and waits until it listens.
func start(t *testing.T, cfg string) *proc {
	t.Helper()
	p, err := startProc(t, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startProc is start for any goroutine: it reports instead of failing t.
// The process is killed when t ends.
func startProc(t *testing.T, cfg string) (*proc, error) {
	return startCmd(t, exec.Command(binary, "serve", "--config", cfg, "--log-level", "warn"))
}

// launch starts cmd as a proc, killed when t ends, and returns it with the
// address it says it listens on, once it does.
func launch(t *testing.T, cmd *exec.Cmd) (*proc, <-chan string, error) {
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	p := &proc{cmd: cmd, stderr: &syncio.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.kill() })
	listening := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, addr, ok := strings.Cut(sc.Text(), "listening on "); ok {
				listening <- addr
			}
		}
	}()
	return p, listening, nil
}

// startCmd is startProc for a command of the caller's (a wrapper that sets
// the umask, say).
func startCmd(t *testing.T, cmd *exec.Cmd) (*proc, error) {
	p, listening, err := launch(t, cmd)
	if err != nil {
		return nil, err
	}
	select {
	case p.url = <-listening:
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("anyhook exited before listening: %s", p.stderr)
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("anyhook did not listen: %s", p.stderr)
	}
}

func (p *proc) kill() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// sendEvent posts a Stripe-signed event with id to the gateway.
func sendEvent(url, id string) (int, string, error) {
	body, h, err := stripeEvent(id, 0)
	if err != nil {
		return 0, "", err
	}
	return postEvent(http.DefaultClient, url, body, h)
}

// stripeEvent is a Stripe event with id, padded to at least size bytes and
// signed now: the body and headers a provider would send.
func stripeEvent(id string, size int) ([]byte, http.Header, error) {
	body := []byte(`{"id":"` + id + `","object":"event","type":"charge.succeeded","created":1700000000`)
	if pad := size - len(body) - len(`,"pad":""}`); pad > 0 {
		body = append(append(append(body, `,"pad":"`...), bytes.Repeat([]byte("x"), pad)...), `"`...)
	}
	body = append(body, '}')
	pr := &provider.Request{Method: "POST", Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
	if err := provider.Sign("stripe", secret, pr, time.Now()); err != nil {
		return nil, nil, err
	}
	return body, pr.Header, nil
}

// postEvent posts a signed Stripe event to the gateway at url and returns
// the status code and the AnyHook event id of the answer.
func postEvent(c *http.Client, url string, body []byte, h http.Header) (int, string, error) {
	req, err := http.NewRequest("POST", url+"/webhooks/stripe", bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header = h.Clone()
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	var a struct{ ID string }
	json.NewDecoder(resp.Body).Decode(&a)
	return resp.StatusCode, a.ID, nil
}

// recorder is a destination (sinktest.Sink) whose requests the tests read
// per X-AnyHook-Delivery.
type recorder struct{ *sinktest.Sink }

// newRecorder starts a recorder; with hold, its requests wait, unanswered,
// until Release.
func newRecorder(t *testing.T, hold bool) *recorder {
	return &recorder{sinktest.Start(t, sinktest.Options{Hold: hold})}
}

// next waits for the next request, in arrival order, and returns its
// delivery id.
func (r *recorder) next(t *testing.T) string {
	t.Helper()
	return r.Next(t).Header.Get("X-AnyHook-Delivery")
}

// expect waits for the next delivery to arrive at r, what it is in a
// failure, and wants it to be of event id.
func (r *recorder) expect(t *testing.T, id, what string) {
	t.Helper()
	if got := r.next(t); got != id {
		t.Fatalf("%s: delivery of %s, want %s", what, got, id)
	}
}

// attempts are the X-AnyHook-Attempt values of rs, per delivery id.
func attempts(rs []sinktest.Request) map[string][]string {
	m := map[string][]string{}
	for _, r := range rs {
		id := r.Header.Get("X-AnyHook-Delivery")
		m[id] = append(m[id], r.Header.Get("X-AnyHook-Attempt"))
	}
	return m
}

// snapshot is what r received so far: the attempts per delivery id.
func (r *recorder) snapshot() map[string][]string { return attempts(r.Requests()) }

// senders counts r's requests per ?proc= of the destination URL.
func (r *recorder) senders() map[string]int {
	m := map[string]int{}
	for _, q := range r.Requests() {
		m[q.URL.Query().Get("proc")]++
	}
	return m
}

// awaitAll waits for r to have received every event of want, failing t
// with how many never came, and returns what it received.
func (r *recorder) awaitAll(t *testing.T, want map[string]bool) map[string][]string {
	t.Helper()
	rs := r.Await(t, fmt.Sprintf("every one of %d acknowledged events delivered", len(want)), func(rs []sinktest.Request) bool {
		got := attempts(rs)
		for id := range want {
			if len(got[id]) == 0 {
				return false
			}
		}
		return true
	})
	return attempts(rs)
}

// sqliteGateway writes to dir the config of a gateway on the SQLite
// database dir/anyhook.db that delivers to a recorder answering at once
// (reclaim on a stale claim), and returns the config file and the recorder.
func sqliteGateway(t *testing.T, dir string) (string, *recorder) {
	t.Helper()
	dest := newRecorder(t, false)
	return writeConfig(t, dir, gatewayConfig("sqlite:anyhook.db", dest.URL, "reclaim")), dest
}

// gatewayConfig is a config with one stripe source and one billing
// destination, on database (sqlite:PATH or postgres://…).
func gatewayConfig(database, destURL, policy string) string {
	return fmt.Sprintf(`listen: 127.0.0.1:0
database: %q
admin_token: test-token
delivery: {poll_interval: 100ms, grace: 1s, shutdown: 1s}
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  billing:
    url: %s
    sources: [stripe]
    timeout: 2s
    on_stale_claim: %s
    backoff: {initial: 50ms, max: 200ms}
`, database, secret, destURL, policy)
}

// killDuringDelivery starts a gateway whose destination takes the
// policy on a stale claim, sends it one event and kills it (kill -9)
// while the first delivery attempt is in flight, then lets the
// destination answer. It returns the config, to restart with, the
// destination and the event id.
func killDuringDelivery(t *testing.T, policy string) (cfg string, dest *recorder, id string) {
	t.Helper()
	dest = newRecorder(t, true)
	cfg = writeConfig(t, t.TempDir(), gatewayConfig("sqlite:anyhook.db", dest.URL, policy))
	p := start(t, cfg)
	code, id, err := sendEvent(p.url, "evt_kill_"+policy)
	if err != nil || code != 200 {
		t.Fatalf("send = %d, %v", code, err)
	}
	if got := dest.next(t); got != id {
		t.Fatalf("delivery id %s, want %s", got, id)
	}
	p.kill() // attempt 1 is in flight: its outcome is unknown
	dest.Release()
	return cfg, dest, id
}

func TestKillDuringDeliveryReclaim(t *testing.T) {
	t.Parallel()
	cfg, dest, id := killDuringDelivery(t, "reclaim")
	start(t, cfg)
	dest.expect(t, id, "the resend after restart")
	if a := dest.snapshot()[id]; len(a) != 2 || a[0] != "1" || a[1] != "2" {
		t.Fatalf("attempt headers = %v, want [1 2]", a)
	}
}

func TestKillDuringDeliveryHold(t *testing.T) {
	t.Parallel()
	cfg, dest, id := killDuringDelivery(t, "hold")
	p2 := start(t, cfg)
	var list struct {
		Items []struct {
			ID      string
			EventID string `json:"event_id"`
			Status  string
		}
	}
	testwait.For(t, "the delivery to be held after its lease expired", func() bool {
		gatewaytest.AdminJSON(t, p2.url+"/api/deliveries?status=held", &list)
		return len(list.Items) == 1
	})
	if list.Items[0].EventID != id {
		t.Fatalf("held = %+v, want event %s", list.Items[0], id)
	}
	// Held means nothing is sent: give the workers several poll cycles.
	time.Sleep(500 * time.Millisecond)
	if a := dest.snapshot()[id]; len(a) != 1 {
		t.Fatalf("held delivery was sent %d times, want 1", len(a))
	}
}

func TestKillDuringBurstLosesNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg, dest := sqliteGateway(t, dir)
	acked := burstThenKill(t, start(t, cfg), "evt_burst", 400, 16)
	nAcked := len(acked)
	start(t, cfg)
	dest.awaitAll(t, acked)
	t.Logf("%d acknowledged before kill -9, all delivered after restart", nAcked)
}

func TestSIGTERMExitsZero(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg, _ := sqliteGateway(t, dir)
	p := start(t, cfg)
	if code, _, err := sendEvent(p.url, "evt_term"); err != nil || code != 200 {
		t.Fatalf("send = %d, %v", code, err)
	}
	p.stopExitsZero(t)
}

func TestBadConfigExits2(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name, config string
		want         []string
	}{
		{"unknown key", "listen: 127.0.0.1:0\nsources:\n  s: {provider: stripe, secrets: [whsec_x]}\n  t:\n    provider: stripe\n    secretz: [x]\n", []string{"anyhook.yaml:6", "secretz"}},
		{"generic without signature", "sources:\n  orders:\n    provider: generic\n", []string{"anyhook.yaml:2", "sources.orders.signature", "signature: none"}},
		{"unset variable", "admin_token: ${ANYHOOK_TEST_UNSET_VAR}\nsources:\n  s: {provider: stripe, secrets: [whsec_x]}\n", []string{"anyhook.yaml:1", "admin_token", "ANYHOOK_TEST_UNSET_VAR"}},
		{"indentation", "sources:\n  stripe:\n    provider: stripe\n     secrets: [x]\n", []string{"anyhook.yaml:4: invalid YAML", "indented deeper than line 3"}},
		{"tab", "sources:\n  stripe:\n\tprovider: stripe\n", []string{"anyhook.yaml:3: invalid YAML", "tab"}},
		{"broker without its block", "sources:\n  s: {provider: stripe, secrets: [whsec_x]}\ndestinations:\n  n:\n    type: nats\n    sources: [s]\n", []string{"anyhook.yaml:4", "destinations.n.nats: required"}},
		{"stripe secret", "sources:\n  stripe:\n    provider: stripe\n    secrets:\n      - whsec_ok\n      - sk_live_abc\n", []string{"anyhook.yaml:6: sources.stripe.secrets[1]: not a Stripe signing secret", "whsec_"}},
	}
	for _, tt := range tests {
		cfg := writeConfig(t, t.TempDir(), tt.config)
		var stderr bytes.Buffer
		cmd := exec.Command(binary, "serve", "--config", cfg)
		cmd.Stderr = &stderr
		cmd.Dir = dir
		err := cmd.Run()
		if cmd.ProcessState.ExitCode() != 2 {
			t.Errorf("%s: exit %v, want 2; stderr %q", tt.name, err, stderr.String())
			continue
		}
		msg := stderr.String()
		if strings.Contains(msg, "sk_live_abc") {
			t.Errorf("%s: stderr %q quotes a secret", tt.name, msg)
		}
		if strings.Count(strings.TrimSpace(msg), "\n") != 0 || strings.Contains(msg, "goroutine") {
			t.Errorf("%s: want one line, got %q", tt.name, msg)
		}
		for _, w := range tt.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: stderr %q does not name %q", tt.name, msg, w)
			}
		}
	}
	var stderr bytes.Buffer
	cmd := exec.Command(binary, "serve", "--config", filepath.Join(dir, "missing.yaml"))
	cmd.Stderr = &stderr
	cmd.Run()
	if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(stderr.String(), "missing.yaml") {
		t.Errorf("missing config: exit %d, stderr %q", cmd.ProcessState.ExitCode(), stderr.String())
	}
	cmd = exec.Command(binary, "serve", "--bogus")
	cmd.Stderr = io.Discard
	cmd.Run()
	if cmd.ProcessState.ExitCode() != 2 {
		t.Errorf("bad flag: exit %d, want 2", cmd.ProcessState.ExitCode())
	}
}

// startSink runs anyhook sink on a free port with args, until t ends, and
// returns its URL and the lines it prints after the first.
func startSink(t *testing.T, args ...string) (string, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"sink", "--listen", "127.0.0.1:0"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	lines := bufio.NewScanner(out)
	if !lines.Scan() {
		t.Fatal("sink printed nothing")
	}
	_, addr, ok := strings.Cut(lines.Text(), "listening on ")
	addr, _, _ = strings.Cut(addr, ",")
	if !ok {
		t.Fatalf("sink said %q", lines.Text())
	}
	return addr, lines
}

// anyhook sink as the example's destination: it prints each delivery and
// checks the gateway's signature.
func TestSinkReceivesDeliveries(t *testing.T) {
	t.Parallel()
	const signing = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	addr, lines := startSink(t, "--signing-secret", signing)
	dir := t.TempDir()
	cfg := gatewayConfig("sqlite:anyhook.db", addr+"/hooks", "reclaim") + "    signing_secret: " + signing + "\n"
	p := start(t, writeConfig(t, dir, cfg))
	body := []byte(`{"id":"evt_sink","object":"event","type":"charge.succeeded","created":1700000000,"data":{"object":{"id":"ch_sink"}}}`)
	pr := &provider.Request{Method: "POST", Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
	if err := provider.Sign("stripe", secret, pr, time.Now()); err != nil {
		t.Fatal(err)
	}
	code, id, err := postEvent(http.DefaultClient, p.url, body, pr.Header)
	if err != nil || code != 200 {
		t.Fatalf("send = %d, %v", code, err)
	}
	if !lines.Scan() {
		t.Fatal("sink printed no delivery")
	}
	line := lines.Text()
	for _, want := range []string{"event_id=" + id, "attempt=1", "replay=false", "source=stripe", "provider_event_id=evt_sink", "-> 200", "object=ch_sink version=1700000000", "signature: ok"} {
		if !strings.Contains(line, want) {
			t.Errorf("sink line %q lacks %q", line, want)
		}
	}
}

// anyhook replay against a running gateway's database: the replayed
// delivery carries the same X-AnyHook-Delivery and X-AnyHook-Replay: true.
func TestReplayCommand(t *testing.T) {
	t.Parallel()
	dest := sinktest.New(t)
	dir := t.TempDir()
	cfg := writeConfig(t, dir, gatewayConfig("sqlite:anyhook.db", dest.URL, "reclaim"))
	p := start(t, cfg)
	code, id, err := sendEvent(p.url, "evt_replay_cmd")
	if err != nil || code != 200 {
		t.Fatalf("send = %d, %v", code, err)
	}
	dest.Next(t)

	run := func(args ...string) (int, string) {
		var out bytes.Buffer
		cmd := exec.Command(binary, append([]string{"replay", "--config", cfg}, args...)...)
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.Run()
		return cmd.ProcessState.ExitCode(), out.String()
	}
	if code, out := run("--event", id, "--destination", "nope"); code != 2 || !strings.Contains(out, `"nope"`) {
		t.Fatalf("unknown destination: exit %d %q, want 2 naming it", code, out)
	}
	if code, out := run("--event", id); code != 0 || !strings.Contains(out, "to billing: 1 delivery") {
		t.Fatalf("replay: exit %d %q", code, out)
	}
	dest.Next(t) // the replay
	var replays []string
	for _, r := range dest.Requests() {
		replays = append(replays, r.Header.Get("X-AnyHook-Delivery")+" replay="+r.Header.Get("X-AnyHook-Replay"))
	}
	if want := []string{id + " replay=false", id + " replay=true"}; fmt.Sprint(replays) != fmt.Sprint(want) {
		t.Fatalf("deliveries %v, want %v", replays, want)
	}
}

// burstThenKill sends events (ids prefix_0, prefix_1, …) from workers
// concurrently to p and kill -9s it once a third of them were
// acknowledged. It returns the AnyHook ids of the acknowledged events and
// fails the test if the kill did not land mid-burst.
func burstThenKill(t *testing.T, p *proc, prefix string, events, workers int) map[string]bool {
	t.Helper()
	var mu sync.Mutex
	acked := map[string]bool{}
	next := make(chan int)
	stop := make(chan struct{})
	go func() {
		defer close(next)
		for i := range events {
			select {
			case next <- i:
			case <-stop:
				return
			}
		}
	}()
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				code, id, err := sendEvent(p.url, fmt.Sprintf("%s_%d", prefix, i))
				if err != nil {
					once.Do(func() { close(stop) }) // the gateway is gone
					continue
				}
				if code == 200 {
					mu.Lock()
					acked[id] = true
					n := len(acked)
					mu.Unlock()
					if n == events/3 {
						p.cmd.Process.Signal(syscall.SIGKILL)
					}
				}
			}
		})
	}
	wg.Wait()
	<-p.done
	if len(acked) < events/3 || len(acked) == events {
		t.Fatalf("%d of %d acknowledged: the kill did not land mid-burst", len(acked), events)
	}
	return acked
}
