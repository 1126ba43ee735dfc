package gateway_test

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/certs/certstest"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/proxytest"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/syncio"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// TestHeaderAuthSecretsStayOut runs a gateway whose destinations carry
// static headers, a bearer token, basic auth and OAuth2 client
// credentials, with a proxy URL holding a password. Each destination gets
// its credential; the destinations answer by echoing it and then fail
// for good, and a token endpoint echoes the client secret. No secret may
// appear in the event's stored headers, the attempts, the API (which
// names the kinds and header names), the dashboard's pages, the log or
// the alerts.
func TestHeaderAuthSecretsStayOut(t *testing.T) {
	t.Parallel()
	const (
		apiKey       = "E2E-header-api-key-111"
		bearer       = "E2E-bearer-token-222"
		password     = "E2E-basic-password-333"
		clientSecret = "E2E-client-secret-444"
		badSecret    = "E2E-bad-client-secret-555"
		proxyPW      = "E2E-proxy-password-666"
		incomingAuth = "E2E-incoming-authorization-777"
	)
	// The incoming Authorization is the provider's, stored with the event
	// as received; it must not reach a destination.
	secrets := []string{apiKey, bearer, password, clientSecret, badSecret, proxyPW}
	var issued atomic.Int32
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, secret, _ := r.BasicAuth()
		w.Header().Set("Content-Type", "application/json")
		if secret != clientSecret {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":"invalid_client","error_description":"bad secret %s"}`, secret)
			return
		}
		fmt.Fprintf(w, `{"access_token":"E2E-access-token-%d","token_type":"Bearer","expires_in":3600}`, issued.Add(1))
	}))
	t.Cleanup(tokens.Close)
	secrets = append(secrets, "E2E-access-token-1", "E2E-access-token-2")
	// Every destination refuses, echoing what it was sent, as careless
	// handlers do.
	var mu sync.Mutex
	byPath := map[string]http.Header{}
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		byPath[r.URL.Path] = r.Header.Clone()
		mu.Unlock()
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "refused: %s %s", r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
	}))
	t.Cleanup(sink.Close)
	alerts := sinktest.New(t)
	keyFile := filepath.Join(t.TempDir(), "api-key")
	if err := os.WriteFile(keyFile, []byte(apiKey), 0o600); err != nil {
		t.Fatal(err)
	}

	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:anyhook.db
delivery: {poll_interval: 20ms, grace: 1s}
alert_delivery_dead: true
alerts:
  - webhook: %[1]s/alerts
sources:
  stripe: {provider: stripe, secrets: [%[2]s]}
destinations:
  bearer:
    url: %[3]s/bearer
    sources: [stripe]
    max_attempts: 1
    headers: {X-Api-Key: "${file:%[10]s}"}
    auth: {bearer: %[4]s}
  basic:
    url: %[3]s/basic
    sources: [stripe]
    max_attempts: 1
    auth: {basic: {user: svc, password: %[5]s}}
  oauth:
    url: %[3]s/oauth
    sources: [stripe]
    max_attempts: 1
    auth:
      oauth2: {token_url: %[6]s/token, client_id: id, client_secret: %[7]s, scopes: [hooks]}
  badoauth:
    url: %[3]s/badoauth
    sources: [stripe]
    max_attempts: 1
    auth:
      oauth2: {token_url: "%[6]s/token?audience=x", client_id: id, client_secret: %[8]s}
  proxied:
    url: %[3]s/proxied
    sources: [stripe]
    max_attempts: 1
    proxy: "http://user:%[9]s@127.0.0.1:1"
