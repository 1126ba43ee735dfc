package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/admin"
	"github.com/anyhook/anyhook/internal/auth"
	"github.com/anyhook/anyhook/internal/dashboard"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/ledger"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

const token = "dash-test-token"

var sources = map[string][]string{
	"stripe": {"billing", "audit"},
	"github": {"ci"},
}

type fixture struct {
	t      *testing.T
	store  *sqlite.Store
	srv    *httptest.Server
	client *http.Client // with a cookie jar; does not follow redirects
}

func setup(t *testing.T) *fixture { return setupTLS(t, false) }

func setupTLS(t *testing.T, useTLS bool) *fixture { return setupWith(t, useTLS, nil) }

// setupWith is setupTLS with tokens instead of the admin token, when
// given.
func setupWith(t *testing.T, useTLS bool, tokens *auth.Tokens) *fixture {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	api := admin.New(admin.Options{Store: st, Token: token, Tokens: tokens, Sources: sources, InOrder: []string{"billing"}})
	d, err := dashboard.New(dashboard.Options{
		Store: st, API: api.Handler(), Token: token, Tokens: tokens, Sources: sources, InOrder: []string{"billing"},
		Health: func() map[string]delivery.Health {
			return map[string]delivery.Health{"ci": {Destination: "ci", Streak: 7, Failing: true, Since: time.Now().Add(-time.Minute), LastError: "HTTP 502"},
				// failing before the alert's threshold: one word for both, as
				// a replay's refusal says
				"audit": {Destination: "audit", Streak: 2, Since: time.Now().Add(-time.Minute), LastError: "HTTP 500"}}
		},
		Version: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	var srv *httptest.Server
	if useTLS {
		srv = httptest.NewTLSServer(d.Handler())
	} else {
		srv = httptest.NewServer(d.Handler())
	}
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	c := srv.Client()
	c.Jar = jar
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &fixture{t: t, store: st, srv: srv, client: c}
}

// seed records an event of source and returns its id.
func (f *fixture) seed(source, key string, body []byte) string {
	f.t.Helper()
	id := store.NewID()
	res, err := f.store.Ingest(context.Background(), []store.NewEvent{{
		Event: anyhook.Event{ID: id, Source: source, DedupKey: key, ReceivedAt: time.Now(), Method: "POST",
			Path: "/webhooks/" + source, Header: http.Header{"Content-Type": {"application/json"}, "Stripe-Signature": {"t=1,v1=abc"}}, Body: body},
		Destinations: sources[source],
	}})
	if err != nil || res[0].Err != nil {
		f.t.Fatal(err, res)
	}
	return id
}

// park claims every due delivery of dest and leaves it held (hold) or
// dead.
func (f *fixture) park(dest string, status anyhook.DeliveryStatus) []string {
	f.t.Helper()
	ctx := context.Background()
	cs, err := f.store.Claim(ctx, dest, 100, -time.Second)
	if err != nil {
		f.t.Fatal(err)
	}
	var ids []string
	for _, c := range cs {
		ids = append(ids, c.Delivery.ID)
	}
	if status == anyhook.StatusHeld {
		if _, err := f.store.Rescue(ctx, func(string) (store.StaleRule, bool) { return store.StaleRule{Policy: anyhook.Hold}, true }); err != nil {
			f.t.Fatal(err)
		}
		return ids
	}
	var outs []store.Outcome
	for _, c := range cs {
		outs = append(outs, store.Outcome{DeliveryID: c.Delivery.ID, Attempt: c.Delivery.AttemptCount, Status: anyhook.StatusDead,
			Result: anyhook.Attempt{Number: 1, StartedAt: time.Now(), Duration: 3 * time.Millisecond, StatusCode: 500, Error: "HTTP 500", ResponseBody: []byte("boom")}})
	}
	if _, err := f.store.Finish(ctx, outs); err != nil {
		f.t.Fatal(err)
	}
	return ids
}

type response struct {
	code   int
	header http.Header
	body   string
}

func (f *fixture) do(req *http.Request) response {
	f.t.Helper()
	resp, err := f.client.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{resp.StatusCode, resp.Header, string(b)}
}

func (f *fixture) get(path string) response {
	f.t.Helper()
	req, _ := http.NewRequest("GET", f.srv.URL+path, nil)
	return f.do(req)
}

// post submits a form as a same-origin browser would.
func (f *fixture) post(path string, form url.Values) response {
	f.t.Helper()
	return f.postWith(path, form, http.Header{"Origin": {f.srv.URL}, "Sec-Fetch-Site": {"same-origin"}})
}

func (f *fixture) postWith(path string, form url.Values, h http.Header) response {
	f.t.Helper()
	req, _ := http.NewRequest("POST", f.srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for k, v := range h {
		req.Header[k] = v
	}
	return f.do(req)
}

func (f *fixture) login() {
	f.t.Helper()
	r := f.post("/login", url.Values{"token": {token}, "next": {"/events"}})
	if r.code != http.StatusSeeOther || r.header.Get("Location") != "/events" {
		f.t.Fatalf("login: %d %s", r.code, r.header.Get("Location"))
	}
}

func (f *fixture) sessionCookie() *http.Cookie {
	u, _ := url.Parse(f.srv.URL)
	for _, c := range f.client.Jar.Cookies(u) {
		if c.Name == "anyhook_session" {
			return c
		}
	}
	return nil
}

func mustContain(t *testing.T, r response, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(r.body, p) {
			t.Errorf("page lacks %q; status %d; body:\n%s", p, r.code, r.body)
		}
	}
}

func TestLoginRequired(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, path := range []string{"/", "/events", "/events/x", "/deliveries?status=dead", "/destinations"} {
		r := f.get(path)
		if r.code != http.StatusSeeOther || !strings.HasPrefix(r.header.Get("Location"), "/login?next=") {
			t.Errorf("GET %s without a session: %d %q, want a redirect to /login", path, r.code, r.header.Get("Location"))
		}
	}
	// Actions and live refreshes get 401, not a redirect.
	r := f.post("/destinations/billing/pause", nil)
	if r.code != http.StatusUnauthorized {
		t.Errorf("POST without a session: %d, want 401", r.code)
	}
	req, _ := http.NewRequest("GET", f.srv.URL+"/events", nil)
	req.Header.Set("X-AnyHook-Partial", "1")
	if r := f.do(req); r.code != http.StatusUnauthorized {
		t.Errorf("partial GET without a session: %d, want 401", r.code)
	}
	paused, _ := f.store.Paused(context.Background())
	if paused["billing"] {
		t.Error("an unauthenticated POST paused the destination")
	}
	// A forged cookie is no session.
	u, _ := url.Parse(f.srv.URL)
	f.client.Jar.SetCookies(u, []*http.Cookie{{Name: "anyhook_session", Value: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA.AAAA", Path: "/"}})
	if r := f.get("/"); r.code != http.StatusSeeOther {
		t.Errorf("forged cookie: %d, want a redirect to /login", r.code)
	}
	// The assets are public.
	if r := f.get("/assets/app.css"); r.code != http.StatusOK {
		t.Errorf("GET /assets/app.css: %d", r.code)
	}
}

func TestLogin(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := f.get("/login?next=/events")
	mustContain(t, r, `name="token"`, `value="/events"`)

	r = f.post("/login", url.Values{"token": {"wrong"}})
	if r.code != http.StatusUnauthorized || f.sessionCookie() != nil {
		t.Fatalf("bad token: %d, cookie %v; want 401 and no cookie", r.code, f.sessionCookie())
	}
	mustContain(t, r, "not a token of this gateway")

	// An off-site next is ignored.
	r = f.post("/login", url.Values{"token": {token}, "next": {"//evil.example/x"}})
	if r.code != http.StatusSeeOther || r.header.Get("Location") != "/" {
		t.Fatalf("login: %d %q, want 303 to /", r.code, r.header.Get("Location"))
	}
	var set *http.Cookie
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == "anyhook_session" {
			set = c
		}
	}
	if set == nil || !set.HttpOnly || set.SameSite != http.SameSiteStrictMode || set.Secure || set.Path != "/" {
		t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Strict, Path=/, not Secure over plain HTTP", set)
	}
	if r := f.get("/"); r.code != http.StatusOK {
		t.Fatalf("GET / after login: %d", r.code)
	}

	// Logout ends the session, even for a copy of the cookie.
	stolen := *f.sessionCookie()
	f.post("/logout", nil)
	if r := f.get("/"); r.code != http.StatusSeeOther {
		t.Errorf("GET / after logout: %d, want a redirect", r.code)
	}
	u, _ := url.Parse(f.srv.URL)
	f.client.Jar.SetCookies(u, []*http.Cookie{{Name: stolen.Name, Value: stolen.Value, Path: "/"}})
	if r := f.get("/"); r.code != http.StatusSeeOther {
		t.Errorf("GET / with the logged-out cookie: %d, want a redirect", r.code)
	}
}

func TestSecureCookieOverTLS(t *testing.T) {
	t.Parallel()
	f := setupTLS(t, true)
	r := f.post("/login", url.Values{"token": {token}})
	found := false
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		switch c.Name {
		case "__Host-anyhook_session":
			found = true
			if !c.Secure || c.Path != "/" || c.Domain != "" {
				t.Errorf("session cookie over TLS: %+v; want Secure, Path=/ and no Domain", c)
			}
		case "anyhook_session":
			t.Errorf("session cookie over TLS without the __Host- prefix: %+v", c)
		}
	}
	if !found {
		t.Fatalf("no __Host-anyhook_session cookie over TLS: %d %s", r.code, r.body)
	}
	// The prefixed cookie is the session: pages open with it.
	if r := f.get("/"); r.code != http.StatusOK {
		t.Errorf("GET / with the __Host- session: %d, want 200", r.code)
	}
}

func TestSecureCookieBehindTLSProxy(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := f.postWith("/login", url.Values{"token": {token}}, http.Header{"X-Forwarded-Proto": {"https"}})
	found := false
	for _, c := range (&http.Response{Header: r.header}).Cookies() {
		if c.Name == "__Host-anyhook_session" {
			found = true
			if !c.Secure {
				t.Errorf("session cookie behind a TLS proxy is not Secure: %+v", c)
			}
		}
	}
	if !found {
		t.Fatalf("no session cookie: %d %s", r.code, r.body)
	}
}

func TestCrossOriginActionsRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.login()
	for name, h := range map[string]http.Header{
		"cross-site fetch metadata": {"Sec-Fetch-Site": {"cross-site"}},
		"same-site fetch metadata":  {"Sec-Fetch-Site": {"same-site"}},
		"foreign origin":            {"Origin": {"https://evil.example"}},
	} {
		r := f.postWith("/destinations/billing/pause", nil, h)
		if r.code != http.StatusForbidden {
			t.Errorf("%s: %d, want 403", name, r.code)
		}
		mustContain(t, r, "cross-origin request refused")
	}
	// Login CSRF too.
	if r := f.postWith("/login", url.Values{"token": {token}}, http.Header{"Origin": {"https://evil.example"}}); r.code != http.StatusForbidden {
		t.Errorf("cross-origin login: %d, want 403", r.code)
	}
	paused, _ := f.store.Paused(context.Background())
	if paused["billing"] {
		t.Fatal("a cross-origin POST paused the destination")
	}
	// The same action from the dashboard's own page works.
	r := f.post("/destinations/billing/pause", url.Values{"back": {"/destinations"}})
	if r.code != http.StatusSeeOther {
		t.Fatalf("same-origin pause: %d %s", r.code, r.body)
	}
	paused, _ = f.store.Paused(context.Background())
	if !paused["billing"] {
		t.Fatal("same-origin pause did not pause")
	}
	r = f.get("/destinations")
	mustContain(t, r, "Destination billing paused.", `action="/destinations/billing/resume"`)
	f.post("/destinations/billing/resume", nil)
	if paused, _ = f.store.Paused(context.Background()); paused["billing"] {
		t.Fatal("resume did not resume")
	}
}

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, path := range []string{"/login", "/assets/app.js"} {
		r := f.get(path)
		csp := r.header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		for k, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer"} {
			if got := r.header.Get(k); got != want {
				t.Errorf("%s: %s = %q, want %q", path, k, got, want)
			}
		}
	}
	// No inline script anywhere: every <script> has a src.
	f.login()
	for _, path := range []string{"/", "/events", "/destinations", "/deliveries?status=dead"} {
		r := f.get(path)
		if strings.Contains(r.body, "<script>") || strings.Contains(r.body, " style=") {
			t.Errorf("%s has inline script or style", path)
		}
	}
}

