package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/backfill/backfilltest"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// invoices is a fake Stripe API answering key, holding n invoice.paid
// events (in_0, in_1, …) received a minute apart, the latest a minute ago.
func invoices(t *testing.T, key string, n int) *backfilltest.Stripe {
	fake := backfilltest.NewStripe(t, key)
	for i := range n {
		fake.Add("invoice.paid", fmt.Sprintf("in_%d", i), time.Now().Add(-time.Duration(i+1)*time.Minute))
	}
	return fake
}

// TestBackfillAPI drives backfills through the admin API and the
// dashboard of an in-process gateway: refusals say why (unknown source,
// no api_key naming its key, a bad window); a 429 is waited out through
// the injected sleeper, never for real; a second backfill of a source
// while one runs is refused with 409; the dashboard's button starts one
// and its Sources page tells its outcome.
func TestBackfillAPI(t *testing.T) {
	t.Parallel()
	const key = "sk_test_gateway_backfill_01234"
	fake := invoices(t, key, 3)
	var mu sync.Mutex
	var waits []time.Duration
	release := make(chan struct{})
	sleep := func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	base, _ := gatewaytest.Start(t, fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:anyhook.db
sources:
  stripe: {provider: stripe, secrets: [whsec_x], api_key: %s, api_base: %s}
  nokey: {provider: stripe, secrets: [whsec_x]}
  shop: {provider: shopify, secrets: [shpss_x]}
`, key, fake.URL), gateway.Options{BackfillSleep: sleep})

	post := func(path, body string) (int, string) {
		t.Helper()
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		path, body string
		code       int
		says       string
	}{
		{"/api/sources/nosuch/backfill", `{"since": "1h"}`, 404, "unknown source"},
		{"/api/sources/nokey/backfill", `{"since": "1h"}`, 400, "sources.nokey"},
		{"/api/sources/shop/backfill", `{"since": "1h"}`, 400, "provider shopify has no backfill"},
		{"/api/sources/stripe/backfill", `{"since": "1h", "from": "2026-01-01T00:00:00Z"}`, 400, "not both"},
		{"/api/sources/stripe/backfill", `{}`, 400, "give since"},
		{"/api/sources/stripe/backfill", `{"since": "-1h"}`, 400, "positive duration"},
	} {
		if code, b := post(c.path, c.body); code != c.code || !strings.Contains(b, c.says) {
			t.Errorf("POST %s %s: %d %s; want %d saying %q", c.path, c.body, code, b, c.code, c.says)
		}
	}

	// A page on another site cannot start one, through the API or the
	// dashboard's button.
	for _, path := range []string{"/api/sources/stripe/backfill", "/sources/stripe/backfill"} {
		req, _ := http.NewRequest("POST", base+path, strings.NewReader(`{"since": "1h"}`))
		req.Header.Set("Sec-Fetch-Site", "cross-site")
		req.Header.Set("Origin", "https://evil.example")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Fatalf("cross-origin POST %s: %d, want 403", path, resp.StatusCode)
		}
	}
	if q := fake.Queries(); len(q) != 0 {
		t.Fatalf("a refused backfill reached the provider: %v", q)
	}

	// A 429 on the first page holds the backfill in the sleeper: it runs,
	// and a second one is refused.
	fake.RateLimit(1)
	if code, b := post("/api/sources/stripe/backfill", `{"since": "1h"}`); code != 202 || !strings.Contains(b, `"state":"running"`) {
		t.Fatalf("start: %d %s", code, b)
	}
	if code, b := post("/api/sources/stripe/backfill", `{"since": "1h"}`); code != 409 {
		t.Fatalf("a second backfill while one runs: %d %s, want 409", code, b)
	}
	close(release)
	var job struct {
		State    string
		Progress struct {
			Found, New  int
			RateLimited int `json:"rate_limited"`
		}
	}
	testwait.For(t, "the backfill to finish", func() bool {
		resp, err := http.Get(base + "/api/sources/stripe/backfill")
		if err != nil {
			t.Fatal(err)
		}
		json.NewDecoder(resp.Body).Decode(&job)
		resp.Body.Close()
		return job.State != "running"
	})
	if job.State != "done" {
		t.Fatalf("backfill: %+v", job)
	}
	mu.Lock()
	if job.Progress.Found != 3 || job.Progress.New != 3 || job.Progress.RateLimited != 1 || len(waits) != 1 {
		t.Fatalf("job %+v, waits %v", job, waits)
	}
	mu.Unlock()

	// The dashboard's button, then its page.
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.PostForm(base+"/sources/stripe/backfill", url.Values{"since": {"1h"}, "dry_run": {"on"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("dashboard POST: %d", resp.StatusCode)
	}
	var page string
	testwait.For(t, "the dashboard's backfill to finish", func() bool {
		r, err := http.Get(base + "/sources")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		page = string(b)
		return strings.Contains(page, `data-state="done"`)
	})
	if !strings.Contains(page, `<span class="badge">dry run</span>`) || !strings.Contains(page, "(would be)") || !strings.Contains(page, `data-backfill="stripe"`) || strings.Contains(page, key) {
		t.Fatalf("the Sources page does not tell the dry run, or shows the key:\n%s", page)
	}
	// A backfilled event's page does not claim a request was received.
	var evs struct{ Items []struct{ ID string } }
	r, err := http.Get(base + "/api/events?source=stripe&limit=1")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(r.Body).Decode(&evs)
	r.Body.Close()
	if len(evs.Items) != 1 {
		t.Fatalf("events: %+v", evs)
	}
	r, err = http.Get(base + "/events/" + evs.Items[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if !strings.Contains(string(b), `id="request-line" class="muted">None received`) {
		t.Fatalf("the page of a backfilled event does not say no request was received:\n%s", b)
	}
	if code, b := post("/api/sources/nokey/backfill", `{"since": "1h"}`); code != 400 || strings.Contains(b, key) {
		t.Fatalf("no key: %d %s", code, b)
	}
	// The Sources page offers no button that cannot work: the source
	// without an api_key says why instead.
	_, row, ok := strings.Cut(page, `data-source="nokey"`)
	row, _, _ = strings.Cut(row, "</tr>")
	if !ok || strings.Contains(row, "data-backfill") || !strings.Contains(row, "No backfill:") || !strings.Contains(row, "no api_key") {
		t.Fatalf("the Sources page's row of a source without an api_key:\n%s", row)
	}
}

// TestBackfillSharedByProcesses: two gateways on one PostgreSQL database,
// as a scaled-out deployment runs. A backfill started through one is
// running, and refused (409), through the other; when it ends, the other
// tells its outcome. Before, each process knew only its own backfills: the
// second answered 404 and started a second one.
func TestBackfillSharedByProcesses(t *testing.T) {
	t.Parallel()
	const key = "sk_test_gateway_backfill_shared"
	fake := invoices(t, key, 2)
	release := make(chan struct{})
	sleep := func(ctx context.Context, d time.Duration) error {
		select {
		case <-release:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
database: %q
log: {key_file: %q} # one log, one key
sources:
  stripe: {provider: stripe, secrets: [whsec_x], api_key: %s, api_base: %s}
`, pgtest.DSN(t), filepath.Join(t.TempDir(), "anyhook-log.key"), key, fake.URL)
	a, _ := gatewaytest.Start(t, yaml, gateway.Options{BackfillSleep: sleep})
	b, _ := gatewaytest.Start(t, yaml, gateway.Options{BackfillSleep: sleep})
	type job struct {
		State    string
		By       string
		Error    string
		Progress struct{ Found, New int }
	}
	call := func(method, base string) (int, job) {
		t.Helper()
		code, body := gatewaytest.Admin(t, method, base+"/api/sources/stripe/backfill", map[string]string{"POST": `{"since": "1h"}`}[method])
		var j job
		if code == 409 {
			j.Error = string(body)
		}
		if code < 300 {
			if err := json.Unmarshal(body, &j); err != nil {
				t.Fatalf("%s %s: %d %s: %v", method, base, code, body, err)
			}
		}
		return code, j
	}
	if code, _ := call("GET", b); code != 404 {
		t.Fatalf("GET before any backfill: %d, want 404", code)
	}
	fake.RateLimit(1) // a 429 on the first page holds a's backfill in the sleeper
	if code, j := call("POST", a); code != 202 || j.State != "running" {
		t.Fatalf("start through a: %d %+v", code, j)
	}
	if code, j := call("GET", b); code != 200 || j.State != "running" {
		t.Fatalf("GET through b while a's runs: %d %+v, want 200 running", code, j)
	}
	if code, j := call("POST", b); code != 409 || !strings.Contains(j.Error, "is running") {
		t.Fatalf("start through b while a's runs: %d %+v, want 409", code, j)
	}
	close(release)
	var got job
	testwait.For(t, "b to tell a's backfill finished", func() bool {
		_, got = call("GET", b)
		return got.State != "running"
	})
	if got.State != "done" || got.Progress.Found != 2 || got.Progress.New != 2 {
		t.Fatalf("b tells %+v, want done with 2 found, 2 new", got)
	}
	if code, j := call("GET", a); code != 200 || j.State != "done" || j.Progress.New != 2 {
		t.Fatalf("GET through a: %d %+v", code, j)
	}
	if q := fake.Queries(); len(q) != 2 { // the 429 and the page
		t.Fatalf("the provider was asked %d times (%v), want 2: one backfill", len(q), q)
	}
}