`, alerts.URL, stripeSecret, sink.URL, bearer, password, tokens.URL, clientSecret, badSecret, proxyPW, keyFile)
	var logs syncio.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	base, g := gatewaytest.Start(t, yaml, gateway.Options{Logger: log})

	body := []byte(`{"id":"evt_creds","object":"event","type":"payment_intent.succeeded","created":1700000000,"data":{"object":{"id":"pi_1"}}}`)
	req := stripeRequest(t, base+"/webhooks/stripe", stripeSecret, body, time.Now())
	req.Header.Set("Authorization", "Bearer "+incomingAuth)
	a := do(t, req)
	if a.Code != http.StatusOK {
		t.Fatalf("ingest: %+v", a)
	}
	ev := testwait.Value(t, "every delivery dead", func() (anyhook.Event, error) {
		ev, err := g.Store().Event(t.Context(), a.ID)
		if err != nil {
			return ev, err
		}
		for _, d := range ev.Deliveries {
			if d.Status != anyhook.StatusDead {
				return ev, fmt.Errorf("%s is %s", d.Destination, d.Status)
			}
		}
		return ev, nil
	})

	// Each destination got its own credential, and only its own.
	mu.Lock()
	defer mu.Unlock()
	for path, want := range map[string]string{
		"/bearer": "Bearer " + bearer, "/basic": "Basic c3ZjOkUyRS1iYXNpYy1wYXNzd29yZC0zMzM=", "/oauth": "Bearer E2E-access-token-2", // refused, so fetched again once
	} {
		if got := byPath[path].Get("Authorization"); got != want {
			t.Errorf("%s got Authorization %q, want %q", path, got, want)
		}
	}
	if k := byPath["/bearer"].Get("X-Api-Key"); k != apiKey {
		t.Errorf("/bearer got X-Api-Key %q", k)
	}
	for path, h := range byPath {
		if strings.Contains(h.Get("Authorization"), incomingAuth) {
			t.Errorf("%s got the provider's Authorization", path)
		}
	}
	if _, ok := byPath["/badoauth"]; ok {
		t.Errorf("/badoauth was sent a request without a token")
	}

	// Stored: the event's headers and the attempts.
	for k, vs := range ev.Header {
		for _, v := range vs {
			for _, s := range secrets {
				if strings.Contains(v, s) {
					t.Errorf("the event's stored header %s holds %s", k, s)
				}
			}
		}
	}
	alerts.Await(t, "five delivery_dead alerts", func(rs []sinktest.Request) bool {
		n := 0
		for _, r := range rs {
			if strings.Contains(string(r.Body), `"kind":"delivery_dead"`) {
				n++
			}
		}
		return n >= 5
	})

	var seen []string
	look := func(where string, b []byte) {
		for _, s := range secrets {
			if strings.Contains(string(b), s) {
				t.Errorf("%s holds %s", where, s)
			}
		}
		seen = append(seen, where)
	}
	get := func(path string) []byte {
		t.Helper()
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
		}
		return b
	}
	for _, p := range []string{"/api/events/" + a.ID, "/api/deliveries?limit=50", "/api/destinations", "/api/incidents",
		"/events/" + a.ID, "/deliveries", "/destinations", "/incidents", "/"} {
		look("GET "+p, get(p))
	}
	for i, r := range alerts.Requests() {
		look(fmt.Sprintf("alert %d", i), r.Body)
	}
	look("the log", []byte(logs.String()))

	// The API says what each destination carries, by kind and name.
	var dests struct {
		Items []struct {
			Name       string
			Auth       string
			Headers    []string
			ClientCert bool `json:"client_cert"`
			Proxy      string
		}
	}
	if err := json.Unmarshal(get("/api/destinations"), &dests); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"bearer": "bearer [X-Api-Key] ", "basic": "basic [] ", "oauth": "oauth2 [] ", "badoauth": "oauth2 [] ", "proxied": " [] http://127.0.0.1:1"}
	for _, d := range dests.Items {
		if got := fmt.Sprintf("%s %v %s", d.Auth, d.Headers, d.Proxy); got != want[d.Name] {
			t.Errorf("/api/destinations says %s: %q, want %q", d.Name, got, want[d.Name])
		}
	}
	// The attempts say why, without the secrets: each is read back whole.
	ev, err := g.Store().Event(t.Context(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ev.Deliveries {
		for _, at := range d.Attempts {
			look("the attempt of "+d.Destination, []byte(at.Error+" "+string(at.ResponseBody)))
		}
		if d.Destination == "badoauth" && (len(d.Attempts) != 1 || !strings.Contains(d.Attempts[0].Error, "HTTP 401 (invalid_client)")) {
			t.Errorf("badoauth's attempts: %+v", d.Attempts)
		}
		if d.Destination == "bearer" && (len(d.Attempts) != 1 || !strings.Contains(string(d.Attempts[0].ResponseBody), "refused: Bearer <redacted> <redacted>")) {
			t.Errorf("bearer's attempts: %+v", d.Attempts)
		}
	}
	if len(seen) < 10 {
		t.Errorf("looked at %d places", len(seen))
	}
}

// TestMTLSProxyFromConfig: a destination's tls (client certificate and
// ca_file) and proxy, as a config file gives them, reach a destination
// that requires the certificate, through the proxy; the API says so
// without the proxy's password.
func TestMTLSProxyFromConfig(t *testing.T) {
	t.Parallel()
	ca := certstest.NewCA(t, "e2e CA")
	leaf := ca.Server(t)
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	sink := sinktest.Start(t, sinktest.Options{TLS: &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}})
	dir := t.TempDir()
	ca.ClientLeaf(t, "anyhook").Write(t, dir, "client.crt", "client.key")
	certstest.WriteFile(t, filepath.Join(dir, "ca.pem"), ca.PEM)
	proxy := proxytest.New(t, "anyhook", "E2E-proxy-password-888")
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:anyhook.db
delivery: {poll_interval: 20ms, grace: 1s}
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  internal:
    url: %s/in
    sources: [stripe]
    tls: {client_cert_file: %s, client_key_file: %s, ca_file: %s}
    proxy: "%s"
`, stripeSecret, sink.URL, filepath.Join(dir, "client.crt"), filepath.Join(dir, "client.key"), filepath.Join(dir, "ca.pem"), proxy.URL("anyhook", "E2E-proxy-password-888"))
	base, g := gatewaytest.Start(t, yaml, gateway.Options{})
	e := &env{url: base, gw: g, store: g.Store()}
	a := e.sendStripe(t, "evt_mtls")
	e.waitStatus(t, a.ID, anyhook.StatusDelivered)
	if hosts := proxy.Hosts(); len(hosts) != 1 || hosts[0] != strings.TrimPrefix(sink.URL, "https://") {
		t.Errorf("the proxy was asked to CONNECT to %v", hosts)
	}
	var dests struct {
		Items []struct {
			ClientCert bool `json:"client_cert"`
			Proxy      string
		}
	}
	code, b := gatewaytest.Admin(t, "GET", base+"/api/destinations", "")
	if err := json.Unmarshal(b, &dests); code != http.StatusOK || err != nil || len(dests.Items) != 1 {
		t.Fatalf("/api/destinations: %d %s", code, b)
	}
	if d := dests.Items[0]; !d.ClientCert || d.Proxy != strings.TrimSuffix(proxy.Server.URL, "/") || strings.Contains(string(b), "E2E-proxy-password") {
		t.Errorf("/api/destinations: %s", b)
	}
}