func TestPages(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.login()
	jsonID := f.seed("stripe", "evt_json", []byte(`{"id":"evt_json","type":"charge.succeeded","data":{"amount":42}}`))
	binID := f.seed("github", "hook-1:guid-1", []byte{0xff, 0x00, 0x01})
	f.seed("github", "hook-1:guid-1", []byte{0xff, 0x00, 0x01}) // a duplicate: absorbed
	f.park("ci", anyhook.StatusDead)
	f.park("billing", anyhook.StatusHeld)

	r := f.get("/")
	mustContain(t, r, "events received", "success ratio", "oldest pending", "<svg", "billing", "ci", "failing", "HTTP 502")
	if n := strings.Count(r.body, `<span class="badge st-dead" title="its latest attempt failed`); n != 2 {
		t.Errorf("overview: %d destinations marked failing; want ci and audit", n)
	}

	r = f.get("/events")
	mustContain(t, r, jsonID, binID, "evt_json", "billing: held", "audit: pending", "ci: dead", `data-refresh="/events"`)
	r = f.get("/events?source=github")
	if strings.Contains(r.body, jsonID) || !strings.Contains(r.body, binID) {
		t.Error("source filter")
	}
	r = f.get("/events?status=dead")
	if strings.Contains(r.body, jsonID) || !strings.Contains(r.body, binID) {
		t.Error("status filter")
	}
	r = f.get("/events?q=evt_json") // no source: every source is asked
	if r.code != http.StatusSeeOther || r.header.Get("Location") != "/events/"+jsonID {
		t.Errorf("provider event id search: %d to %q; want 303 to the one event", r.code, r.header.Get("Location"))
	}
	// The event id (X-AnyHook-Delivery) and a delivery id open it too.
	jsonEv, err := f.store.Event(t.Context(), jsonID)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{jsonID, jsonEv.Deliveries[0].ID} {
		if r := f.get("/events?q=" + q); r.code != http.StatusSeeOther || r.header.Get("Location") != "/events/"+jsonID {
			t.Errorf("search for %s: %d to %q; want 303 to /events/%s", q, r.code, r.header.Get("Location"), jsonID)
		}
	}
	mustContain(t, f.get("/events?q=evt_nowhere"), "No events match.")
	// An event of a source the config no longer names is found too (the
	// per-source lookups above know only configured sources).
	goneID := f.seed("renamed-away", "evt_gone", []byte(`{"id":"evt_gone"}`))
	if r := f.get("/events?q=evt_gone"); r.code != http.StatusSeeOther || r.header.Get("Location") != "/events/"+goneID {
		t.Errorf("search for an event of a removed source: %d to %q; want 303 to /events/%s", r.code, r.header.Get("Location"), goneID)
	}
	req, _ := http.NewRequest("GET", f.srv.URL+"/events?source=stripe", nil)
	req.Header.Set("X-AnyHook-Partial", "1")
	r = f.do(req)
	if r.code != http.StatusOK || strings.Contains(r.body, "<html") || !strings.Contains(r.body, jsonID) {
		t.Errorf("partial rows: %d %s", r.code, r.body)
	}
	mustContain(t, f.get("/events?status=paused"), "No events match.") // answered from the queue counts
	if r := f.get("/events?status=bogus"); r.code != http.StatusBadRequest {
		t.Errorf("bad status: %d", r.code)
	}
	// A filter a list lacks is refused, not ignored: the page would show
	// every event under a link that reads as one destination's.
	for path, want := range map[string]string{
		"/events?destination=billing":           "/deliveries?destination=billing",
		"/events?statu=dead":                    `no filter &#34;statu&#34;`,
		"/deliveries?source=stripe":             `no filter &#34;source&#34; (it filters by status, destination, cursor)`,
		"/incidents?status=open":                `no filter &#34;status&#34;`,
		"/rejections?destination=billing":       `no filter &#34;destination&#34; (it filters by source, reason, q, cursor)`,
		"/events?source=stripe&source=github":   "source is given 2 times",
		"/deliveries?status=dead&source=stripe": "/events?source=stripe&amp;status=dead",
		"/?status=dead":                         `no filter &#34;status&#34;: it takes no query parameters`,
		"/destinations?destination=billing":     `no filter &#34;destination&#34;: it takes no query parameters`,
		"/sources?source=stripe":                `no filter &#34;source&#34;: it takes no query parameters`,
	} {
		r := f.get(path)
		if r.code != http.StatusBadRequest {
			t.Errorf("GET %s: %d, want 400", path, r.code)
		}
		mustContain(t, r, want)
	}

	// A removed source's events are listed under its name, not "any";
	// a window back in time says so, and is not refreshed live.
	mustContain(t, f.get("/events?source=renamed-away"), `renamed-away (not in the config)</option>`, goneID)
	r = f.get("/events?until=" + url.QueryEscape(time.Now().Add(time.Hour).UTC().Format(time.RFC3339)))
	mustContain(t, r, `Received before <input type="text" name="until"`)
	if strings.Contains(r.body, `id="live"`) || strings.Contains(r.body, "data-refresh") {
		t.Error("a list back in time offers the live refresh")
	}

	r = f.get("/events/" + jsonID)
	mustContain(t, r, "Stripe-Signature", "t=1,v1=abc", "&#34;amount&#34;: 42", `id="body-raw"`,
		"Replay to all destinations", "Replay to audit", "Replay to billing", "held", "Resend")
	r = f.get("/events/" + binID)
	mustContain(t, r, "the provider sent this event 1 more time;")
	mustContain(t, r, "binary: shown as base64", "/wAB", "HTTP 500", "boom", "3.0 ms")
	if r := f.get("/events/nope"); r.code != http.StatusNotFound {
		t.Errorf("unknown event: %d", r.code)
	}

	r = f.get("/deliveries?status=dead")
	mustContain(t, r, binID, "Replay all dead (1)", `formaction="/deliveries/`)
	r = f.get("/deliveries?status=held&destination=billing")
	mustContain(t, r, jsonID, "held deliveries to billing")

	if r := f.get("/nowhere"); r.code != http.StatusNotFound {
		t.Errorf("unknown page: %d", r.code)
	}
}

