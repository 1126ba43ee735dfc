package delivery_test

import (
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/certs"
	"github.com/anyhook/anyhook/internal/certs/certstest"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/incident"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/testkit/proxytest"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/testclock"
)

// noSecret fails t when any of secrets is in the attempt's stored error
// or answer.
func noSecret(t *testing.T, o store.Outcome, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		if strings.Contains(o.Result.Error, s) || strings.Contains(string(o.Result.ResponseBody), s) {
			t.Errorf("secret %q stored with the attempt: error %q, answer %q", s, o.Result.Error, o.Result.ResponseBody)
		}
	}
}

// TestAuthHeaderBearerBasic: the destination sees its static headers and
// its credential, set over the event's own headers of those names; the
// stored event is left as it was; and a destination that echoes the
// credential in its answer does not get it stored.
func TestAuthHeaderBearerBasic(t *testing.T) {
	t.Parallel()
	const (
		bearer   = "BEARER-secret-token-123"
		password = "BASIC-secret-password-456"
		apiKey   = "HEADER-secret-key-789"
	)
	sink := sinktest.New(t)
	// A destination whose answers echo what it got.
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "refused %s with %s", r.Header.Get("Authorization"), r.Header.Get("X-Api-Key"))
	}))
	t.Cleanup(echo.Close)
	basic := base64.StdEncoding.EncodeToString([]byte("svc:" + password))
	for _, tc := range []struct {
		name, want string
		auth       *delivery.Auth
	}{
		{"bearer", "Bearer " + bearer, &delivery.Auth{Bearer: bearer}},
		{"basic", "Basic " + basic, &delivery.Auth{Basic: &delivery.BasicAuth{User: "svc", Password: password}}},
	} {
		c := claim("dest")
		c.Event.Header.Set("X-Api-Key", "from-the-provider")
		d := delivery.Destination{URL: sink.URL, Auth: tc.auth, Headers: http.Header{"X-Api-Key": {apiKey}}}
		attemptClaim(t, withDefaults(d), nil, c)
		got := sink.Next(t)
		if a := got.Header.Get("Authorization"); a != tc.want {
			t.Errorf("%s: Authorization %q, want %q", tc.name, a, tc.want)
		}
		if k := got.Header.Values("X-Api-Key"); len(k) != 1 || k[0] != apiKey {
			t.Errorf("%s: X-Api-Key %q, want the destination's own", tc.name, k)
		}
		if c.Event.Header.Get("Authorization") != "" || c.Event.Header.Get("X-Api-Key") != "from-the-provider" {
			t.Errorf("%s: the event's headers changed: %v", tc.name, c.Event.Header)
		}
		d.URL = echo.URL
		o := attempt(t, d, nil)
		if o.Result.StatusCode != http.StatusUnauthorized || !strings.Contains(string(o.Result.ResponseBody), "<redacted>") {
			t.Errorf("%s: echoed answer %d %q, want a 401 with the credential redacted", tc.name, o.Result.StatusCode, o.Result.ResponseBody)
		}
		noSecret(t, o, bearer, password, basic, apiKey)
	}
}

func withDefaults(d delivery.Destination) delivery.Destination {
	d.Name, d.Timeout, d.MaxAttempts, d.Initial, d.Max = "dest", 30*time.Second, 3, time.Second, time.Second
	return d
}

// tokenServer is an OAuth2 token endpoint on 127.0.0.1 that issues
// tok-1, tok-2, … for client "id" with secret "secret", each valid for
// expiresIn seconds, and counts what it issued.
type tokenServer struct {
	*httptest.Server
	issued    atomic.Int32
	expiresIn int
}

const clientSecret = "OAUTH-client-secret-abc"

func newTokenServer(t *testing.T, expiresIn int) *tokenServer {
	ts := &tokenServer{expiresIn: expiresIn}
	ts.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if err := r.ParseForm(); err != nil || r.Form.Get("grant_type") != "client_credentials" {
			http.Error(w, "bad grant", http.StatusBadRequest)
			return
		}
		if !ok {
			id, secret = r.Form.Get("client_id"), r.Form.Get("client_secret")
		}
		if id != "id" || secret != clientSecret {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			// Echoes what it was sent, as careless servers do.
			json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": "unknown secret " + secret})
			return
		}
		n := ts.issued.Add(1)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": fmt.Sprintf("tok-%d-OAUTHTOKEN", n), "token_type": "Bearer", "expires_in": ts.expiresIn, "scope": r.Form.Get("scope")})
	}))
	t.Cleanup(ts.Close)
	return ts
}

