package gateway_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/certs/certstest"
	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/gateway"
)

// split is a gateway started on two real listeners on 127.0.0.1.
type split struct {
	gw            *gateway.Gateway
	ingest, admin string // base URLs
	client        *http.Client
}

// startSplit writes files (name → contents) beside the config, parses
// yaml, and serves the gateway on two listeners on 127.0.0.1 (the second
// only when the config sets admin.listen), over TLS where it says so.
func startSplit(t *testing.T, yaml string, files map[string][]byte, client *http.Client) *split {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Parse(filepath.Join(dir, "anyhook.yaml"), []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(t.Context(), gateway.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	ls := gateway.Listeners{Ingest: listen()}
	if cfg.AdminSeparate() {
		ls.Admin = listen()
	}
	g.StartListeners(context.Background(), ls)
	t.Cleanup(func() { g.Stop(context.Background()) })
	ingestTLS, adminTLS := g.TLS()
	s := &split{gw: g, ingest: base(ls.Ingest, ingestTLS), client: client}
	if ls.Admin != nil {
		s.admin = base(ls.Admin, adminTLS)
	}
	if s.client == nil {
		s.client = &http.Client{}
	}
	s.client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return s
}

func base(ln net.Listener, tc *tls.Config) string {
	if tc != nil {
		return "https://" + ln.Addr().String()
	}
	return "http://" + ln.Addr().String()
}

// probe is one request to a route.
type probe struct {
	method, path string
	auth         bool // with the admin token
	stripe       bool // a signed Stripe event as the body
}

// probes are concrete requests for each pattern of the gateway's route
// table. A route added to the table without probes here fails
// TestListenerSplit, so that no route reaches a listener untested.
var probes = map[string][]probe{
	"POST /webhooks/{source}": {{method: "POST", path: "/webhooks/stripe", stripe: true}, {method: "POST", path: "/webhooks/nosuch"}},
	"/webhooks/{source}":      {{method: "GET", path: "/webhooks/stripe"}, {method: "PUT", path: "/webhooks/stripe", auth: true}},
	"/api/":                   {{method: "GET", path: "/api/events", auth: true}, {method: "GET", path: "/api/events"}, {method: "GET", path: "/api/openapi.json", auth: true}},
	"/healthz":                {{method: "GET", path: "/healthz"}},
	"/readyz":                 {{method: "GET", path: "/readyz"}},
	"GET /metrics":            {{method: "GET", path: "/metrics", auth: true}},
	"/":                       {{method: "GET", path: "/"}, {method: "GET", path: "/login"}, {method: "POST", path: "/login"}, {method: "GET", path: "/events"}, {method: "GET", path: "/assets/app.css"}},
}

// notServed is the answer of a listener to a route it does not serve:
// the mux's own 404, not a 404 of a handler (an unknown event, source or
// page), which would mean the route is served there.
const notServed = "404 page not found\n"

// do sends p and returns its status, or 0 for notServed.
func (s *split) do(t *testing.T, baseURL string, p probe) int {
	t.Helper()
	var req *http.Request
	if p.stripe {
		body := fmt.Appendf(nil, `{"id":"evt_%d","object":"event","type":"charge.succeeded","created":1700000000,"data":{"object":{"id":"ch_1"}}}`, time.Now().UnixNano())
		req = stripeRequest(t, baseURL+p.path, stripeSecret, body, time.Now())
	} else {
		var err error
		req, err = http.NewRequest(p.method, baseURL+p.path, nil)
		if err != nil {
			t.Fatal(err)
		}
	}
	if p.auth {
		req.Header.Set("Authorization", "Bearer test-token")
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s%s: %v", p.method, baseURL, p.path, err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound && string(body) == notServed {
		return 0
	}
	return resp.StatusCode
}

const splitYAML = `
listen: 127.0.0.1:0
database: sqlite:anyhook.db
admin_token: test-token
%s
sources:
  stripe:
    provider: stripe
    secrets: [` + stripeSecret + `]
`

// TestListenerSplit probes every route of the gateway's route table on
// both listeners over real HTTP: each answers on its own listener and 404
// on the other; every path of the admin API's OpenAPI document and the
// dashboard's pages answer 404 on the ingest listener, and webhook paths
// 404 on the admin listener. Without admin.listen, one listener serves
// every route.
func TestListenerSplit(t *testing.T) {
	t.Parallel()
	s := startSplit(t, fmt.Sprintf(splitYAML, "admin: {listen: 127.0.0.1:0}"), nil, nil)
	one := startSplit(t, fmt.Sprintf(splitYAML, ""), nil, nil)
	if one.gw.AdminHandler() != nil {
		t.Fatal("an admin handler without admin.listen")
	}

	routes := s.gw.Routes()
	if len(routes) == 0 {
		t.Fatal("empty route table")
	}
	seen := map[string]bool{}
	for _, r := range routes {
		seen[r.Pattern] = true
		ps, ok := probes[r.Pattern]
		if !ok {
			t.Errorf("route %q (%s) has no probes in this test: add some", r.Pattern, r.On)
			continue
		}
		for _, p := range ps {
			onIngest, onAdmin := s.do(t, s.ingest, p), s.do(t, s.admin, p)
			combined := one.do(t, one.ingest, p)
			name := fmt.Sprintf("%s %s (route %q, %s)", p.method, p.path, r.Pattern, r.On)
			served := func(code int) bool { return code != 0 }
			switch r.On {
			case gateway.OnIngest:
				if p.stripe && onIngest != http.StatusOK {
					t.Errorf("%s: ingest listener answered %d, want 200", name, onIngest)
				}
				if served(onAdmin) {
					t.Errorf("%s: admin listener answered %d, want its 404", name, onAdmin)
				}
			case gateway.OnAdmin:
				if !served(onAdmin) {
					t.Errorf("%s: admin listener answered %d", name, onAdmin)
				}
				if served(onIngest) {
					t.Errorf("%s: ingest listener answered %d, want its 404", name, onIngest)
				}
			case gateway.OnBoth:
				if !served(onIngest) || !served(onAdmin) {
					t.Errorf("%s: ingest %d, admin %d; want both served", name, onIngest, onAdmin)
				}
			default:
				t.Errorf("route %q: unknown listener %q", r.Pattern, r.On)
			}
			if !served(combined) {
				t.Errorf("%s: without admin.listen the one listener answered %d", name, combined)
			}
		}
	}
	for pattern := range probes {
		if !seen[pattern] {
			t.Errorf("probes for %q, which the route table no longer has", pattern)
		}
	}

	// Every path of the OpenAPI document, with its parameters filled in,
	// by every method it lists, is 404 on the ingest listener (with the
	// token too): /healthz alone is served there.
	data, err := os.ReadFile("../admin/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	param := regexp.MustCompile(`\{[^}]+\}`)
	for path, ops := range doc.Paths {
		concrete := param.ReplaceAllString(path, "x")
		for method := range ops {
			m := strings.ToUpper(method)
			if m != "GET" && m != "POST" && m != "PUT" && m != "DELETE" && m != "PATCH" {
				continue
			}
			p := probe{method: m, path: concrete, auth: true}
			code := s.do(t, s.ingest, p)
			if path == "/healthz" {
				if code != http.StatusOK {
					t.Errorf("%s %s on the ingest listener: %d, want 200", m, concrete, code)
				}
				continue
			}
			if code != 0 {
				t.Errorf("%s %s on the ingest listener: %d, want its 404", m, concrete, code)
			}
			if code := s.do(t, s.admin, p); code == 0 {
				t.Errorf("%s %s on the admin listener: not served", m, concrete)
			}
		}
	}
	// The dashboard's pages and actions, the login page and paths no
	// route names: 404 on the ingest listener, no redirect to a login.
	for _, p := range []probe{
		{method: "GET", path: "/"}, {method: "GET", path: "/login"}, {method: "POST", path: "/login"}, {method: "POST", path: "/logout"},
		{method: "GET", path: "/events"}, {method: "GET", path: "/events/x"}, {method: "POST", path: "/events/x/replay"},
		{method: "GET", path: "/deliveries"}, {method: "POST", path: "/deliveries/resolve"}, {method: "POST", path: "/replay"},
		{method: "GET", path: "/destinations"}, {method: "POST", path: "/destinations/d/pause"}, {method: "GET", path: "/rejections"},
		{method: "GET", path: "/assets/app.js"}, {method: "GET", path: "/metrics"}, {method: "GET", path: "/readyz"},
		{method: "GET", path: "/nosuch"}, {method: "GET", path: "/api/"},
	} {
		if code := s.do(t, s.ingest, p); code != 0 {
			t.Errorf("%s %s on the ingest listener: %d, want its 404", p.method, p.path, code)
		}
	}
	// Webhook paths, by any method, signed or not: 404 on the admin
	// listener.
	for _, p := range []probe{
		{method: "POST", path: "/webhooks/stripe", stripe: true}, {method: "POST", path: "/webhooks/stripe"},
		{method: "GET", path: "/webhooks/stripe"}, {method: "PUT", path: "/webhooks/stripe"},
		{method: "POST", path: "/webhooks/"}, {method: "POST", path: "/webhooks/stripe/extra"},
	} {
		if code := s.do(t, s.admin, p); code != 0 {
			t.Errorf("%s %s on the admin listener: %d, want its 404", p.method, p.path, code)
		}
	}
}

// tlsClient trusts only pool and may present a client certificate.
func tlsClient(pool *tls.Config) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = pool
	tr.ForceAttemptHTTP2 = true
	return &http.Client{Transport: tr}
}

// serial is the serial of the certificate a new TLS connection to addr
// is shown.
func serial(t *testing.T, addr string, roots *tls.Config) string {
	t.Helper()
	conf := roots.Clone()
	conn, err := tls.Dial("tcp", addr, conf)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// TestTLSFromFiles serves ingest over HTTPS from certificate files made in
// the test: a Stripe event sent over HTTP/2 is verified and recorded;
// TLS 1.1 is refused; replacing the files while serving changes the
// certificate of the next connection, without a restart.
func TestTLSFromFiles(t *testing.T) {
	t.Parallel()
	ca := certstest.NewCA(t, "anyhook test CA")
	leaf := ca.Server(t)
	roots := &tls.Config{RootCAs: ca.Pool()}
	s := startSplit(t, fmt.Sprintf(splitYAML, "tls: {cert_file: server.crt, key_file: server.key}"),
		map[string][]byte{"server.crt": leaf.CertPEM, "server.key": leaf.KeyPEM}, tlsClient(roots))
	if !strings.HasPrefix(s.ingest, "https://") {
		t.Fatalf("ingest at %s, want https", s.ingest)
	}

	body := []byte(`{"id":"evt_tls_1","object":"event","type":"charge.succeeded","created":1700000000,"data":{"object":{"id":"ch_1"}}}`)
	resp, err := s.client.Do(stripeRequest(t, s.ingest+"/webhooks/stripe", stripeSecret, body, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	var a answer
	json.NewDecoder(resp.Body).Decode(&a)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || a.Status != "accepted" {
		t.Fatalf("over HTTPS: %d %+v, want 200 accepted", resp.StatusCode, a)
	}
	if resp.Proto != "HTTP/2.0" || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
		t.Errorf("protocol %s, TLS %+v; want HTTP/2 over TLS 1.2+", resp.Proto, resp.TLS)
	}
	ev, err := s.gw.Store().Event(t.Context(), a.ID)
	if err != nil || ev.DedupKey != "evt_tls_1" {
		t.Fatalf("recorded event: %+v, %v", ev, err)
	}
	// A bad signature over HTTPS is still refused.
	bad := stripeRequest(t, s.ingest+"/webhooks/stripe", "whsec_other", body, time.Now())
	if resp, err := s.client.Do(bad); err != nil || resp.StatusCode == http.StatusOK {
		t.Fatalf("bad signature over HTTPS: %v %v, want it refused", resp, err)
	}

	addr := strings.TrimPrefix(s.ingest, "https://")
	old := &tls.Config{RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS11}
	if conn, err := tls.Dial("tcp", addr, old); err == nil {
		conn.Close()
		t.Fatal("a TLS 1.1 client was served")
	}
	if got := serial(t, addr, roots); got != leaf.Serial.String() {
		t.Fatalf("serial %s, want %s", got, leaf.Serial)
	}

	// Renewal by an outside tool: new files renamed into place.
	dir := filepath.Dir(s.gw.Config().Path)
	renewed := ca.Server(t)
	renewed.Write(t, dir, "server.crt", "server.key")
	if got := serial(t, addr, roots); got != renewed.Serial.String() {
		t.Fatalf("after the files were replaced: serial %s, want the new %s", got, renewed.Serial)
	}
	// A half-written renewal (the certificate of another key): the
	// current certificate is kept.
	next := ca.Server(t)
	certstest.WriteFile(t, filepath.Join(dir, "server.crt"), next.CertPEM)
	if got := serial(t, addr, roots); got != renewed.Serial.String() {
		t.Fatalf("certificate without its key: serial %s, want the previous %s kept", got, renewed.Serial)
	}
	certstest.WriteFile(t, filepath.Join(dir, "server.key"), next.KeyPEM)
	if got := serial(t, addr, roots); got != next.Serial.String() {
		t.Fatalf("once the key followed: serial %s, want %s", got, next.Serial)
	}
}

// TestAdminClientCA serves the admin listener over HTTPS with client_ca:
// a client without a certificate, or with one of another CA, is refused
// in the handshake; one with a certificate of the configured CA is served
// (and still needs the token).
func TestAdminClientCA(t *testing.T) {
	t.Parallel()
	serverCA := certstest.NewCA(t, "server CA")
	clientCA := certstest.NewCA(t, "client CA")
	otherCA := certstest.NewCA(t, "someone else's CA")
	leaf := serverCA.Server(t)
	s := startSplit(t, fmt.Sprintf(splitYAML, "admin: {listen: 127.0.0.1:0, tls: {cert_file: admin.crt, key_file: admin.key, client_ca: clients.pem}}"),
		map[string][]byte{"admin.crt": leaf.CertPEM, "admin.key": leaf.KeyPEM, "clients.pem": clientCA.PEM}, nil)
	if !strings.HasPrefix(s.admin, "https://") || !strings.HasPrefix(s.ingest, "http://") {
		t.Fatalf("ingest %s, admin %s; want http and https", s.ingest, s.admin)
	}
	get := func(conf *tls.Config, token bool) (int, error) {
		req, _ := http.NewRequest("GET", s.admin+"/api/events", nil)
		if token {
			req.Header.Set("Authorization", "Bearer test-token")
		}
		resp, err := tlsClient(conf).Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	if code, err := get(&tls.Config{RootCAs: serverCA.Pool()}, true); err == nil {
		t.Fatalf("without a client certificate: %d, want the handshake refused", code)
	}
	other := otherCA.Client(t, "mallory")
	if code, err := get(&tls.Config{RootCAs: serverCA.Pool(), Certificates: []tls.Certificate{other}}, true); err == nil {
		t.Fatalf("with another CA's client certificate: %d, want the handshake refused", code)
	}
	good := clientCA.Client(t, "ops")
	conf := &tls.Config{RootCAs: serverCA.Pool(), Certificates: []tls.Certificate{good}}
	if code, err := get(conf, true); err != nil || code != http.StatusOK {
		t.Fatalf("with the client certificate and the token: %d %v, want 200", code, err)
	}
	if code, err := get(conf, false); err != nil || code != http.StatusUnauthorized {
		t.Fatalf("with the client certificate, no token: %d %v, want 401", code, err)
	}
	// The ingest listener asks no client certificate.
	if code := s.do(t, s.ingest, probe{method: "POST", path: "/webhooks/stripe", stripe: true}); code != http.StatusOK {
		t.Fatalf("ingest: %d, want 200", code)
	}
}

// A webhook URL opened in a browser (GET) answers 405 with Allow: POST on
// whichever listener serves ingest, never the dashboard's login page.
func TestWebhookURLOtherMethods(t *testing.T) {
	t.Parallel()
	for name, admin := range map[string]string{"one listener": "", "split": "admin: {listen: 127.0.0.1:0}"} {
		s := startSplit(t, fmt.Sprintf(splitYAML, admin), nil, nil)
		for _, method := range []string{"GET", "HEAD", "PUT", "DELETE"} {
			req, err := http.NewRequest(method, s.ingest+"/webhooks/stripe", nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := s.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "POST" || resp.Header.Get("Location") != "" {
				t.Errorf("%s: %s /webhooks/stripe = %d, Allow %q, Location %q; want 405 with Allow: POST",
					name, method, resp.StatusCode, resp.Header.Get("Allow"), resp.Header.Get("Location"))
			}
			if method == "GET" && !strings.Contains(string(body), "POST") {
				t.Errorf("%s: GET /webhooks/stripe says %q; want it to say webhooks are POSTed", name, body)
			}
		}
	}
}
