package dashboard_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/auth"
)

const (
	opsToken   = "ops-token-0123456789"
	readToken  = "read-token-0123456789"
	aliceToken = "alice-token-0123456789"
)

func scopedTokens() *auth.Tokens {
	return auth.New([]auth.Token{
		{Name: "ops", Secret: opsToken, Scopes: []string{auth.ScopeAdmin}},
		{Name: "grafana", Secret: readToken, Scopes: []string{auth.ScopeRead}},
		{Name: "alice", Secret: aliceToken, Scopes: []string{"pull:ci"}},
	})
}

func (f *fixture) loginWith(tok string) response {
	f.t.Helper()
	return f.post("/login", url.Values{"token": {tok}, "next": {"/events"}})
}

// TestLoginPullTokenRefused: a pull token is a real token but no
// dashboard login: 403 (not 401: nothing was guessed), with why, and no
// session.
func TestLoginPullTokenRefused(t *testing.T) {
	t.Parallel()
	f := setupWith(t, false, scopedTokens())
	r := f.loginWith(aliceToken)
	if r.code != http.StatusForbidden || f.sessionCookie() != nil {
		t.Fatalf("pull token login: %d, cookie %v; want 403 and no session", r.code, f.sessionCookie())
	}
	mustContain(t, r, "alice", "pull:ci", "cannot log in to the dashboard", "scope admin or read")
	if strings.Contains(r.body, aliceToken) {
		t.Error("the login page shows the token")
	}
	if r := f.get("/events"); r.code != http.StatusSeeOther {
		t.Errorf("GET /events after the refused login: %d, want a redirect to /login", r.code)
	}
	// The admin_token of the fixture is not configured once tokens are.
	if r := f.loginWith(token); r.code != http.StatusUnauthorized {
		t.Errorf("unknown token: %d, want 401", r.code)
	}
}

// actionForm matches a form that posts an action (every POST form but
// logout and login).
var actionForm = regexp.MustCompile(`<form method="post" action="/(events|deliveries|replay|searches|destinations|incidents|sources)[^"]*"`)

// TestReadTokenSeesNoActions: a read session sees every page, with no
// action form on any, and each action it posts anyway is refused 403
// and changes nothing; the admin session on the same pages has them.
func TestReadTokenSeesNoActions(t *testing.T) {
	t.Parallel()
	f := setupWith(t, false, scopedTokens())
	ev := f.seed("stripe", "evt_read", []byte(`{"id":"evt_read"}`))
	dead := f.park("billing", anyhook.StatusDead)
	pages := []string{"/", "/events", "/events?q=filter:true", "/events/" + ev, "/deliveries?status=dead", "/destinations", "/sources", "/incidents"}

	if r := f.loginWith(opsToken); r.code != http.StatusSeeOther {
		t.Fatalf("admin login: %d", r.code)
	}
	withForms := 0
	for _, p := range pages {
		withForms += len(actionForm.FindAllString(f.get(p).body, -1))
	}
	if withForms == 0 {
		t.Fatal("the admin session's pages have no action forms: the test would prove nothing")
	}
	f.post("/logout", nil)

	if r := f.loginWith(readToken); r.code != http.StatusSeeOther {
		t.Fatalf("read login: %d %s", r.code, r.body)
	}
	for _, p := range pages {
		r := f.get(p)
		if r.code != http.StatusOK {
			t.Errorf("read GET %s: %d", p, r.code)
			continue
		}
		if forms := actionForm.FindAllString(r.body, -1); len(forms) > 0 {
			t.Errorf("read GET %s offers actions: %q", p, forms)
		}
		mustContain(t, r, `id="read-only"`, "grafana")
	}
	for _, c := range []struct {
		path string
		form url.Values
	}{
		{"/events/" + ev + "/replay", url.Values{"destination": {"billing"}}},
		{"/replay", url.Values{"status": {"dead"}}},
		{"/deliveries/" + dead[0] + "/resolve", url.Values{"action": {"discard"}}},
		{"/deliveries/resolve", url.Values{"action": {"discard"}, "id": {dead[0]}}},
		{"/destinations/billing/pause", nil},
		{"/destinations/billing/discard", nil},
		{"/searches", url.Values{"name": {"x"}, "query": {"source=stripe"}}},
		{"/searches/0190/delete", nil},
		{"/incidents/0190/acknowledge", nil},
		{"/incidents/0190/resolve", nil},
		{"/sources/stripe/backfill", url.Values{"since": {"1h"}}},
	} {
		r := f.post(c.path, c.form)
		if r.code != http.StatusForbidden || !strings.Contains(r.body, "cannot act") {
			t.Errorf("read POST %s: %d, want 403 saying it cannot act", c.path, r.code)
		}
	}
	got, err := f.store.Event(t.Context(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Actions) != 0 {
		t.Errorf("actions after the refusals: %v", got.Actions)
	}
	if paused, _ := f.store.Paused(t.Context()); paused["billing"] {
		t.Error("billing was paused by a read session")
	}
}

// TestLoginSessionActsAsItsToken: an admin token's session acts under the
// token's name and its session.
func TestLoginSessionActsAsItsToken(t *testing.T) {
	t.Parallel()
	f := setupWith(t, false, scopedTokens())
	ev := f.seed("stripe", "evt_ops", []byte(`{}`))
	f.park("billing", anyhook.StatusDead)
	f.loginWith(opsToken)
	if r := f.post("/events/"+ev+"/replay", url.Values{"destination": {"billing"}}); r.code != http.StatusSeeOther {
		t.Fatalf("replay: %d %s", r.code, r.body)
	}
	got, err := f.store.Event(t.Context(), ev)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Actions) != 1 || !regexp.MustCompile(`^ops \(dashboard session [0-9a-f]{8}\)$`).MatchString(got.Actions[0].Actor) {
		t.Errorf("actions %+v: want the replay by ops's dashboard session", got.Actions)
	}
}