func oauthDest(url, tokenURL string) delivery.Destination {
	d := dest(url, 8)
	d.Auth = &delivery.Auth{OAuth2: &delivery.OAuth2{TokenURL: tokenURL, ClientID: "id", ClientSecret: clientSecret, Scopes: []string{"hooks.write"}}}
	return d
}

// TestOAuthOneTokenManyDeliveries: deliveries sent at once all wait for
// the one token fetched, and use it.
func TestOAuthOneTokenManyDeliveries(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, 3600)
	sink := sinktest.New(t)
	st := openSQLite(t)
	e := delivery.New(st, delivery.Options{PollInterval: 10 * time.Millisecond, Destinations: []delivery.Destination{oauthDest(sink.URL, ts.URL)}})
	evs := newEvents(40, "dest")
	if _, err := st.Ingest(t.Context(), evs); err != nil {
		t.Fatal(err)
	}
	e.Start(t.Context())
	t.Cleanup(func() { e.Stop(time.Second) })
	waitDelivered(t, st, evs)
	if n := ts.issued.Load(); n != 1 {
		t.Errorf("%d tokens fetched for %d deliveries, want 1", n, len(evs))
	}
	for _, r := range sink.Requests() {
		if a := r.Header.Get("Authorization"); a != "Bearer tok-1-OAUTHTOKEN" {
			t.Fatalf("Authorization %q, want the one token", a)
		}
	}
}

// TestOAuthRefreshBeforeExpiry: by the engine's clock, a token is used
// until shortly before it expires, then a new one is fetched.
func TestOAuthRefreshBeforeExpiry(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, 120) // fetched again after 60s
	sink := sinktest.New(t)
	st := openSQLite(t)
	clock := testclock.New(time.Now())
	e := delivery.New(st, delivery.Options{PollInterval: 10 * time.Millisecond, Now: clock.Now, Destinations: []delivery.Destination{oauthDest(sink.URL, ts.URL)}})
	e.Start(t.Context())
	t.Cleanup(func() { e.Stop(time.Second) })
	send := func(i int, want string) {
		t.Helper()
		evs := newEvents(1, "dest")
		evs[0].Event.DedupKey = fmt.Sprint("k", i)
		if _, err := st.Ingest(t.Context(), evs); err != nil {
			t.Fatal(err)
		}
		e.Wake()
		if a := sink.Next(t).Header.Get("Authorization"); a != want {
			t.Fatalf("delivery %d: Authorization %q, want %q", i, a, want)
		}
		waitDelivered(t, st, evs)
	}
	send(0, "Bearer tok-1-OAUTHTOKEN")
	clock.Add(50 * time.Second)
	send(1, "Bearer tok-1-OAUTHTOKEN")
	clock.Add(15 * time.Second) // 65s: within the last half of its life
	send(2, "Bearer tok-2-OAUTHTOKEN")
	if n := ts.issued.Load(); n != 2 {
		t.Errorf("%d tokens fetched, want 2", n)
	}
}

// TestOAuth401RefreshesOnce: a destination that refuses the token makes
// one more request with a new one, whose answer is the attempt's; a
// destination that refuses every token gets two requests, not more.
func TestOAuth401RefreshesOnce(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, 3600)
	sink := sinktest.Start(t, sinktest.Options{Answer: func(r *http.Request, _ []byte) int {
		if r.Header.Get("Authorization") == "Bearer tok-1-OAUTHTOKEN" { // revoked
			return http.StatusUnauthorized
		}
		return http.StatusOK
	}})
	d := withDefaults(oauthDest(sink.URL, ts.URL))
	if o := attempt(t, d, nil); o.Status != anyhook.StatusDelivered {
		t.Fatalf("status %s (%s), want delivered with the second token", o.Status, o.Result.Error)
	}
	if n, m := ts.issued.Load(), len(sink.Requests()); n != 2 || m != 2 {
		t.Errorf("%d tokens, %d requests; want 2 and 2", n, m)
	}

	ts2 := newTokenServer(t, 3600)
	never := sinktest.Start(t, sinktest.Options{Script: []int{401, 401, 401, 401}})
	o := attempt(t, withDefaults(oauthDest(never.URL, ts2.URL)), nil)
	if o.Status != anyhook.StatusPending || o.Result.StatusCode != http.StatusUnauthorized {
		t.Errorf("status %s code %d, want a failed attempt answered 401", o.Status, o.Result.StatusCode)
	}
	if n, m := ts2.issued.Load(), len(never.Requests()); n != 2 || m != 2 {
		t.Errorf("%d tokens, %d requests; want 2 and 2", n, m)
	}
}

