package gateway_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/syncio"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// TestLogsKeepSecrets runs a gateway logging JSON at debug level through
// accepted, duplicate, rejected (bad signature, stale, too large), failed
// and dead deliveries, bad admin tokens and a failed login, then greps the
// log for every secret and body it saw: none may appear. It also checks
// the line of each outcome of an attempt (checkAttemptLines).
func TestLogsKeepSecrets(t *testing.T) {
	t.Parallel()
	const (
		stripeOld    = "whsec_LOGTEST_stripe_old_9f8e7d"
		stripeNew    = "whsec_LOGTEST_stripe_new_1a2b3c"
		githubSecret = "LOGTEST_github_secret_4d5e6f"
		adminToken   = "LOGTEST_admin_token_7a8b9c"
		wrongToken   = "LOGTEST_wrong_token_0d0e0f"
		bodyMarker   = "LOGTEST_BODY_CONTENT_c0ffee"
		respMarker   = "LOGTEST_RESPONSE_BODY_beef"
	)
	signingKey := []byte("LOGTEST-signing-key-bytes-123456")
	signingSecret := "whsec_" + base64.StdEncoding.EncodeToString(signingKey)

	var failing atomic.Bool
	failing.Store(true)
	dest := sinktest.Start(t, sinktest.Options{
		Answer: func(*http.Request, []byte) int {
			if failing.Load() {
				return http.StatusInternalServerError
			}
			return http.StatusOK
		},
		Reply: func(code int) string {
			if code == http.StatusOK {
				return "ok"
			}
			return respMarker
		},
	})

	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:anyhook.db
admin_token: %s
delivery: {poll_interval: 20ms, grace: 1s}
sources:
  stripe: {provider: stripe, secrets: [%s, %s], max_body: 4KiB}
  github: {provider: github, secrets: [%s]}
destinations:
  billing:
    url: %s/hooks
    sources: [stripe, github]
    signing_secret: %s
    max_attempts: 2
    backoff: {initial: 10ms, max: 20ms}
`, adminToken, stripeOld, stripeNew, githubSecret, dest.URL, signingSecret)
	var logs syncio.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	base, g := gatewaytest.Start(t, yaml, gateway.Options{Logger: log})

	var forbidden []string // what the log must never contain
	forbid := func(s ...string) { forbidden = append(forbidden, s...) }
	forbid(stripeOld, stripeNew, githubSecret, adminToken, wrongToken, bodyMarker, respMarker,
		signingSecret, base64.StdEncoding.EncodeToString(signingKey))

	send := func(path string, body []byte, h http.Header) int {
		t.Helper()
		req, _ := http.NewRequest("POST", base+path, bytes.NewReader(body))
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	sign := func(p, secret string, body []byte, now time.Time) http.Header {
		pr := &provider.Request{Method: "POST", Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
		if p == "github" {
			pr.Header.Set("X-GitHub-Hook-ID", "1")
			pr.Header.Set("X-GitHub-Delivery", "d-"+string(body[len(body)-5:len(body)-2]))
			pr.Header.Set("X-GitHub-Event", "push")
		}
		if err := provider.Sign(p, secret, pr, now); err != nil {
			t.Fatal(err)
		}
		return pr.Header
	}
	stripeBody := func(id string) []byte {
		return []byte(`{"id":"` + id + `","object":"event","created":1700000000,"data":{"object":{"id":"pi_1","note":"` + bodyMarker + `"}}}`)
	}
	now := time.Now()

	// Accepted (old and new secret), duplicate.
	b1 := stripeBody("evt_log_1")
	if c := send("/webhooks/stripe", b1, sign("stripe", stripeOld, b1, now)); c != 200 {
		t.Fatalf("accepted: %d", c)
	}
	if c := send("/webhooks/stripe", b1, sign("stripe", stripeNew, b1, now)); c != 200 {
		t.Fatalf("duplicate: %d", c)
	}
	gb := []byte(`{"ref":"refs/heads/main","note":"` + bodyMarker + `","n":"abc"}`)
	if c := send("/webhooks/github", gb, sign("github", githubSecret, gb, now)); c != 200 {
		t.Fatalf("github accepted: %d", c)
	}

	// Rejected: a valid signature of another body. The signature the
	// gateway computes for the body it got must not be logged.
	b2 := stripeBody("evt_log_2")
	h := sign("stripe", stripeNew, b1, now)
	expected := sign("stripe", stripeNew, b2, now).Get("Stripe-Signature")
	_, v1, _ := strings.Cut(expected, "v1=")
	forbid(v1)
	if c := send("/webhooks/stripe", b2, h); c != 400 {
		t.Fatalf("forged: %d", c)
	}
	gb2 := []byte(`{"ref":"refs/heads/evil","note":"` + bodyMarker + `","n":"def"}`)
	gh := sign("github", githubSecret, gb, now)
	gh.Set("X-GitHub-Delivery", "d-def")
	forbid(strings.TrimPrefix(sign("github", githubSecret, gb2, now).Get("X-Hub-Signature-256"), "sha256="))
	if c := send("/webhooks/github", gb2, gh); c != 400 {
		t.Fatalf("forged github: %d", c)
	}
	// Rejected: stale timestamp, too large, unknown source, no signature.
	b3 := stripeBody("evt_log_3")
	if c := send("/webhooks/stripe", b3, sign("stripe", stripeNew, b3, now.Add(-time.Hour))); c != 400 {
		t.Fatalf("stale: %d", c)
	}
	big := []byte(strings.Repeat(bodyMarker, 400))
	if c := send("/webhooks/stripe", big, sign("stripe", stripeNew, big, now)); c != 413 {
		t.Fatalf("too large: %d", c)
	}
	if c := send("/webhooks/nope", b3, sign("stripe", stripeNew, b3, now)); c != 404 {
		t.Fatalf("unknown source: %d", c)
	}
	if c := send("/webhooks/stripe", b3, http.Header{}); c != 400 {
		t.Fatalf("unsigned: %d", c)
	}

	// Admin: a wrong token, a failed login, a right one.
	req, _ := http.NewRequest("GET", base+"/api/events", nil)
	req.Header.Set("Authorization", "Bearer "+wrongToken)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("wrong token: %v %v", resp, err)
	}
	resp, err := http.PostForm(base+"/login", url.Values{"token": {wrongToken}})
	if err != nil || resp.StatusCode != 401 {
		t.Fatalf("failed login: %v %v", resp, err)
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("right token: %v %v", resp, err)
	}

	// Failed deliveries: both events go dead after two 500s.
	testwait.For(t, "both deliveries dead", func() bool {
		ds, _, err := g.Store().ListDeliveries(t.Context(), store.DeliveryFilter{Status: anyhook.StatusDead})
		return err == nil && len(ds) == 2
	})
	// Then a success, through a resend.
	failing.Store(false)
	ds, _, _ := g.Store().ListDeliveries(t.Context(), store.DeliveryFilter{Status: anyhook.StatusDead})
	if _, err := g.Store().Resolve(t.Context(), ds[0].ID, "resend", store.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, "the resent delivery delivered", func() bool {
		ds, _, err := g.Store().ListDeliveries(t.Context(), store.DeliveryFilter{Status: anyhook.StatusDelivered})
		return err == nil && len(ds) == 1
	})
	g.Stop(context.Background())

	for _, r := range dest.Requests() {
		if s := r.Header.Get("Webhook-Signature"); s != "" {
			_, sig, _ := strings.Cut(s, ",")
			forbid(sig) // what the gateway signed outbound
		}
	}
	out := logs.String()
	if !strings.Contains(out, `"level":"DEBUG"`) || !strings.Contains(out, "ingest rejected") || !strings.Contains(out, "delivery dead") {
		t.Fatalf("the log does not cover the flows (want debug lines, rejections, dead deliveries):\n%s", out)
	}
	checkAttemptLines(t, out)
	for _, s := range forbidden {
		if s != "" && strings.Contains(out, s) {
			i := strings.Index(out, s)
			t.Errorf("the log contains %q: …%s…", s, out[max(0, i-200):min(len(out), i+len(s)+50)])
		}
	}
	t.Logf("%d log lines checked for %d secrets", strings.Count(out, "\n"), len(forbidden))
}

// checkAttemptLines checks that the log holds a line of each outcome of
// an attempt the flows above made, at its level, with the attempt's
// attributes and the outcome's own.
func checkAttemptLines(t *testing.T, out string) {
	t.Helper()
	want := []struct {
		msg, level string
		code       float64
		extra      []string
	}{
		{"attempt failed; retrying", "INFO", 500, []string{"err", "retry_in"}},
		{"delivery dead", "WARN", 500, []string{"err"}},
		{"delivered", "DEBUG", 200, []string{"duration_ms"}},
	}
	lines := map[string]map[string]any{} // the first line of each message
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("a log line is not JSON: %v: %s", err, l)
		}
		if msg, _ := m["msg"].(string); lines[msg] == nil {
			lines[msg] = m
		}
	}
	for _, w := range want {
		m := lines[w.msg]
		if m == nil {
			t.Errorf("no %q line in the log", w.msg)
			continue
		}
		if m["level"] != w.level || m["destination"] != "billing" || m["status_code"] != w.code {
			t.Errorf("%q: level %v, destination %v, status_code %v; want %s, billing, %v", w.msg, m["level"], m["destination"], m["status_code"], w.level, w.code)
		}
		for _, k := range append([]string{"delivery_id", "event_id", "provider_event_id", "attempt"}, w.extra...) {
			if v, ok := m[k]; !ok || v == "" {
				t.Errorf("%q has no %s: %v", w.msg, k, m)
			}
		}
	}
}
