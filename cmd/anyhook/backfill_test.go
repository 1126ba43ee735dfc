package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/backfill/backfilltest"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// backfillSink is a destination (sinktest.Sink) whose deliveries the tests
// read per provider event id.
type backfillSink struct{ *sinktest.Sink }

func newBackfillSink(t *testing.T) *backfillSink { return &backfillSink{sinktest.New(t)} }

// eventHeaders are the headers of the deliveries of provider event id
// among rs.
func eventHeaders(rs []sinktest.Request, id string) []http.Header {
	var out []http.Header
	for _, r := range rs {
		if r.Header.Get("X-AnyHook-Event-Id") == id {
			out = append(out, r.Header)
		}
	}
	return out
}

// deliveries are the headers of each delivery of provider event id.
func (s *backfillSink) deliveries(id string) []http.Header { return eventHeaders(s.Requests(), id) }

// waitDelivered waits until every id was delivered at least once.
func (s *backfillSink) waitDelivered(t *testing.T, ids ...string) {
	t.Helper()
	s.Await(t, fmt.Sprintf("deliveries of %d events", len(ids)), func(rs []sinktest.Request) bool {
		for _, id := range ids {
			if len(eventHeaders(rs, id)) == 0 {
				return false
			}
		}
		return true
	})
}

// backfillRun runs anyhook backfill --json and decodes its report.
func backfillRun(t *testing.T, cfg string, args ...string) backfillReport {
	t.Helper()
	code, out, errOut := exe(t, append([]string{"backfill", "--config", cfg, "--json"}, args...)...)
	var rep backfillReport
	if code != 0 || json.Unmarshal([]byte(out), &rep) != nil {
		t.Fatalf("backfill %s: exit %d, stdout %q, stderr %q", strings.Join(args, " "), code, out, errOut)
	}
	return rep
}

