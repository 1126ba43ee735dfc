package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/certs/certstest"
)

// TestServeTLSSplit runs the binary with the public deployment's shape:
// ingest over HTTPS on one listener, the admin API over HTTPS with client
// certificates on another. A Stripe event sent over HTTPS is recorded and
// listed by the admin API; the admin API is 404 on the ingest listener,
// webhooks 404 on the admin one; the admin listener refuses a client
// without a certificate; SIGTERM still exits 0.
func TestServeTLSSplit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := certstest.NewCA(t, "anyhook test CA")
	clients := certstest.NewCA(t, "admin clients")
	ca.Server(t).Write(t, dir, "ingest.crt", "ingest.key")
	ca.Server(t).Write(t, dir, "admin.crt", "admin.key")
	certstest.WriteFile(t, filepath.Join(dir, "clients.pem"), clients.PEM)
	cfg := writeConfig(t, dir, fmt.Sprintf(`
listen: 127.0.0.1:0
tls: {cert_file: ingest.crt, key_file: ingest.key}
admin:
  listen: 127.0.0.1:0
  tls: {cert_file: admin.crt, key_file: admin.key, client_ca: clients.pem}
database: sqlite:anyhook.db
admin_token: test-token
sources:
  stripe:
    provider: stripe
    secrets: [%s]
`, secret))
	p := start(t, cfg)
	// "https://127.0.0.1:P (webhooks), admin on https://127.0.0.1:Q"
	ingest, admin, ok := strings.Cut(p.url, " (webhooks), admin on ")
	if !ok || !strings.HasPrefix(ingest, "https://") || !strings.HasPrefix(admin, "https://") {
		t.Fatalf("serve printed %q; want the ingest and admin listeners, both https", p.url)
	}
	client := func(cert ...tls.Certificate) *http.Client {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: ca.Pool(), Certificates: cert}
		return &http.Client{Transport: tr, Timeout: 30 * time.Second}
	}
	ops := client(clients.Client(t, "ops"))

	body, h, err := stripeEvent("evt_tls_binary", 0)
	if err != nil {
		t.Fatal(err)
	}
	code, id, err := postEvent(client(), ingest, body, h)
	if err != nil || code != http.StatusOK || id == "" {
		t.Fatalf("POST over HTTPS: %d %q %v", code, id, err)
	}
	get := func(c *http.Client, url string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", url, nil)
		req.Header.Set("Authorization", "Bearer test-token")
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, b := get(ops, admin+"/api/events/"+id); code != http.StatusOK || !strings.Contains(b, "evt_tls_binary") {
		t.Fatalf("the event on the admin listener: %d %s", code, b)
	}
	if code, _ := get(client(), ingest+"/api/events/"+id); code != http.StatusNotFound {
		t.Errorf("the admin API on the ingest listener: %d, want 404", code)
	}
	if code, _ := get(client(), ingest+"/"); code != http.StatusNotFound {
		t.Errorf("the dashboard on the ingest listener: %d, want 404", code)
	}
	if code, _ := get(client(), ingest+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz on the ingest listener: %d, want 200", code)
	}
	if code, _, err := postEvent(ops, admin, body, h); err != nil || code != http.StatusNotFound {
		t.Errorf("a webhook on the admin listener: %d %v, want 404", code, err)
	}
	if _, err := client().Get(admin + "/healthz"); err == nil {
		t.Error("the admin listener served a client without a certificate")
	}

	p.stopExitsZero(t)
}

// TestServeTLSConfigErrors: a tls: block that cannot serve is a config
// error naming the file, the key and the line, exit 2, before anything
// listens.
func TestServeTLSConfigErrors(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct{ yaml, want string }{
		"missing key file": {"tls: {cert_file: a.crt}\n", "anyhook.yaml:3: tls.key_file: is required with cert_file"},
		"no such files":    {"tls: {cert_file: a.crt, key_file: a.key}\n", "anyhook.yaml:3: tls.cert_file: a.crt and a.key: open "},
		"client_ca on ingest": {"tls: {cert_file: a.crt, key_file: a.key, client_ca: ca.pem}\n",
			"anyhook.yaml:3: tls.client_ca: client certificates are for the admin listener"},
		"acme on admin": {"admin: {listen: 127.0.0.1:0, tls: {acme: {domains: [a.example.com]}}}\n",
			"anyhook.yaml:3: admin.tls.acme: is for the public ingest listener"},
		"acme without domains":      {"tls: {acme: {email: ops@example.com}}\n", "anyhook.yaml:3: tls.acme.domains: at least one domain name is required"},
		"acme by IP":                {"tls:\n  acme:\n    domains: [203.0.113.7]\n", "anyhook.yaml:5: tls.acme.domains[0]: \"203.0.113.7\" is not a domain name"},
		"admin without listen":      {"admin: {tls: {cert_file: a.crt, key_file: a.key}}\n", "anyhook.yaml:3: admin.listen: is required in admin:"},
		"admin on listen's address": {"admin: {listen: 127.0.0.1:8080}\n", "admin.listen: is listen's address too"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			if strings.Contains(c.yaml, "a.crt") && name != "no such files" && name != "missing key file" {
				ca := certstest.NewCA(t, "ca")
				ca.Server(t).Write(t, dir, "a.crt", "a.key")
				certstest.WriteFile(t, filepath.Join(dir, "ca.pem"), ca.PEM)
			}
			listen := "127.0.0.1:0"
			if strings.Contains(c.yaml, "8080") {
				listen = "127.0.0.1:8080"
			}
			cfg := writeConfig(t, dir, "listen: "+listen+"\ndatabase: sqlite:anyhook.db\n"+c.yaml+"sources: {s: {provider: stripe, secrets: [whsec_x]}}\n")
			code, _, stderr := runCmd("serve", "--config", cfg)
			if code != 2 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Fatalf("exit %d, stderr %q; want 2 and one line with %q", code, stderr, c.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "anyhook.db")); err == nil {
				t.Error("the database was created despite the config error")
			}
		})
	}
}

// TestHealthcheckOverTLS: anyhook healthcheck asks a gateway whose listen
// has tls: over https.
func TestHealthcheckOverTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	certstest.NewCA(t, "ca").Server(t).Write(t, dir, "s.crt", "s.key")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the gateway binds it again
	cfg := writeConfig(t, dir, fmt.Sprintf("listen: %s\ntls: {cert_file: s.crt, key_file: s.key}\ndatabase: sqlite:anyhook.db\nsources: {s: {provider: stripe, secrets: [whsec_x]}}\n", addr))
	start(t, cfg)
	code, out, stderr := runCmd("healthcheck", "--config", cfg)
	if code != 0 || !strings.HasPrefix(out, "ok: GET https://"+addr+"/healthz: 200") {
		t.Fatalf("healthcheck: exit %d, %q %q", code, out, stderr)
	}
}

// TestServeAdminAddressInUse: an admin.listen address in use exits 2
// naming the key, before the database is created.
func TestServeAdminAddressInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cfg := writeConfig(t, dir, fmt.Sprintf("listen: 127.0.0.1:0\nadmin:\n  listen: %s\ndatabase: sqlite:anyhook.db\nsources: {s: {provider: stripe, secrets: [whsec_x]}}\n", busy.Addr()))
	code, _, stderr := runCmd("serve", "--config", cfg)
	if code != 2 || !strings.Contains(stderr, "anyhook.yaml:3: admin.listen: ") || !strings.Contains(stderr, "address already in use") {
		t.Fatalf("exit %d, stderr %q; want 2 naming admin.listen", code, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "anyhook.db")); err == nil {
		t.Error("the database was created although admin.listen was in use")
	}
}
