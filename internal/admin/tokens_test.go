package admin_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/admin"
	"github.com/anyhook/anyhook/internal/auth"
)

const (
	opsToken   = "ops-token-0123456789"
	readToken  = "read-token-0123456789"
	aliceToken = "alice-token-0123456789" // pull:ci (github's destination)
)

// setupTokens is an API with an admin, a read and a pull token.
func setupTokens(t *testing.T) *fixture {
	t.Helper()
	return setupWith(t, admin.Options{Tokens: auth.New([]auth.Token{
		{Name: "ops", Secret: opsToken, Scopes: []string{auth.ScopeAdmin}},
		{Name: "grafana", Secret: readToken, Scopes: []string{auth.ScopeRead}},
		{Name: "alice", Secret: aliceToken, Scopes: []string{"pull:ci"}},
	})})
}

// refused checks that r is a 403 with code forbidden naming the token
// and without any token's value.
func refused(t *testing.T, what string, r response, name string) {
	t.Helper()
	if r.status != http.StatusForbidden {
		t.Errorf("%s: %d %s, want 403", what, r.status, r.body)
		return
	}
	if code := r.errCode(t); code != "forbidden" || !strings.Contains(string(r.body), `\"`+name+`\"`) {
		t.Errorf("%s: %s, want code forbidden naming token %q", what, r.body, name)
	}
	for _, s := range []string{opsToken, readToken, aliceToken} {
		if strings.Contains(string(r.body), s) {
			t.Errorf("%s: the answer shows a token: %s", what, r.body)
		}
	}
}

// TestScopeReadToken: a read token may GET everything and act on nothing.
func TestScopeReadToken(t *testing.T) {
	t.Parallel()
	f := setupTokens(t)
	ev, dead := f.deadEvent("evt_read")
	read := "Bearer " + readToken
	for _, path := range []string{"/api/events", "/api/events/" + ev, "/api/deliveries?status=dead", "/api/destinations",
		"/api/incidents", "/api/searches", "/api/rejections", "/api/openapi.json"} {
		f.mustStatus(f.doAuth("GET", path, "", read), http.StatusOK)
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/events/" + ev + "/replay", `{"destination":"billing"}`},
		{"POST", "/api/replay", `{"status":"dead"}`},
		{"POST", "/api/deliveries/" + dead + "/resolve", `{"action":"discard"}`},
		{"POST", "/api/destinations/billing/pause", ""},
		{"POST", "/api/destinations/billing/resume", ""},
		{"POST", "/api/destinations/billing/discard", ""},
		{"POST", "/api/searches", `{"name":"x","query":"source=stripe"}`},
		{"DELETE", "/api/searches/0190", ""},
		{"POST", "/api/incidents/0190/acknowledge", ""},
		{"POST", "/api/incidents/0190/resolve", ""},
	} {
		refused(t, "read "+c.method+" "+c.path, f.doAuth(c.method, c.path, c.body, read), "grafana")
	}
	// Nothing was done: the dead delivery is still dead, no action.
	evj := f.mustStatus(f.doAuth("GET", "/api/events/"+ev, "", "Bearer "+opsToken), http.StatusOK).json(t)
	if d := deliveryOf(evj, dead); d["status"] != "dead" || len(actionsOf(t, evj)) != 0 {
		t.Errorf("after refusals: %v, actions %v", d, evj["actions"])
	}
}

