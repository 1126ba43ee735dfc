package main

import (
	"strings"
	"testing"
)

// TestHeaderAuthConfigCheck: config check lists each mistake in a
// destination's headers, auth, tls and proxy once, with file, line and
// key, and quotes none of the values; for a valid one it shows none of the
// secrets of a valid one.
func TestHeaderAuthConfigCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `sources:
  s: {provider: stripe, secrets: [whsec_abc]}
destinations:
  d:
    url: https://hooks.example.com/in
    sources: [s]
    headers: {X-AnyHook-Event-Id: CHECK-SECRET-1}
    auth: {bearer: CHECK-SECRET-2, basic: {user: u, password: CHECK-SECRET-3}}
    tls: {client_cert_file: nope.crt, client_key_file: nope.key, ca_file: nope.pem}
    proxy: "ftp://u:CHECK-SECRET-4@proxy:21"
`)
	code, _, errOut := exe(t, "config", "check", "--config", cfg)
	want := []string{
		cfg + ":7: destinations.d.headers.X-AnyHook-Event-Id: may not be set",
		cfg + ":8: destinations.d.auth: sets exactly one of bearer, basic or oauth2 (found 2)",
		cfg + ":9: destinations.d.tls.client_cert_file: nope.crt and nope.key: open ",
		cfg + ":9: destinations.d.tls.ca_file: open ",
		cfg + ":10: destinations.d.proxy: must be an http:// or https:// proxy URL",
	}
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code != 2 || len(lines) != len(want) {
		t.Fatalf("config check: exit %d, stderr:\n%s\nwant exit 2 and %d problems", code, errOut, len(want))
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("problem %d: %q, want %q", i+1, lines[i], w)
		}
	}
	if strings.Contains(errOut, "CHECK-SECRET") {
		t.Errorf("config check quotes a secret:\n%s", errOut)
	}

	cfg = writeConfig(t, dir, `sources:
  s: {provider: stripe, secrets: [whsec_abc]}
destinations:
  d:
    url: https://hooks.example.com/in
    sources: [s]
    headers: {X-Tenant: CHECK-SECRET-1}
    auth:
      oauth2: {token_url: "https://idp.example.com/token?client_secret=CHECK-SECRET-2", client_id: CHECK-SECRET-3, client_secret: CHECK-SECRET-4}
    proxy: "http://u:CHECK-SECRET-5@proxy:3128"
`)
	code, out, errOut := exe(t, "config", "check", "--config", cfg)
	if code != 0 || strings.Contains(out+errOut, "CHECK-SECRET") || !strings.Contains(out, "X-Tenant: <redacted>") {
		t.Errorf("config check: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}
