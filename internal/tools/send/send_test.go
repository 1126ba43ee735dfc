package send

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/provider"
)

// receiver is a minimal AnyHook-like endpoint: it verifies with the real
// provider, dedups on the extracted keys and answers like the gateway.
type receiver struct {
	t    *testing.T
	prov provider.Provider
	srv  *httptest.Server

	mu       sync.Mutex
	requests int
	events   []provider.Event
	seen     map[string]bool
	header   http.Header // the last request's
}

func newReceiver(t *testing.T, src provider.Settings) *receiver {
	t.Helper()
	prov, err := provider.New(src)
	if err != nil {
		t.Fatal(err)
	}
	rc := &receiver{t: t, prov: prov, seen: map[string]bool{}}
	rc.srv = httptest.NewServer(http.HandlerFunc(rc.serve))
	t.Cleanup(rc.srv.Close)
	return rc
}

func (rc *receiver) url() string { return rc.srv.URL + "/webhooks/src?x=1" }

func (rc *receiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := &provider.Request{Method: r.Method, URL: "http://" + r.Host + r.URL.RequestURI(), Header: r.Header, Body: body}
	w.Header().Set("Content-Type", "application/json")
	if _, err := rc.prov.Verify(req, time.Now()); err != nil {
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	x, err := rc.prov.Extract(req)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.requests++
	rc.header = r.Header.Clone()
	status := "duplicate"
	for _, e := range x.Events {
		if e.DedupKey == "" || !rc.seen[e.DedupKey] {
			status = "accepted"
		}
		rc.seen[e.DedupKey] = true
		rc.events = append(rc.events, e)
	}
	_, _ = w.Write([]byte(`{"status":"` + status + `","id":"ah_1"}`))
}

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func secretFor(p string) string {
	switch p {
	case "standard":
		return "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	case "stripe":
		return "whsec_s3cret-stripe" // Stripe's secrets start with whsec_
	}
	return "s3cret-" + p
}

// TestEveryProvider: each built-in sample verifies with the real provider,
// and --times N delivers one event N times.
func TestEveryProvider(t *testing.T) {
	t.Parallel()
	for _, p := range provider.Names() {
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			src := provider.Settings{Provider: p, Secrets: []string{secretFor(p)}}
			args := []string{"--provider", p, "--secret", secretFor(p)}
			if p == "generic" {
				src.Signature = &provider.Signature{Header: "X-Signature", Prefix: "sha256="}
				src.ID = "header:X-Request-Id"
				src.Ordering = &provider.Ordering{Object: "json:order.id", Version: "json:order.updated_at"}
				args = append(args, "--signature-header", "X-Signature", "--prefix", "sha256=")
			}
			rc := newReceiver(t, src)
			code, out, stderr := run(t, append(args, "--url", rc.url(), "--times", "4", "--concurrency", "2")...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q, stdout:\n%s", code, stderr, out)
			}
			t.Logf("output:\n%s", out)
			if rc.requests != 4 {
				t.Fatalf("%d requests verified, want 4", rc.requests)
			}
			if !strings.Contains(out, "1 × 200 accepted\n") || !strings.Contains(out, "3 × 200 duplicate\n") || !strings.Contains(out, "sent 4 in ") || !strings.Contains(out, "(200: 4); not accepted: 0, of them with no answer: 0") {
				t.Errorf("output:\n%s", out)
			}
			keys := map[string]bool{}
			for _, e := range rc.events {
				keys[e.DedupKey] = true
			}
			want := 1
			if p == "hubspot" {
				want = 2 // two batch items
			}
			if len(keys) != want || keys[""] && p != "slack" {
				t.Errorf("dedup keys %v, want %d distinct non-empty", keys, want)
			}
		})
	}
}