func TestActions(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.login()
	ctx := context.Background()
	id := f.seed("stripe", "evt_1", []byte(`{}`))
	other := f.seed("github", "h:1", []byte(`{}`))
	held := f.park("billing", anyhook.StatusHeld)
	dead := f.park("ci", anyhook.StatusDead)

	// Replay to one destination, then to all.
	r := f.post("/events/"+id+"/replay", url.Values{"destination": {"audit"}, "back": {"/events/" + id}})
	if r.code != http.StatusSeeOther || r.header.Get("Location") != "/events/"+id {
		t.Fatalf("replay: %d %q", r.code, r.header.Get("Location"))
	}
	mustContain(t, f.get("/events/"+id), "Replay queued to audit.")
	f.post("/events/"+id+"/replay", nil)
	ev, _ := f.store.Event(ctx, id)
	replays := map[string]int{}
	for _, d := range ev.Deliveries {
		if d.Replay {
			replays[d.Destination]++
		}
	}
	if replays["audit"] != 2 || replays["billing"] != 1 {
		t.Fatalf("replay deliveries %v, want audit 2, billing 1", replays)
	}
	// A bad destination is refused by the API's own validation.
	f.post("/events/"+id+"/replay", url.Values{"destination": {"ci"}})
	mustContain(t, f.get("/events/"+id), "Replay failed", "does not receive source")

	// The replay to billing took the held billing delivery out of the
	// held queue: it is resolved, and cannot be resolved again.
	ev, _ = f.store.Event(ctx, id)
	for _, d := range ev.Deliveries {
		if d.ID == held[0] && (d.Status != anyhook.StatusResolved || d.Resolution.Kind != anyhook.ResolvedReplayed) {
			t.Fatalf("held delivery is %s %+v after a replay to its destination", d.Status, d.Resolution)
		}
	}
	f.post("/deliveries/"+held[0]+"/resolve", url.Values{"action": {"mark_delivered"}})
	mustContain(t, f.get("/events/"+id), "is resolved; only held or dead deliveries can be resolved")

	// Bulk: resend the dead one, and a delivery that is not resolvable.
	r = f.post("/deliveries/resolve", url.Values{"action": {"resend"}, "id": {dead[0], held[0]}, "back": {"/deliveries?status=dead"}})
	if r.header.Get("Location") != "/deliveries?status=dead" {
		t.Fatalf("bulk: %d %q", r.code, r.header.Get("Location"))
	}
	mustContain(t, f.get("/deliveries?status=dead"), "1 of 2 deliveries resent.", "only held or dead")
	ev, _ = f.store.Event(ctx, other)
	if ev.Deliveries[0].Status != anyhook.StatusRetrying { // due again after its failed attempt
		t.Fatalf("dead delivery is %s after resend", ev.Deliveries[0].Status)
	}

	// Bulk replay of the dead queue. ci's latest attempt failed: the
	// page's confirmation says so, and its yes forces the replay (a post
	// without it is refused, naming ci).
	f.park("ci", anyhook.StatusDead)
	mustContain(t, f.get("/deliveries?status=dead&destination=ci"), "Mind: ci is failing: its last", `name="force" value="on"`)
	f.post("/replay", url.Values{"status": {"dead"}, "destination": {"ci"}})
	mustContain(t, f.get("/deliveries?status=dead"), "Bulk replay failed: the replay cannot be delivered now: ci is failing")
	f.post("/replay", url.Values{"status": {"dead"}, "destination": {"ci"}, "force": {"on"}})
	mustContain(t, f.get("/deliveries?status=dead"), "Replay queued for 1 delivery.")
	ev, _ = f.store.Event(ctx, other)
	if len(ev.Deliveries) != 2 || !ev.Deliveries[1].Replay {
		t.Fatalf("bulk replay: deliveries %+v", ev.Deliveries)
	}
}