// TestOAuth401Concurrent: deliveries refused the same token at once make
// one fetch between them.
func TestOAuth401Concurrent(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, 3600)
	sink := sinktest.Start(t, sinktest.Options{Answer: func(r *http.Request, _ []byte) int {
		if r.Header.Get("Authorization") == "Bearer tok-1-OAUTHTOKEN" {
			return http.StatusUnauthorized
		}
		return http.StatusOK
	}})
	st := openSQLite(t)
	e := delivery.New(st, delivery.Options{PollInterval: 10 * time.Millisecond, Destinations: []delivery.Destination{oauthDest(sink.URL, ts.URL)}})
	evs := newEvents(30, "dest")
	if _, err := st.Ingest(t.Context(), evs); err != nil {
		t.Fatal(err)
	}
	e.Start(t.Context())
	t.Cleanup(func() { e.Stop(time.Second) })
	waitDelivered(t, st, evs)
	if n := ts.issued.Load(); n != 2 {
		t.Errorf("%d tokens fetched, want 2: the first, and one after the 401s", n)
	}
}

// TestOAuthErrorsKeepSecrets: a token endpoint that echoes the client
// secret in its error, and a token URL holding a secret that cannot be
// reached, fail the attempt (not sent) without either in its error.
func TestOAuthErrorsKeepSecrets(t *testing.T) {
	t.Parallel()
	ts := newTokenServer(t, 3600)
	sink := sinktest.New(t)
	d := withDefaults(oauthDest(sink.URL, ts.URL))
	d.Auth.OAuth2.ClientSecret = "WRONG-secret-echoed-back"
	o := attempt(t, d, nil)
	if o.Result.Outcome != anyhook.OutcomeNotSent || !strings.Contains(o.Result.Error, "HTTP 401 (invalid_client)") {
		t.Errorf("outcome %s, error %q: want not sent, saying the token endpoint answered 401 invalid_client", o.Result.Outcome, o.Result.Error)
	}
	noSecret(t, o, "WRONG-secret-echoed-back")
	if k := incident.KindOf(o.Result); k != incident.KindToken {
		t.Errorf("kind %q, want token", k)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	d = withDefaults(oauthDest(sink.URL, "http://"+closed+"/token?key=URL-secret-in-query"))
	o = attempt(t, d, nil)
	if o.Result.Outcome != anyhook.OutcomeNotSent || !strings.Contains(o.Result.Error, "connection refused") {
		t.Errorf("outcome %s, error %q: want not sent, connection refused", o.Result.Outcome, o.Result.Error)
	}
	noSecret(t, o, "URL-secret-in-query", clientSecret)
	if len(sink.Requests()) != 0 {
		t.Errorf("the destination got %d requests without a token", len(sink.Requests()))
	}
}

// mtlsSink is an HTTPS sink on 127.0.0.1 that requires a client
// certificate of ca and records the serial of each it was shown. It
// closes each connection after its answer, so a new certificate is seen
// at the next request.
func mtlsSink(t *testing.T, ca *certstest.CA) (*sinktest.Sink, func() []*big.Int) {
	leaf := ca.Server(t)
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var serials []*big.Int
	sink := sinktest.Start(t, sinktest.Options{TLS: &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientCAs:    ca.Pool(),
		ClientAuth:   tls.RequireAndVerifyClientCert,
		VerifyConnection: func(cs tls.ConnectionState) error {
			mu.Lock()
			defer mu.Unlock()
			serials = append(serials, cs.PeerCertificates[0].SerialNumber)
			return nil
		},
	}})
	sink.Config.SetKeepAlivesEnabled(false)
	return sink, func() []*big.Int {
		mu.Lock()
		defer mu.Unlock()
		return append([]*big.Int(nil), serials...)
	}
}