// TestBackfillStripe: while the gateway is stopped, Stripe records events
// it cannot deliver; anyhook backfill finds them through Stripe's API (a
// fake that stripe-go reads as Stripe, internal/backfill), records the
// missing ones and counts the others as already had; the restarted
// gateway delivers each missed event once, marked as a backfill and not a
// replay; a second backfill adds nothing; a 429 mid-way is waited out; a
// bad key exits 1 and records nothing; the admin API runs one too; the
// log verifies with backfilled (v2) leaves.
func TestBackfillStripe(t *testing.T) {
	t.Parallel()
	const key = "sk_test_backfill_key_0123456789"
	fake := backfilltest.NewStripe(t, key)
	sink := newBackfillSink(t)
	cfg := writeConfig(t, t.TempDir(), fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:anyhook.db
admin_token: test-token
delivery: {poll_interval: 100ms, grace: 1s, shutdown: 1s}
log: {checkpoint_interval: 1s}
sources:
  stripe: {provider: stripe, secrets: [%[1]s], api_key: %[2]s, api_base: %[3]s}
  stripe_badkey: {provider: stripe, secrets: [%[1]s], api_key: sk_test_not_the_key_987654, api_base: %[3]s}
  stripe_nokey: {provider: stripe, secrets: [%[1]s]}
destinations:
  billing: {url: %[4]s, sources: [stripe, stripe_badkey], backoff: {initial: 50ms, max: 200ms}}
`, secret, key, fake.URL, sink.URL))

	// Before the outage: two events arrive as webhooks and are delivered.
	start0 := time.Now().Add(-3 * time.Hour)
	p := start(t, cfg)
	var received []string
	for i := range 2 {
		id, body := fake.Add("invoice.paid", fmt.Sprintf("in_%d", i), start0.Add(time.Duration(i)*time.Minute))
		pr := &provider.Request{Method: "POST", Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
		if err := provider.Sign("stripe", secret, pr, time.Now()); err != nil {
			t.Fatal(err)
		}
		if code, _, err := postEvent(http.DefaultClient, p.url, body, pr.Header); err != nil || code != 200 {
			t.Fatalf("webhook %s: %d %v", id, code, err)
		}
		received = append(received, id)
	}
	sink.waitDelivered(t, received...)
	p.kill()

	// The outage: Stripe holds 250 more events (three pages of 100).
	var missed []string
	for i := range 250 {
		id, _ := fake.Add("customer.updated", fmt.Sprintf("cus_%d", i%10), start0.Add(time.Hour+time.Duration(i)*time.Second))
		missed = append(missed, id)
	}

	// A dry run counts and records nothing.
	rep := backfillRun(t, cfg, "--source", "stripe", "--since", "6h", "--dry-run")
	if !rep.DryRun || rep.Found != 252 || rep.AlreadyHad != 2 || rep.New != 250 || rep.Pages != 3 {
		t.Fatalf("dry run: %+v", rep)
	}
	// The backfill, with a 429 on its second page.
	fake.RateLimit(2)
	rep = backfillRun(t, cfg, "--source", "stripe", "--since", "6h")
	if rep.Found != 252 || rep.AlreadyHad != 2 || rep.New != 250 || rep.RateLimited != 1 {
		t.Fatalf("backfill: %+v, want 252 found, 2 already had, 250 new, one 429 waited out", rep)
	}
	for _, q := range fake.Queries() {
		if !strings.Contains(q, "limit=100") {
			t.Fatalf("a request without limit=100: %q", q)
		}
	}
	// Again: nothing new.
	if rep = backfillRun(t, cfg, "--source", "stripe", "--from", start0.Add(-time.Minute).UTC().Format(time.RFC3339)); rep.New != 0 || rep.AlreadyHad != 252 {
		t.Fatalf("second backfill: %+v, want all 252 already had", rep)
	}

	// A bad key: a clear error, exit 1, nothing recorded, and it says so
	// (a rerun alone would fail alike).
	code, out, errOut := exe(t, "backfill", "--config", cfg, "--source", "stripe_badkey", "--since", "6h")
	if code != 1 || !strings.Contains(errOut, "401") || !strings.Contains(errOut, "api_key") || strings.Contains(errOut, "not_the_key") || out != "" ||
		!strings.Contains(errOut, "nothing was recorded; fix the cause") {
		t.Fatalf("bad key: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// A mistyped source: exit 2, listing the sources there are.
	if code, _, errOut := exe(t, "backfill", "--config", cfg, "--source", "strpe", "--since", "6h"); code != 2 || !strings.Contains(errOut, `no source "strpe"`) || !strings.Contains(errOut, "stripe, stripe_badkey") {
		t.Fatalf("unknown source: exit %d, stderr %q", code, errOut)
	}
	// No key: exit 2 naming the source's key.
	if code, _, errOut := exe(t, "backfill", "--config", cfg, "--source", "stripe_nokey", "--since", "6h"); code != 2 || !strings.Contains(errOut, "sources.stripe_nokey") || !strings.Contains(errOut, "api_key") {
		t.Fatalf("no key: exit %d, stderr %q", code, errOut)
	}

	// The gateway comes back and delivers each missed event once, as a
	// backfill; the events it had are not sent again.
	p = start(t, cfg)
	sink.waitDelivered(t, missed...)
	var evs struct {
		Items []struct{ ID, Origin string }
	}
	gatewaytest.AdminJSON(t, p.url+"/api/events?source=stripe_badkey", &evs)
	if len(evs.Items) != 0 {
		t.Fatalf("the failed backfill recorded %d events", len(evs.Items))
	}
	gatewaytest.AdminJSON(t, p.url+"/api/events?source=stripe&limit=500", &evs)
	origins := map[string]int{}
	for _, e := range evs.Items {
		origins[e.Origin]++
	}
	if origins["webhook"] != 2 || origins["backfill"] != 250 {
		t.Fatalf("origins %v, want 2 webhook and 250 backfill", origins)
	}
	var one struct {
		Origin       string
		Verification struct{ Method, Scheme string }
	}
	gatewaytest.AdminJSON(t, p.url+"/api/events/"+evs.Items[0].ID, &one)
	if one.Origin != "backfill" || one.Verification.Method != "fetched" || one.Verification.Scheme != "fetched from the provider API" {
		t.Fatalf("a backfilled event reads %+v", one)
	}

	// Through the admin API: one more event missed, found and delivered.
	late, _ := fake.Add("invoice.paid", "in_late", time.Now().Add(-time.Minute))
	var job struct {
		State    string
		Error    string
		Progress struct {
			Found      int
			AlreadyHad int `json:"already_had"`
			New        int
		}
	}
	req, _ := http.NewRequest("POST", p.url+"/api/sources/stripe/backfill", strings.NewReader(`{"since": "6h", "wait": true}`))
	req.Header.Set("Authorization", "Bearer test-token")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || json.Unmarshal(b, &job) != nil || job.State != "done" || job.Progress.New != 1 || job.Progress.AlreadyHad != 252 {
		t.Fatalf("POST /api/sources/stripe/backfill: %d %s", resp.StatusCode, b)
	}
	if bytes.Contains(b, []byte(key)) {
		t.Fatalf("the API's answer carries the api_key: %s", b)
	}
	sink.waitDelivered(t, late)

	for _, id := range append(append(received, missed...), late) {
		ds := sink.deliveries(id)
		if len(ds) != 1 {
			t.Fatalf("event %s delivered %d times, want once", id, len(ds))
		}
		backfilled := ds[0].Get("X-AnyHook-Backfill") == "true"
		if wantBackfill := id != received[0] && id != received[1]; backfilled != wantBackfill || ds[0].Get("X-AnyHook-Replay") != "false" {
			t.Fatalf("event %s: X-AnyHook-Backfill %q, X-AnyHook-Replay %q", id, ds[0].Get("X-AnyHook-Backfill"), ds[0].Get("X-AnyHook-Replay"))
		}
	}

	// The log, with webhook (v1) and backfill (v2) leaves, verifies.
	testwait.For(t, "every event in a checkpoint", func() bool { return checkpointSize(p.url) >= 253 })
	if code, out, errOut := exe(t, "log", "verify", "--config", cfg); code != 0 {
		t.Fatalf("log verify: exit %d: %s %s", code, out, errOut)
	}
	if strings.Contains(p.stderr.String(), key) {
		t.Fatal("the gateway logged the api_key")
	}
}

// TestBackfillGitHub: GitHub's failed deliveries (the gateway was down)
// are found through the hook's deliveries API and redelivered by GitHub
// (the fake, which go-github reads as GitHub, internal/backfill): they
// arrive through the normal signed path and are delivered once; a second
// backfill finds everything already had and asks for nothing.
func TestBackfillGitHub(t *testing.T) {
	t.Parallel()
	const token, hookSecret = "ghp_backfill_token_0123456789", "gh-hook-secret"
	fake := backfilltest.NewGitHub(t, token, "/repos/acme/shop", 4242)
	sink := newBackfillSink(t)
	cfg := writeConfig(t, t.TempDir(), fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:anyhook.db
admin_token: test-token
delivery: {poll_interval: 100ms, grace: 1s, shutdown: 1s}
sources:
  github:
    provider: github
    secrets: [%s]
    api_key: %s
    api_base: %s
    backfill: {repo: acme/shop, hook_id: 4242}
destinations:
  ci: {url: %s, sources: [github], backoff: {initial: 50ms, max: 200ms}}
`, hookSecret, token, fake.URL, sink.URL))
	p := start(t, cfg)
	fake.Target, fake.Secret = p.url+"/webhooks/github", hookSecret

	at := time.Now().Add(-2 * time.Hour)
	send := func(guid string, body []byte) {
		req, _ := http.NewRequest("POST", fake.Target, bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Delivery", guid)
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-GitHub-Hook-ID", "4242")
		req.Header.Set("X-Hub-Signature-256", backfilltest.Sign(hookSecret, body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("webhook %s: %v %v", guid, resp, err)
		}
		resp.Body.Close()
	}
	var failed []string
	for i := range 6 {
		guid := fmt.Sprintf("0000-guid-%d", i)
		body := fmt.Appendf(nil, `{"ref":"refs/heads/main","after":"%040d"}`, i)
		if i%3 == 0 { // arrived
			send(guid, body)
			fake.Deliver(guid, "push", body, at.Add(time.Duration(i)*time.Minute), 200)
			continue
		}
		fake.Deliver(guid, "push", body, at.Add(time.Duration(i)*time.Minute), 502) // the gateway was down
		failed = append(failed, "4242:"+guid)
	}
	rep := backfillRun(t, cfg, "--source", "github", "--since", "6h")
	if rep.Found != 6 || rep.AlreadyHad != 2 || rep.Redelivered != 4 || rep.New != 0 {
		t.Fatalf("backfill: %+v, want 6 found, 2 already had, 4 redelivered", rep)
	}
	sink.waitDelivered(t, failed...)
	if rep = backfillRun(t, cfg, "--source", "github", "--since", "6h"); rep.AlreadyHad != 6 || rep.Redelivered != 0 {
		t.Fatalf("second backfill: %+v, want all 6 already had", rep)
	}
	for _, id := range failed {
		if ds := sink.deliveries(id); len(ds) != 1 || ds[0].Get("X-AnyHook-Backfill") != "" {
			t.Fatalf("%s delivered %d times (a redelivery is a webhook: no X-AnyHook-Backfill)", id, len(ds))
		}
	}
	if n := len(fake.Redeliveries()); n != 4 {
		t.Fatalf("GitHub was asked for %d redeliveries, want 4", n)
	}
}

// TestBackfillPaddle: Paddle events the gateway never received are found through Paddle's List events API (a fake that Paddle's own Go
// SDK reads as Paddle, internal/backfill) and delivered once, marked as a
// backfill; the one received as a webhook counts as already had.
func TestBackfillPaddle(t *testing.T) {
	t.Parallel()
	const key, hookSecret = "pdl_live_apikey_backfill_0123", "pdl_ntfset_secret"
	fake := backfilltest.NewPaddle(t, key)
	sink := newBackfillSink(t)
	cfg := writeConfig(t, t.TempDir(), fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:anyhook.db
admin_token: test-token
delivery: {poll_interval: 100ms, grace: 1s, shutdown: 1s}
sources:
  paddle: {provider: paddle, secrets: [%s], api_key: %s, api_base: %s}
destinations:
  billing: {url: %s, sources: [paddle], backoff: {initial: 50ms, max: 200ms}}
`, hookSecret, key, fake.URL, sink.URL))
	at := time.Now().Add(-90 * time.Minute)
	got, body := fake.Add("transaction.completed", "txn_1", at)
	missed1, _ := fake.Add("transaction.completed", "txn_2", at.Add(time.Minute))
	missed2, _ := fake.Add("subscription.updated", "sub_1", at.Add(2*time.Minute))

	p := start(t, cfg)
	pr := &provider.Request{Method: "POST", Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
	if err := provider.Sign("paddle", hookSecret, pr, time.Now()); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", p.url+"/webhooks/paddle", bytes.NewReader(body))
	req.Header = pr.Header
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("webhook: %v %v", resp, err)
	}
	resp.Body.Close()
	sink.waitDelivered(t, got)

	rep := backfillRun(t, cfg, "--source", "paddle", "--since", "3h")
	if rep.Found != 3 || rep.AlreadyHad != 1 || rep.New != 2 {
		t.Fatalf("backfill: %+v, want 3 found, 1 already had, 2 new", rep)
	}
	sink.waitDelivered(t, missed1, missed2)
	for _, id := range []string{got, missed1, missed2} {
		ds := sink.deliveries(id)
		if len(ds) != 1 || (ds[0].Get("X-AnyHook-Backfill") == "true") != (id != got) {
			t.Fatalf("%s: %d deliveries, X-AnyHook-Backfill %q", id, len(ds), ds[0].Get("X-AnyHook-Backfill"))
		}
	}
}