// TestScopePullToken: a pull token reads nothing and replays only its own
// destination's events, as a replay recorded under its name.
func TestScopePullToken(t *testing.T) {
	t.Parallel()
	f := setupTokens(t)
	pull := "Bearer " + aliceToken
	stripeEv, dead := f.deadEvent("evt_stripe") // billing and audit: not alice's
	githubEv := f.seed("github", "gh_1", []byte(`{}`), time.Second)
	f.finish(f.claim("ci", time.Minute), anyhook.StatusDead, 500, nil)

	for _, path := range []string{"/api/events", "/api/events/" + githubEv, "/api/deliveries", "/api/destinations", "/api/openapi.json"} {
		refused(t, "pull GET "+path, f.doAuth("GET", path, "", pull), "alice")
	}
	// Another destination's event is as if it did not exist: 404, and
	// nothing quoted but the id asked for.
	for _, c := range []struct{ path, body string }{
		{"/api/events/" + stripeEv + "/replay", `{}`},
		{"/api/events/" + stripeEv + "/replay", `{"destination":"ci"}`}, // into its own, not its event
		{"/api/events/" + dead + "/replay", `{}`},                       // by another destination's delivery id
	} {
		if r := f.doAuth("POST", c.path, c.body, pull); r.status != http.StatusNotFound || (strings.Contains(string(r.body), stripeEv) && !strings.Contains(c.path, stripeEv)) {
			t.Errorf("pull POST %s %s: %d %s, want 404", c.path, c.body, r.status, r.body)
		}
	}
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/api/events/" + stripeEv + "/replay", `{"destination":"billing"}`}, // into another destination
		{"POST", "/api/events/" + githubEv + "/replay", `{"destination":"billing"}`}, // its event, another destination
		{"POST", "/api/events/" + githubEv + "/replay", `{"destination":"nowhere"}`}, // says nothing of other names
		{"POST", "/api/replay", `{"status":"dead","destination":"billing"}`},
		{"POST", "/api/replay", `{"status":"dead","filter":"body.amount > 1000","since":"1h"}`}, // a body search over every destination's events         // bulk into another
		{"POST", "/api/deliveries/" + dead + "/resolve", `{"action":"resend"}`},                 // resolve is not a replay
		{"POST", "/api/destinations/ci/pause", ""},                                              // not even its own
		{"POST", "/api/sources/github/backfill", `{"since":"1h"}`},
	} {
		refused(t, "pull "+c.method+" "+c.path+" "+c.body, f.doAuth(c.method, c.path, c.body, pull), "alice")
	}

	// A bulk replay without a destination is one into its own: of the
	// two dead deliveries, ci's.
	bulk := f.mustStatus(f.doAuth("POST", "/api/replay", `{"status":"dead","force":true}`, pull), http.StatusAccepted).json(t)
	if bulk["count"].(float64) != 1 {
		t.Errorf("bulk replay of dead by alice: %v; want ci's one", bulk)
	}
	// Its own event: a replay, marked as one, recorded as alice's.
	r := f.mustStatus(f.doAuth("POST", "/api/events/"+githubEv+"/replay", `{"reason":"trying my handler"}`, pull), http.StatusAccepted).json(t)
	ds := r["deliveries"].([]any)
	if len(ds) != 1 || ds[0].(map[string]any)["destination"] != "ci" || ds[0].(map[string]any)["replay"] != true {
		t.Fatalf("replay: %v", r)
	}
	evj := f.mustStatus(f.doAuth("GET", "/api/events/"+githubEv, "", "Bearer "+opsToken), http.StatusOK).json(t)
	acts := actionsOf(t, evj)
	if len(acts) != 2 {
		t.Fatalf("actions %v: want the bulk replay and the replay", acts)
	}
	for _, a := range acts {
		if a["actor"] != "alice" || a["action"] != "replay" || a["destination"] != "ci" {
			t.Errorf("action %v: want a replay to ci by alice", a)
		}
	}
	stripe := f.mustStatus(f.doAuth("GET", "/api/events/"+stripeEv, "", "Bearer "+opsToken), http.StatusOK).json(t)
	if len(actionsOf(t, stripe)) != 0 || deliveryOf(stripe, dead)["status"] != "dead" {
		t.Errorf("the stripe event was touched: %v", stripe)
	}
}

// TestTokenUnknown: a forged or foreign token, or none, is 401 with
// WWW-Authenticate; an admin token does everything and acts under its
// name.
func TestTokenUnknown(t *testing.T) {
	t.Parallel()
	f := setupTokens(t)
	for _, h := range []string{"", "Bearer ", "Bearer forged-token-0123456789", "Bearer " + token, "Basic " + opsToken, "Bearer " + opsToken + "x"} {
		r := f.doAuth("GET", "/api/events", "", h)
		if r.status != http.StatusUnauthorized || r.header.Get("WWW-Authenticate") == "" || r.errCode(t) != "unauthorized" {
			t.Errorf("%q: %d %s, want 401", h, r.status, r.body)
		}
	}
	ev, _ := f.deadEvent("evt_ops")
	f.mustStatus(f.doAuth("POST", "/api/events/"+ev+"/replay", `{"destination":"billing"}`, "Bearer "+opsToken), http.StatusAccepted)
	evj := f.mustStatus(f.doAuth("GET", "/api/events/"+ev, "", "Bearer "+opsToken), http.StatusOK).json(t)
	if acts := actionsOf(t, evj); len(acts) != 1 || acts[0]["actor"] != "ops" {
		t.Errorf("actions %v: want the replay by ops", acts)
	}
}

// TestScopePullRule: the rule the pull endpoints will call.
func TestScopePullRule(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest("POST", "/api/destinations/ci/lease", nil)
	for _, c := range []struct {
		p    auth.Principal
		dest string
		ok   bool
	}{
		{auth.Principal{Name: "alice", Scopes: []string{"pull:ci"}}, "ci", true},
		{auth.Principal{Name: "alice", Scopes: []string{"pull:ci"}}, "billing", false},
		{auth.Principal{Name: "grafana", Scopes: []string{auth.ScopeRead}}, "ci", false},
		{auth.Principal{Name: "ops", Scopes: []string{auth.ScopeAdmin}}, "ci", true},
		{auth.Anonymous, "ci", true},
		{auth.Principal{}, "ci", false}, // no principal in the context
	} {
		rr := r
		if c.p.Name != "" || c.p.Admin() {
			rr = r.WithContext(auth.WithPrincipal(r.Context(), c.p))
		}
		err := admin.AuthorizePull(rr, c.dest)
		var e *admin.Error
		if (err == nil) != c.ok || (err != nil && (!errors.As(err, &e) || e.Status != http.StatusForbidden)) {
			t.Errorf("%s pulling %s: %v, want allowed %v (else 403)", c.p.Describe(), c.dest, err, c.ok)
		}
	}
}