// TestMTLSClientCertReloaded: a destination that requires a client
// certificate takes the delivery with one, refuses it (kind tls, not
// sent) without; replacing the certificate files makes the next
// connection use the new certificate, without a restart.
func TestMTLSClientCertReloaded(t *testing.T) {
	t.Parallel()
	ca := certstest.NewCA(t, "mtls test CA")
	sink, serials := mtlsSink(t, ca)
	dir := t.TempDir()
	first := ca.ClientLeaf(t, "anyhook")
	first.Write(t, dir, "client.pem", "client.key")
	tc, err := certs.ClientConfig(certs.ClientOptions{CertFile: filepath.Join(dir, "client.pem"), KeyFile: filepath.Join(dir, "client.key"), RootCAs: ca.Pool()})
	if err != nil {
		t.Fatal(err)
	}
	d := withDefaults(delivery.Destination{URL: sink.URL, TLS: tc})
	// One claim at a time: the second is handed out after the files change.
	st := newFakeStore(claim("dest"))
	second := claim("dest")
	second.Delivery.ID = "d2"
	e := delivery.New(st, delivery.Options{Destinations: []delivery.Destination{d}, PollInterval: 10 * time.Millisecond})
	e.Start(t.Context())
	t.Cleanup(func() { e.Stop(time.Second) })
	if o := <-st.outcomes; o.Status != anyhook.StatusDelivered {
		t.Fatalf("with the certificate: %s %q", o.Status, o.Result.Error)
	}
	if s := serials(); len(s) != 1 || s[0].Cmp(first.Serial) != 0 {
		t.Fatalf("the destination saw serials %v, want %v", s, first.Serial)
	}

	renewed := ca.ClientLeaf(t, "anyhook")
	renewed.Write(t, dir, "client.pem", "client.key")
	st.mu.Lock()
	st.claims = append(st.claims, second)
	st.mu.Unlock()
	e.Wake()
	if o := <-st.outcomes; o.Status != anyhook.StatusDelivered {
		t.Fatalf("after renewal: %s %q", o.Status, o.Result.Error)
	}
	if s := serials(); len(s) != 2 || s[1].Cmp(renewed.Serial) != 0 {
		t.Errorf("after the files changed the destination saw serials %v, want the renewed %v last", s, renewed.Serial)
	}

	// Without a certificate: refused in the handshake.
	noCert := withDefaults(delivery.Destination{URL: sink.URL, TLS: &tls.Config{RootCAs: ca.Pool()}})
	o := attempt(t, noCert, nil)
	if o.Status == anyhook.StatusDelivered || o.Result.Outcome != anyhook.OutcomeNotSent {
		t.Fatalf("without a certificate: %s, outcome %s, %q; want a failed attempt, not sent", o.Status, o.Result.Outcome, o.Result.Error)
	}
	if k := incident.KindOf(o.Result); k != incident.KindTLS {
		t.Errorf("without a certificate: kind %q (%q), want tls", k, o.Result.Error)
	}
}

// TestProxyCONNECT: an https destination with a proxy of its own is
// reached through it (the proxy sees the CONNECT, with the credentials
// of the proxy URL); a proxy that refuses them fails the attempt without
// its password in the error.
func TestProxyCONNECT(t *testing.T) {
	t.Parallel()
	ca := certstest.NewCA(t, "proxy test CA")
	leaf := ca.Server(t)
	cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	sink := sinktest.Start(t, sinktest.Options{TLS: &tls.Config{Certificates: []tls.Certificate{cert}}})
	proxy := proxytest.New(t, "p", "PROXY-password-xyz")
	pu := proxy.URL("p", "PROXY-password-xyz")
	d := withDefaults(delivery.Destination{URL: sink.URL, TLS: &tls.Config{RootCAs: ca.Pool()}, Proxy: pu})
	if o := attempt(t, d, nil); o.Status != anyhook.StatusDelivered {
		t.Fatalf("through the proxy: %s %q", o.Status, o.Result.Error)
	}
	hosts := proxy.Hosts()
	if host := strings.TrimPrefix(sink.URL, "https://"); len(hosts) != 1 || hosts[0] != host {
		t.Errorf("the proxy was asked to CONNECT to %v, want [%s]", hosts, host)
	}

	d.Proxy = proxy.URL("p", "WRONG-proxy-password")
	o := attempt(t, d, nil)
	if o.Status == anyhook.StatusDelivered || o.Result.Outcome != anyhook.OutcomeNotSent {
		t.Errorf("with a wrong proxy password: %s, outcome %s", o.Status, o.Result.Outcome)
	}
	noSecret(t, o, "WRONG-proxy-password")
	if len(sink.Requests()) != 1 {
		t.Errorf("the destination got %d requests, want 1", len(sink.Requests()))
	}
}