// TestEventIDAndOrdering: --event-id and --object/--version land where the
// provider puts them.
func TestEventIDAndOrdering(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		p, id, object, version string
		key, wantObject        string
	}{
		{"stripe", "evt_fixed", "pi_9", "1700000000", "evt_fixed", "pi_9"},
		{"shopify", "ev-1", "42", "2026-01-02T03:04:05Z", "ev-1", "orders/42"},
		{"hubspot", "77", "123", "1700000000000", "", "contact/123/lifecyclestage"},
		{"paddle", "evt_01x", "txn_01y", "2026-01-02T03:04:05.000001Z", "evt_01x", "txn_01y"},
		{"twilio", "tok-1", "SM00", "sent", "tok-1", "SM00"},
		{"square", "sq-1", "PAY1", "5", "sq-1", "payment/PAY1"},
		{"github", "d-1", "", "", ":d-1", ""},
		{"gitlab", "ik-1", "", "", "ik-1", ""},
		{"slack", "Ev1", "", "", "Ev1", ""},
		{"standard", "msg_1", "", "", "msg_1", ""},
	} {
		rc := newReceiver(t, provider.Settings{Provider: tc.p, Secrets: []string{secretFor(tc.p)}})
		args := []string{"--provider", tc.p, "--secret", secretFor(tc.p), "--url", rc.url(), "--event-id", tc.id}
		if tc.object != "" {
			args = append(args, "--object", tc.object, "--version", tc.version)
		}
		if code, out, stderr := run(t, args...); code != 0 {
			t.Fatalf("%s: exit %d %s %s", tc.p, code, stderr, out)
		}
		e := rc.events[0]
		if tc.key != "" && !strings.HasSuffix(e.DedupKey, tc.key) {
			t.Errorf("%s: key %q, want %q", tc.p, e.DedupKey, tc.key)
		}
		if tc.p == "hubspot" && !strings.Contains(e.DedupKey, ":77:123:1700000000000:") {
			t.Errorf("hubspot key %q", e.DedupKey)
		}
		wantVersion := tc.version
		if tc.p == "twilio" {
			wantVersion = "4" // rank of "sent"
		}
		if e.Object != tc.wantObject || (tc.object != "" && e.Version != wantVersion) {
			t.Errorf("%s: ordering %q@%q, want %q@%q", tc.p, e.Object, e.Version, tc.wantObject, wantVersion)
		}
	}
}