func TestAuthOff(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	api := admin.New(admin.Options{Store: st, Sources: sources})
	d, err := dashboard.New(dashboard.Options{Store: st, API: api.Handler(), Sources: sources})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	d.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	if rec.Code != http.StatusOK || strings.Contains(rec.Body.String(), "Log out") {
		t.Fatalf("GET / with authentication off: %d", rec.Code)
	}
}

// TestPrunedEvent: the page of an event whose body retention pruned says
// so and offers no replay or resend; a replay posted anyway is refused
// with the API's reason in the flash.
func TestPrunedEvent(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.login()
	ctx := context.Background()
	id := f.seed("github", "h:1", []byte(`{"secret":"gone"}`))
	dead := f.park("ci", anyhook.StatusDead)
	if _, err := f.store.Resolve(ctx, dead[0], store.ActionDiscard, store.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.NewSequencer(f.store, ledger.SequencerOptions{}).Run(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := ledger.Prune(ctx, f.store, time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v", n, err)
	}
	page := f.get("/events/" + id)
	mustContain(t, page, `id="body-pruned"`, "pruned by retention")
	for _, gone := range []string{`action="/events/` + id + `/replay"`, `value="resend"`} {
		if strings.Contains(page.body, gone) {
			t.Errorf("the page of a pruned event still offers %s", gone)
		}
	}
	f.post("/events/"+id+"/replay", url.Values{"back": {"/events/" + id}})
	mustContain(t, f.get("/events/"+id), "Replay failed: event "+id+": its body was pruned by retention")
	f.post("/deliveries/"+dead[0]+"/resolve", url.Values{"action": {"resend"}, "back": {"/events/" + id}})
	mustContain(t, f.get("/events/"+id), "Delivery "+dead[0]+": delivery "+dead[0]+" is resolved; only held or dead deliveries can be resolved")
	if ev, _ := f.store.Event(ctx, id); len(ev.Deliveries) != 1 || ev.Deliveries[0].Status != anyhook.StatusResolved {
		t.Errorf("deliveries after refused actions: %+v", ev.Deliveries)
	}
}

// The overview counts what happened in the last hour, not each delivery's
// state now: deliveries that went dead and were replayed since still
// count as gone dead, in the cards and in the chart's dead series.
func TestOverviewKeepsDeadAfterReplay(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.login()
	var events []string
	for _, k := range []string{"a", "b", "c"} {
		events = append(events, f.seed("github", "evt_"+k, []byte(`{}`)))
	}
	f.park("ci", anyhook.StatusDead)
	for _, id := range events {
		if _, err := f.store.Replay(t.Context(), id, []string{"ci"}, store.Actor{Name: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	r := f.get("/")
	mustContain(t, r, `<div class="num bad">3</div><div class="lbl">went dead, last hour (3 replays since)</div>`,
		`<div class="num">3</div><div class="lbl">failed attempts, last hour</div>`)
	// The chart's dead series has a bar of 3.
	if !strings.Contains(r.body, `s-dead`) || !strings.Contains(r.body, "dead: 3") {
		t.Errorf("the chart shows no dead bar of 3:\n%s", r.body)
	}
}