// TestOAuthTokenThroughMTLSAndProxy: the token endpoint is reached as the
// destination is: through its proxy, showing its client certificate.
func TestOAuthTokenThroughMTLSAndProxy(t *testing.T) {
	t.Parallel()
	ca := certstest.NewCA(t, "token test CA")
	sink, _ := mtlsSink(t, ca)
	ts := newTokenServer(t, 3600)
	ts.Close() // started again over TLS, requiring the client certificate
	ts.Server = httptest.NewUnstartedServer(ts.Config.Handler)
	leaf := ca.Server(t)
	cert, _ := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	dir := t.TempDir()
	ca.ClientLeaf(t, "anyhook").Write(t, dir, "c.pem", "c.key")
	tc, err := certs.ClientConfig(certs.ClientOptions{CertFile: filepath.Join(dir, "c.pem"), KeyFile: filepath.Join(dir, "c.key"), RootCAs: ca.Pool()})
	if err != nil {
		t.Fatal(err)
	}
	proxy := proxytest.New(t, "p", "PROXY-password-xyz")
	d := withDefaults(oauthDest(sink.URL, ts.URL))
	d.TLS, d.Proxy = tc, proxy.URL("p", "PROXY-password-xyz")
	if o := attempt(t, d, nil); o.Status != anyhook.StatusDelivered {
		t.Fatalf("%s %q", o.Status, o.Result.Error)
	}
	if hosts := proxy.Hosts(); len(hosts) != 2 || hosts[0] != strings.TrimPrefix(ts.URL, "https://") {
		t.Errorf("the proxy was asked to CONNECT to %v, want the token endpoint, then the destination", hosts)
	}
}

// TestMTLSCAFileReloaded: a destination's ca_file is read again when it
// changes: a destination whose certificate moved to another CA is
// refused (kind tls) until the file names that CA, then delivered to,
// by the same running engine.
func TestMTLSCAFileReloaded(t *testing.T) {
	t.Parallel()
	oldCA, newCA := certstest.NewCA(t, "old CA"), certstest.NewCA(t, "new CA")
	var serving atomic.Pointer[tls.Certificate]
	serve := func(ca *certstest.CA) {
		leaf := ca.Server(t)
		cert, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
		if err != nil {
			t.Fatal(err)
		}
		serving.Store(&cert)
	}
	serve(oldCA)
	sink := sinktest.Start(t, sinktest.Options{TLS: &tls.Config{
		// Not GetCertificate: without SNI (an IP address) the server
		// would show httptest's own certificate instead.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			return &tls.Config{Certificates: []tls.Certificate{*serving.Load()}}, nil
		},
	}})
	sink.Config.SetKeepAlivesEnabled(false) // each request a new handshake
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	certstest.WriteFile(t, caFile, oldCA.PEM)
	cas, err := certs.NewCAFile(caFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	st := newFakeStore()
	e := delivery.New(st, delivery.Options{Destinations: []delivery.Destination{withDefaults(delivery.Destination{URL: sink.URL, RootCAs: cas})}, PollInterval: 10 * time.Millisecond})
	e.Start(t.Context())
	t.Cleanup(func() { e.Stop(time.Second) })
	send := func(id string) store.Outcome {
		t.Helper()
		c := claim("dest")
		c.Delivery.ID = id
		st.mu.Lock()
		st.claims = append(st.claims, c)
		st.mu.Unlock()
		e.Wake()
		select {
		case o := <-st.outcomes:
			return o
		case <-time.After(time.Minute):
			t.Fatal("no outcome")
		}
		panic("unreachable")
	}
	if o := send("d1"); o.Status != anyhook.StatusDelivered {
		t.Fatalf("with the old CA: %s %q", o.Status, o.Result.Error)
	}
	serve(newCA)
	if o := send("d2"); o.Status == anyhook.StatusDelivered || incident.KindOf(o.Result) != incident.KindTLS {
		t.Fatalf("a certificate of a CA not in ca_file: %s, kind %s (%q); want a failure of kind tls", o.Status, incident.KindOf(o.Result), o.Result.Error)
	}
	certstest.WriteFile(t, caFile, newCA.PEM)
	if o := send("d3"); o.Status != anyhook.StatusDelivered {
		t.Fatalf("after ca_file named the new CA: %s %q", o.Status, o.Result.Error)
	}
}