// TestLoginSessionEndsWithItsToken: a session is accepted by every
// instance with the same tokens, and ends where its token changed, was
// removed, or lost the right to log in. A session cookie from before
// tokens had names is the admin token's.
func TestLoginSessionEndsWithItsToken(t *testing.T) {
	t.Parallel()
	a := setupWith(t, false, scopedTokens())
	if r := a.loginWith(readToken); r.code != http.StatusSeeOther {
		t.Fatalf("read login: %d", r.code)
	}
	cookie := a.sessionCookie()
	pageWith := func(f *fixture, c *http.Cookie) int {
		t.Helper()
		req, _ := http.NewRequest("GET", f.srv.URL+"/events", nil)
		req.AddCookie(&http.Cookie{Name: c.Name, Value: c.Value})
		return f.do(req).code
	}
	with := func(grafana auth.Token) *fixture {
		return setupWith(t, false, auth.New([]auth.Token{
			{Name: "ops", Secret: opsToken, Scopes: []string{auth.ScopeAdmin}}, grafana}))
	}
	for _, c := range []struct {
		name   string
		f      *fixture
		wantOK bool
	}{
		{"another instance sharing the tokens", with(auth.Token{Name: "grafana", Secret: readToken, Scopes: []string{auth.ScopeRead}}), true},
		{"token changed", with(auth.Token{Name: "grafana", Secret: "another-read-token-0123", Scopes: []string{auth.ScopeRead}}), false},
		{"token removed", setupWith(t, false, auth.New([]auth.Token{{Name: "ops", Secret: opsToken, Scopes: []string{auth.ScopeAdmin}}})), false},
		{"now a pull token", with(auth.Token{Name: "grafana", Secret: readToken, Scopes: []string{"pull:ci"}}), false},
	} {
		code := pageWith(c.f, cookie)
		if (code == http.StatusOK) != c.wantOK {
			t.Errorf("%s: GET /events with the session: %d, want accepted %v", c.name, code, c.wantOK)
		}
	}

	// A cookie of the old shape: expiry ‖ nonce, MACed with the key of the
	// admin token.
	old := setup(t)
	payload := make([]byte, 24)
	binary.BigEndian.PutUint64(payload, uint64(time.Now().Add(time.Hour).Unix()))
	copy(payload[8:], "0123456789abcdef")
	k := hmac.New(sha256.New, []byte(token))
	k.Write([]byte("anyhook dashboard session v1"))
	m := hmac.New(sha256.New, k.Sum(nil))
	m.Write(payload)
	legacy := &http.Cookie{Name: "anyhook_session", Value: base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(m.Sum(nil))}
	if code := pageWith(old, legacy); code != http.StatusOK {
		t.Errorf("a session cookie from before tokens had names: %d, want accepted", code)
	}
	if code := pageWith(a, legacy); code == http.StatusOK {
		t.Error("the old cookie of another admin token was accepted")
	}
}
