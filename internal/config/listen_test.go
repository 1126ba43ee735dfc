package config

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/anyhook/anyhook/internal/certs/certstest"
)

// listenDir is a directory with a certificate pair and a CA file, as the
// tls: keys name them.
func listenDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ca := certstest.NewCA(t, "ca")
	ca.Server(t).Write(t, dir, "s.crt", "s.key")
	certstest.WriteFile(t, filepath.Join(dir, "ca.pem"), ca.PEM)
	certstest.WriteFile(t, filepath.Join(dir, "junk.pem"), []byte("not PEM"))
	return dir
}

func parseIn(dir, src string) (*Config, error) {
	return Parse(filepath.Join(dir, "anyhook.yaml"), []byte(src), env())
}

const listenSources = "sources: {s: {provider: stripe, secrets: [whsec_x]}}\n"

func TestListenErrors(t *testing.T) {
	t.Parallel()
	dir := listenDir(t)
	for _, c := range []struct{ src, want string }{
		{"tls: {}\n", ":1: tls: needs cert_file and key_file, or acme:"},
		{"tls: {key_file: s.key}\n", ":1: tls.cert_file: is required with key_file"},
		{"tls:\n  cert_file: s.crt\n  key_file: s.key\n  acme: {domains: [a.example.com]}\n", ":4: tls.acme: is set with cert_file and key_file"},
		{"tls: {cert_file: s.crt, key_file: ca.pem}\n", ":1: tls.cert_file: s.crt and ca.pem: tls: "},
		{"tls: {cert_file: s.crt, key_file: s.key, client_ca: ca.pem}\n", ":1: tls.client_ca: client certificates are for the admin listener"},
		{"admin:\n  listen: 127.0.0.1:9\n  tls: {cert_file: s.crt, key_file: s.key, client_ca: junk.pem}\n", ":3: admin.tls.client_ca: " + filepath.Join(dir, "junk.pem") + " holds no PEM certificate"},
		{"admin:\n  listen: 127.0.0.1:9\n  tls:\n    acme: {domains: [a.example.com]}\n", ":4: admin.tls.acme: is for the public ingest listener"},
		{"admin: {}\n", ":1: admin.listen: is required in admin:"},
		{"admin: {listen: nowhere}\n", ":1: admin.listen: must be HOST:PORT"},
		{"listen: 0.0.0.0:8080\nadmin_token: x\nadmin: {listen: 127.0.0.1:8080}\n", ":3: admin.listen: is listen's address too (0.0.0.0:8080)"},
		{"listen: 0.0.0.0:443\nadmin: {listen: 10.0.0.5:8081}\n", ":2: admin.listen: admin_token is required when admin.listen (10.0.0.5:8081) is not a loopback address"},
		{"tls: {acme: {}}\n", ":1: tls.acme.domains: at least one domain name is required"},
		{"tls:\n  acme:\n    domains: [hooks.example.com, localhost]\n", ":3: tls.acme.domains[1]: \"localhost\" is not a domain name"},
		{"tls: {acme: {domains: [hooks.example.com], email: nobody}}\n", ":1: tls.acme.email: \"nobody\" is not an email address"},
		{"tls: {acme: {domains: [hooks.example.com], ca: http://ca.example.com/dir}}\n", ":1: tls.acme.ca: must be the https:// URL of an ACME directory"},
		{"tls: {acme: {domains: [hooks.example.com], ca_root: nosuch.pem}}\n", ":1: tls.acme.ca_root: open "},
	} {
		_, err := parseIn(dir, c.src+listenSources)
		if err == nil || !strings.Contains(err.Error(), "anyhook.yaml"+c.want) {
			t.Errorf("%q: %v; want %q", c.src, err, c.want)
		}
	}
}

func TestListenValid(t *testing.T) {
	t.Parallel()
	dir := listenDir(t)
	c, err := parseIn(dir, `listen: 0.0.0.0:443
database: sqlite:data/anyhook.db
tls:
  acme: {domains: [hooks.example.com], email: ops@example.com}
admin:
  listen: 127.0.0.1:8081
  tls: {cert_file: s.crt, key_file: s.key, client_ca: ca.pem}
`+listenSources)
	if err != nil {
		t.Fatal(err) // no admin_token: the admin listener is loopback
	}
	if !c.AdminSeparate() || c.AdminListen() != "127.0.0.1:8081" {
		t.Errorf("admin listener: %v %q", c.AdminSeparate(), c.AdminListen())
	}
	if c.TLS.ACME.CA != DefaultACMECA || c.ACMEStoragePath() != filepath.Join(dir, "data", DefaultACMEStorage) {
		t.Errorf("ACME defaults: ca %q, storage %q", c.TLS.ACME.CA, c.ACMEStoragePath())
	}
	out := string(c.Effective())
	for _, want := range []string{
		"tls:\n  acme:\n    domains: [hooks.example.com]\n    email: ops@example.com\n    ca: " + DefaultACMECA + "\n    storage: anyhook-acme # " + filepath.Join(dir, "data", "anyhook-acme"),
		"admin:\n  listen: 127.0.0.1:8081\n  tls:\n    cert_file: s.crt # " + filepath.Join(dir, "s.crt"),
		"client_ca: ca.pem # " + filepath.Join(dir, "ca.pem"),
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config check output lacks %q:\n%s", want, out)
		}
	}
	// Without admin:, listen serves the admin API and the old rule holds.
	if _, err := parseIn(dir, "listen: 0.0.0.0:443\ntls: {cert_file: s.crt, key_file: s.key}\n"+listenSources); err == nil ||
		!strings.Contains(err.Error(), "admin_token is required when listen") {
		t.Errorf("public listen without admin.listen nor token: %v", err)
	}
}

// TestDeployRecipe: the public deployment recipe of docs/deploy.md is a
// valid config with the admin side on a listener of its own.
func TestDeployRecipe(t *testing.T) {
	t.Parallel()
	doc := string(mustRead(t, "../../docs/deploy.md"))
	m := regexp.MustCompile("(?s)## Facing the internet[^\n]*\n.*?```yaml\n(.*?)```").FindStringSubmatch(doc)
	if m == nil {
		t.Fatal("no recipe in docs/deploy.md")
	}
	c, err := Parse("deploy.md", []byte(m[1]), env("ANYHOOK_ADMIN_TOKEN", "t", "ANYHOOK_STRIPE_SECRET", "whsec_x"))
	if err != nil {
		t.Fatal(err)
	}
	if !c.AdminSeparate() || c.TLS == nil || c.TLS.ACME == nil || c.Listen != ":443" {
		t.Errorf("the recipe: listen %q, tls %+v, admin %+v; want ACME on :443 and admin.listen", c.Listen, c.TLS, c.Admin)
	}
}