func TestBodyFileAndHeaders(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, provider.Settings{Provider: "github", Secrets: []string{"s"}})
	file := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(file, []byte(`{"zen":"Keep it logically awesome."}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ := run(t, "--provider", "github", "--secret", "s", "--url", rc.url(), "--body", file,
		"--header", "X-GitHub-Event=ping", "--header", "X-Extra: a=b")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, out)
	}
	if rc.header.Get("X-GitHub-Event") != "ping" || rc.header.Get("X-Extra") != "a=b" {
		t.Errorf("headers %v", rc.header)
	}
	// Twilio with a JSON body: bodySHA256 goes into the URL.
	tw := newReceiver(t, provider.Settings{Provider: "twilio", Secrets: []string{"tok"}})
	code, out, _ = run(t, "--provider", "twilio", "--secret", "tok", "--url", tw.url(), "--body", file, "--header", "Content-Type=application/json")
	if code != 0 || tw.requests != 1 {
		t.Fatalf("twilio JSON: exit %d: %s", code, out)
	}
}

func TestGenericUnsigned(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, provider.Settings{Provider: "generic", Signature: &provider.Signature{None: true}})
	code, out, _ := run(t, "--provider", "generic", "--url", rc.url(), "--times", "2")
	if code != 0 || rc.requests != 2 || !strings.Contains(out, "2 × 200 accepted") {
		t.Fatalf("exit %d, %d requests: %s", code, rc.requests, out)
	}
}

// TestRejected: a wrong secret gets 400s, reported, exit 1.
func TestRejected(t *testing.T) {
	t.Parallel()
	rc := newReceiver(t, provider.Settings{Provider: "stripe", Secrets: []string{"whsec_right"}})
	code, out, _ := run(t, "--provider", "stripe", "--secret", "whsec_wrong", "--url", rc.url(), "--times", "3", "--concurrency", "3")
	if code != 1 || !strings.Contains(out, "3 × 400 error: no signature matched\n") || !strings.Contains(out, "(400: 3); not accepted: 3, of them with no answer: 0") {
		t.Errorf("exit %d:\n%s", code, out)
	}
	// Nothing listening: transport errors, exit 1.
	srv := httptest.NewServer(http.NotFoundHandler())
	srv.Close()
	code, out, _ = run(t, "--provider", "stripe", "--secret", "s", "--url", srv.URL, "--times", "2")
	if code != 1 || !strings.Contains(out, "2 × error: ") || !strings.Contains(out, "not accepted: 2, of them with no answer: 2") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

func TestBadFlags(t *testing.T) {
	t.Parallel()
	u := "http://127.0.0.1:1/webhooks/x"
	for _, args := range [][]string{
		{},
		{"--provider", "nope", "--secret", "s", "--url", u},
		{"--provider", "stripe", "--url", u},
		{"--provider", "stripe", "--secret", "s"},
		{"--provider", "stripe", "--secret", "s", "--url", "ftp://x"},
		{"--provider", "stripe", "--secret", "s", "--url", u, "--times", "0"},
		{"--provider", "stripe", "--secret", "s", "--url", u, "--concurrency", "-1"},
		{"--provider", "stripe", "--secret", "s", "--url", u, "--version", "yesterday"},
		{"--provider", "github", "--secret", "s", "--url", u, "--object", "x"},
		{"--provider", "hubspot", "--secret", "s", "--url", u, "--event-id", "abc"},
		{"--provider", "standard", "--secret", "not base64!", "--url", u},
		{"--provider", "stripe", "--secret", "s", "--url", u, "--header", "novalue"},
		{"--provider", "stripe", "--secret", "s", "--url", u, "--body", "/does/not/exist"},
		{"--provider", "stripe", "--secret", "s", "--url", u, "--signature-header", "X"},
		{"--provider", "generic", "--secret", "s", "--url", u},
		{"--provider", "generic", "--url", u, "--signature-header", "X", "--secret", "s", "--algorithm", "md5"},
		{"--provider", "stripe", "--secret", "s", "--url", u, "extra"},
		{"--bogus"},
	} {
		code, out, stderr := run(t, args...)
		if code != 2 || out != "" || strings.Count(stderr, "\n") != 1 || !strings.HasPrefix(stderr, "anyhook send: ") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", args, code, out, stderr)
		}
	}
	if code, out, _ := run(t, "--help"); code != 0 || !strings.Contains(out, "usage: anyhook send") {
		t.Errorf("--help: exit %d %q", code, out)
	}
}

// TestEventTypes: each provider reads its event type from its own
// realistic sample, where the provider puts it.
func TestEventTypes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prOpened := filepath.Join(dir, "pr.json")
	if err := os.WriteFile(prOpened, []byte(`{"action":"opened","number":7,"pull_request":{"id":1}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	slackForm := filepath.Join(dir, "slack.txt")
	if err := os.WriteFile(slackForm, []byte(`payload=%7B%22type%22%3A%22block_actions%22%2C%22trigger_id%22%3A%22t1%22%7D`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, p string
		src     provider.Settings
		args    []string
		want    string
	}{
		{"stripe", "stripe", provider.Settings{}, nil, "payment_intent.succeeded"},
		{"github push", "github", provider.Settings{}, nil, "push"},
		{"github action", "github", provider.Settings{}, []string{"--body", prOpened, "--header", "X-GitHub-Event: pull_request"}, "pull_request.opened"},
		{"shopify", "shopify", provider.Settings{}, nil, "orders/create"},
		{"slack event_callback", "slack", provider.Settings{}, nil, "app_mention"},
		{"slack interactive", "slack", provider.Settings{}, []string{"--body", slackForm, "--header", "Content-Type: application/x-www-form-urlencoded"}, "block_actions"},
		{"hubspot", "hubspot", provider.Settings{}, nil, "contact.propertyChange"},
		{"paddle", "paddle", provider.Settings{}, nil, "transaction.completed"},
		{"gitlab", "gitlab", provider.Settings{}, nil, "Push Hook"},
		{"square", "square", provider.Settings{}, nil, "payment.updated"},
		{"standard", "standard", provider.Settings{}, nil, "invoice.paid"},
		{"twilio", "twilio", provider.Settings{}, nil, ""},
		{"generic without type", "generic", provider.Settings{Signature: &provider.Signature{None: true}}, nil, ""},
		{"generic type", "generic", provider.Settings{Signature: &provider.Signature{None: true}, Type: "json:type"}, nil, "order.updated"},
		{"generic type header", "generic", provider.Settings{Signature: &provider.Signature{None: true}, Type: "header:X-Event"}, []string{"--header", "X-Event: order.paid"}, "order.paid"},
		{"stripe type override", "stripe", provider.Settings{Type: "json:object"}, nil, "event"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := tc.src
			src.Provider = tc.p
			args := []string{"--provider", tc.p}
			if tc.p != "generic" {
				src.Secrets = []string{secretFor(tc.p)}
				args = append(args, "--secret", secretFor(tc.p))
			}
			rc := newReceiver(t, src)
			args = append(append(args, "--url", rc.url()), tc.args...)
			if code, out, stderr := run(t, args...); code != 0 {
				t.Fatalf("exit %d %s %s", code, stderr, out)
			}
			if len(rc.events) == 0 {
				t.Fatal("no events")
			}
			for _, e := range rc.events {
				if e.Type != tc.want {
					t.Errorf("type %q, want %q", e.Type, tc.want)
				}
			}
		})
	}
}
