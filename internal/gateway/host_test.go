package gateway_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
)

// noHost sends a request without a Host header (HTTP/1.0).
const noHost = "(none)"

type rawAnswer struct {
	code   int
	header http.Header
	body   string
}

// rawRequest sends one request over a fresh connection to addr with Host
// exactly host (anything a client could put there, which http.Client
// would refuse or rewrite).
func rawRequest(t *testing.T, addr, method, target, host string, h http.Header, body []byte) rawAnswer {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	var b strings.Builder
	if host == noHost {
		fmt.Fprintf(&b, "%s %s HTTP/1.0\r\n", method, target)
	} else {
		fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: %s\r\n", method, target, host)
	}
	h.Write(&b)
	fmt.Fprintf(&b, "Content-Length: %d\r\nConnection: close\r\n\r\n%s", len(body), body)
	if _, err := io.WriteString(c, b.String()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%s %s Host %q: %v", method, target, host, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return rawAnswer{resp.StatusCode, resp.Header, string(raw)}
}

// TestTokenlessGatewayAnswersOnlyLoopbackHosts: without an admin token,
// the admin API, the dashboard and /metrics answer only requests for a
// loopback name, so a page that rebinds its own name to 127.0.0.1 can
// neither read nor act; ingest and the probes answer every Host.
func TestTokenlessGatewayAnswersOnlyLoopbackHosts(t *testing.T) {
	t.Parallel()
	sk := sinktest.New(t)
	base, g := gatewaytest.Start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:anyhook.db
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  billing: {url: %s/hooks, sources: [stripe]}
`, stripeSecret, sk.URL), gateway.Options{})
	addr := strings.TrimPrefix(base, "http://")
	_, port, _ := net.SplitHostPort(addr)
	body := []byte(`{"id":"evt_rebind_1","object":"event","type":"charge.succeeded","created":1700000000,"data":{"object":{"id":"ch_1"}}}`)
	first := do(t, stripeRequest(t, base+"/webhooks/stripe", stripeSecret, body, time.Now()))
	if first.Code != 200 {
		t.Fatalf("ingest: %+v", first)
	}

	// The refusal is the one docs/api.md shows.
	apiDoc, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	if r := rawRequest(t, addr, "GET", "/api/events", "rebind.attacker.example:8080", nil, nil); !bytes.Contains(apiDoc, []byte(strings.TrimSpace(r.body))) {
		t.Errorf("docs/api.md does not show the answer %d %s", r.code, r.body)
	}

	for _, tc := range []struct {
		host string
		ok   bool
	}{
		// Loopback: any port or none, any case, one trailing dot.
		{"127.0.0.1:" + port, true},
		{"127.0.0.1", true},
		{"127.0.0.1:80", true},
		{"127.9.8.7:" + port, true},
		{"127.0.0.1.:" + port, true},
		{"localhost:" + port, true},
		{"localhost", true},
		{"localhost:", true},
		{"LOCALHOST:" + port, true},
		{"LocalHost.:" + port, true},
		{"anyhook.localhost:" + port, true},
		{"Dash.AnyHook.LOCALHOST.", true},
		{"[::1]:" + port, true},
		{"[::1]", true},
		{"[0:0:0:0:0:0:0:1]:" + port, true},
		// DNS rebinding: the attacker's own name, resolving to 127.0.0.1.
		{"rebind.attacker.example:" + port, false},
		{"rebind.attacker.example", false},
		{"REBIND.attacker.example.:" + port, false},
		{"localhost.attacker.example:" + port, false},
		{"localhost.attacker.example.", false},
		{"127.0.0.1.nip.io:" + port, false},
		{"localhost.localdomain", false},
		// Not loopback, or not an address in the one spelling browsers send.
		{"0.0.0.0:" + port, false},
		{"10.0.0.1:" + port, false},
		{"127.1:" + port, false},
		{"2130706433:" + port, false},
		{"0x7f000001", false},
		{"[::]:" + port, false},
		{"[::ffff:127.0.0.1]:" + port, false},
		{"[fe80::1%25lo]:" + port, false},
		{"[::1%25lo]:" + port, false},
		{"::1", false},
		{"[::1", false},
		{"[::1]x", false},
		{"[::1]:http", false},
		{"localhost:http", false},
		{"localhost:123456", false},
		{"localhost:8080:1", false},
		{"localhost..", false},
		{".localhost", false},
		{"a..localhost", false},
		{"a_b.localhost", false},
		{"", false},
		{noHost, false},
	} {
		origin := http.Header{"Origin": {"http://" + tc.host}, "Sec-Fetch-Site": {"same-origin"}}
		reqs := []struct {
			method, target string
			h              http.Header
			want           int
		}{
			{"GET", "/api/events", nil, 200},
			{"GET", "/api/events/" + first.ID, nil, 200},
			{"POST", "/api/destinations/billing/pause", origin, 200},
			{"POST", "/api/destinations/billing/resume", origin, 200},
			{"GET", "/", nil, 200},
			{"GET", "/events", nil, 200},
			{"POST", "/destinations/billing/pause", origin, 303},
			{"POST", "/destinations/billing/resume", origin, 303},
			{"GET", "/metrics", nil, 200},
			{"GET", "/api/nope", nil, 404},
		}
		for _, rq := range reqs {
			r := rawRequest(t, addr, rq.method, rq.target, tc.host, rq.h, nil)
			what := fmt.Sprintf("Host %q: %s %s", tc.host, rq.method, rq.target)
			if tc.ok {
				if r.code != rq.want {
					t.Errorf("%s: %d, want %d; %s", what, r.code, rq.want, r.body)
				}
				continue
			}
			if r.code != http.StatusMisdirectedRequest || !strings.Contains(r.body, "no admin_token") {
				t.Errorf("%s: %d %q, want 421 naming admin_token", what, r.code, r.body)
			}
			if strings.Contains(r.body, first.ID) || strings.Contains(r.body, "billing") || strings.Contains(r.body, "anyhook_") {
				t.Errorf("%s: the refusal leaks: %s", what, r.body)
			}
			if strings.HasPrefix(rq.target, "/api/") && (!strings.HasPrefix(r.header.Get("Content-Type"), "application/json") ||
				!strings.Contains(r.body, `"code":"host_not_allowed"`)) {
				t.Errorf("%s: %s %s, want the API's JSON error host_not_allowed", what, r.header.Get("Content-Type"), r.body)
			}
		}
		if paused, err := g.Store().Paused(t.Context()); err != nil || paused["billing"] {
			t.Fatalf("Host %q: billing paused = %v (%v), want resumed", tc.host, paused["billing"], err)
		}

		// Ingest and the probes are not the admin surface: providers send
		// their own Host.
		for _, probe := range []string{"/healthz", "/readyz"} {
			if r := rawRequest(t, addr, "GET", probe, tc.host, nil, nil); r.code != 200 {
				t.Errorf("Host %q: GET %s: %d, want 200", tc.host, probe, r.code)
			}
		}
		req := stripeRequest(t, base+"/webhooks/stripe", stripeSecret, body, time.Now())
		if r := rawRequest(t, addr, "POST", "/webhooks/stripe", tc.host, req.Header, body); r.code != 200 || !strings.Contains(r.body, first.ID) {
			t.Errorf("Host %q: ingest: %d %s, want 200 duplicate of %s", tc.host, r.code, r.body, first.ID)
		}
	}
}

// TestTokenHostsUnrestricted: with an admin token, the token guards the
// admin surface and any Host is served (a gateway behind a proxy under
// its public name).
func TestTokenHostsUnrestricted(t *testing.T) {
	t.Parallel()
	e := setup(t, sinktest.New(t), "")
	addr := strings.TrimPrefix(e.url, "http://")
	bearer := http.Header{"Authorization": {"Bearer test-token"}}
	for _, host := range []string{"hooks.example.com", "rebind.attacker.example:8080", "10.0.0.1", "127.0.0.1", ""} {
		for _, tc := range []struct {
			method, target string
			h              http.Header
			want           int
		}{
			{"GET", "/api/events", bearer, 200},
			{"GET", "/api/events", nil, 401},
			{"GET", "/metrics", bearer, 200},
			{"GET", "/metrics", nil, 401},
			{"GET", "/events", nil, 303}, // to the login form
			{"GET", "/login", nil, 200},
			{"GET", "/healthz", nil, 200},
		} {
			if r := rawRequest(t, addr, tc.method, tc.target, host, tc.h, nil); r.code != tc.want {
				t.Errorf("Host %q: %s %s: %d, want %d; %s", host, tc.method, tc.target, r.code, tc.want, r.body)
			}
		}
	}
}