// TestBackfillWhileTheDatabaseIsDown: with the database cut, whether a
// backfill runs cannot be told: GET answers 503 (not 404, "none was ever
// started"), a start answers 503 (not 400, with the database's words),
// and the dashboard's Sources page says it cannot tell. When the database
// is back, the backfill started before the cut is told again.
func TestBackfillWhileTheDatabaseIsDown(t *testing.T) {
	t.Parallel()
	const key = "sk_test_gateway_backfill_outage"
	fake := invoices(t, key, 1)
	u, err := url.Parse(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	px := pgtest.Proxy(t, u.Host)
	u.Host = px.Addr()
	base, _ := gatewaytest.Start(t, fmt.Sprintf(`listen: 127.0.0.1:0
database: %q
sources:
  stripe: {provider: stripe, secrets: [whsec_x], api_key: %s, api_base: %s}
`, u.String(), key, fake.URL), gateway.Options{})
	api := base + "/api/sources/stripe/backfill"
	if code, body := gatewaytest.Admin(t, "POST", api, `{"since": "1h", "wait": true}`); code != 200 || !strings.Contains(string(body), `"state":"done"`) {
		t.Fatalf("a backfill before the cut: %d %s", code, body)
	}

	px.Cut()
	code, body := gatewaytest.Admin(t, "GET", api, "")
	if code != 503 || strings.Contains(string(body), "dial") || strings.Contains(string(body), u.Host) {
		t.Errorf("GET with the database cut: %d %s; want 503, without the database's words", code, body)
	}
	code, body = gatewaytest.Admin(t, "POST", api, `{"since": "1h"}`)
	if code != 503 || strings.Contains(string(body), "dial") || strings.Contains(string(body), u.Host) {
		t.Errorf("POST with the database cut: %d %s; want 503, without the database's words", code, body)
	}
	code, body = gatewaytest.Admin(t, "GET", base+"/sources", "")
	if code != 200 || !strings.Contains(string(body), "cannot tell") || strings.Contains(string(body), "none started") {
		t.Errorf("the Sources page with the database cut: %d, want it to say it cannot tell:\n%s", code, body)
	}

	px.Restore()
	testwait.For(t, "the backfill told again", func() bool {
		code, body := gatewaytest.Admin(t, "GET", api, "")
		return code == 200 && strings.Contains(string(body), `"state":"done"`)
	})
}
