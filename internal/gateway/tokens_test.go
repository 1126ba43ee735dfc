package gateway_test

import (
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/syncio"
)

const (
	gwReadToken = "gw-read-token-0123456789"
	gwPullToken = "gw-pull-token-0123456789"
)

// tokensTop configures a read token and a pull token for billing beside
// the tests' admin_token.
const tokensTop = `tokens:
  - {name: grafana, token: ` + gwReadToken + `, scopes: [read]}
  - {name: alice, token: ` + gwPullToken + `, scopes: ["pull:billing"]}`

// TestAuthForbiddenIsNotAFailure: a known token refused for its scopes
// (403) is no guess and never counts towards the per-address lockout;
// a forged token (401) does, through the same doors.
func TestAuthForbiddenIsNotAFailure(t *testing.T) {
	t.Parallel()
	e := setup(t, sinktest.New(t), "", tokensTop)
	c := clientFrom("127.0.0.21")
	send := func(method, path, token, body string) int {
		t.Helper()
		req, _ := http.NewRequest(method, e.url+path, strings.NewReader(body))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	login := func(token string) int {
		t.Helper()
		resp, err := c.PostForm(e.url+"/login", url.Values{"token": {token}})
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 3 * gateway.AuthMaxFailures {
		var code int
		switch i % 4 {
		case 0:
			code = send("POST", "/api/destinations/billing/pause", gwReadToken, "")
		case 1:
			code = send("GET", "/api/events", gwPullToken, "")
		case 2:
			code = send("GET", "/metrics", gwPullToken, "")
		case 3:
			code = login(gwPullToken)
		}
		if code != http.StatusForbidden {
			t.Fatalf("refusal %d: %d, want 403", i, code)
		}
	}
	if code := send("GET", "/metrics", gwReadToken, ""); code != http.StatusOK {
		t.Errorf("read token on /metrics: %d, want 200", code)
	}
	// Not one of the 403s counted: every forged token up to the limit
	// still gets its 401, then the next 429.
	for i := range gateway.AuthMaxFailures {
		if code := send("GET", "/api/events", "forged-token-0123456789", ""); code != http.StatusUnauthorized {
			t.Fatalf("forged token %d after the 403s: %d, want 401 (a 403 was counted as a failure)", i, code)
		}
	}
	if code := send("GET", "/api/events", "forged-token-0123456789", ""); code != http.StatusTooManyRequests {
		t.Errorf("forged token past the limit: %d, want 429 (forged tokens are counted)", code)
	}
	// The known tokens keep their answers from the blocked address.
	if code := send("GET", "/api/events", gwReadToken, ""); code != http.StatusOK {
		t.Errorf("read token from the blocked address: %d, want 200", code)
	}
	if code := send("GET", "/api/events", gwPullToken, ""); code != http.StatusForbidden {
		t.Errorf("pull token from the blocked address: %d, want 403", code)
	}
}

// TestTokenPullReplaysItsOwn: through the gateway, a pull token replays
// its destination's event, marked as a replay and recorded under its
// name.
func TestTokenPullReplaysItsOwn(t *testing.T) {
	t.Parallel()
	e := setup(t, sinktest.New(t), "", tokensTop)
	a := e.sendStripe(t, "evt_pull_1")
	if a.Code != 200 {
		t.Fatalf("send: %d", a.Code)
	}
	req, _ := http.NewRequest("POST", e.url+"/api/events/"+a.ID+"/replay", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+gwPullToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(string(raw), `"replay":true`) {
		t.Fatalf("replay by the pull token: %d %s", resp.StatusCode, raw)
	}
	ev, err := e.store.Event(t.Context(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Actions) != 1 || ev.Actions[0].Actor != "alice" {
		t.Errorf("actions %+v: want the replay by alice", ev.Actions)
	}
}

// TestTokenNeverLogged: logins, refusals and forged tokens are logged by
// the token's name at most, never a token's value.
func TestTokenNeverLogged(t *testing.T) {
	t.Parallel()
	var logs syncio.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	base, g := gatewaytest.Start(t, testTop+`sources:
  stripe: {provider: stripe, secrets: [`+stripeSecret+`]}
destinations:
  billing: {url: http://127.0.0.1:1/hooks, sources: [stripe]}
`+tokensTop, gateway.Options{Logger: log})
	for _, tok := range []string{gwPullToken, gwReadToken, "forged-token-0123456789"} {
		resp, err := http.PostForm(base+"/login", url.Values{"token": {tok}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		for _, path := range []string{"/api/events", "/api/destinations/billing/pause", "/metrics"} {
			method := "GET"
			if strings.HasSuffix(path, "pause") {
				method = "POST"
			}
			req, _ := http.NewRequest(method, base+path, nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
		}
	}
	g.Stop(t.Context())
	out := logs.String()
	if !strings.Contains(out, "token=alice") {
		t.Errorf("the refused login is not logged by the token's name:\n%s", out)
	}
	for _, tok := range []string{gwPullToken, gwReadToken, "forged-token-0123456789", gatewaytest.AdminToken} {
		if strings.Contains(out, tok) {
			t.Errorf("the log shows the token %q:\n%s", tok, out)
		}
	}
	if eff := string(g.Config().Effective()); strings.Contains(eff, gwPullToken) || strings.Contains(eff, gwReadToken) {
		t.Errorf("the effective config shows a token:\n%s", eff)
	}
}
