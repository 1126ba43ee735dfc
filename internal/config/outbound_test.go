package config

import (
	"strings"
	"testing"

	"github.com/anyhook/anyhook/internal/certs/certstest"
)

const outboundHead = listenSources + "destinations:\n  d:\n    url: https://hooks.example.com/in\n    sources: [s]\n"

// TestHeaderAuthMTLSProxyErrors: each mistake in a destination's
// headers, auth, tls and proxy is refused naming file, line and key, and
// no message quotes a value (any may be a secret).
func TestHeaderAuthMTLSProxyErrors(t *testing.T) {
	t.Parallel()
	dir := listenDir(t)
	for _, c := range []struct{ src, want string }{
		{"    headers: {X-AnyHook-Delivery: SECRETVALUE}\n", ":6: destinations.d.headers.X-AnyHook-Delivery: may not be set: X-AnyHook-* headers are the gateway's own"},
		{"    headers: {webhook-signature: SECRETVALUE}\n", ":6: destinations.d.headers.webhook-signature: may not be set: webhook-*"},
		{"    headers:\n      content-type: SECRETVALUE\n", ":7: destinations.d.headers.content-type: may not be set: Content-Type is set by the gateway"},
		{"    headers: {Host: SECRETVALUE}\n", "destinations.d.headers.Host: may not be set"},
		{"    headers: {Content-Length: SECRETVALUE}\n", "destinations.d.headers.Content-Length: may not be set"},
		{"    headers: {traceparent: SECRETVALUE}\n", "destinations.d.headers.traceparent: may not be set"},
		{"    headers: {Tracestate: SECRETVALUE}\n", "destinations.d.headers.Tracestate: may not be set"},
		{"    headers: {\"bad name\": SECRETVALUE}\n", `destinations.d.headers.bad name: "bad name" is not a valid header name`},
		{"    headers: {X-Key: \"SECRET\\nVALUE\"}\n", "destinations.d.headers.X-Key: the value holds a line break"},
		{"    headers: {Authorization: SECRETVALUE}\n    auth: {bearer: SECRETVALUE}\n", "destinations.d.headers.Authorization: is set by auth"},
		{"    auth: {}\n", ":6: destinations.d.auth: sets exactly one of bearer, basic or oauth2 (found 0)"},
		{"    auth: {bearer: SECRETVALUE, basic: {user: u, password: SECRETVALUE}}\n", ":6: destinations.d.auth: sets exactly one of bearer, basic or oauth2 (found 2)"},
		{"    auth: {bearer: \"SECRET VALUE\"}\n", "destinations.d.auth.bearer: must be a token"},
		{"    auth: {basic: {password: SECRETVALUE}}\n", "destinations.d.auth.basic.user: required"},
		{"    auth: {basic: {user: \"a:b\", password: SECRETVALUE}}\n", "destinations.d.auth.basic.user: must not hold ':'"},
		{"    auth:\n      oauth2: {client_id: i, client_secret: SECRETVALUE}\n", ":7: destinations.d.auth.oauth2.token_url: required"},
		{"    auth:\n      oauth2: {token_url: http://idp.example.com/token, client_id: i, client_secret: SECRETVALUE}\n", "destinations.d.auth.oauth2.token_url: must be https:// (client_secret is sent to it)"},
		{"    auth:\n      oauth2: {token_url: \"https://u:SECRETVALUE@idp.example.com/token\", client_id: i, client_secret: SECRETVALUE}\n", "destinations.d.auth.oauth2.token_url: must not hold a user name or password"},
		{"    auth:\n      oauth2: {token_url: https://idp.example.com/token, client_id: i}\n", "destinations.d.auth.oauth2.client_secret: required"},
		{"    tls: {client_cert_file: s.crt}\n", ":6: destinations.d.tls.client_key_file: is required with client_cert_file"},
		{"    tls: {client_cert_file: s.crt, client_key_file: missing.key}\n", "destinations.d.tls.client_cert_file: s.crt and missing.key: open"},
		{"    tls: {ca_file: junk.pem}\n", "destinations.d.tls.ca_file: "},
		{"    tls_insecure_skip_verify: true\n    tls: {ca_file: ca.pem}\n", ":7: destinations.d.tls.ca_file: is set with tls_insecure_skip_verify"},
		{"    tls: {}\n", ":6: destinations.d.tls: is empty"},
		{"    proxy: socks5://proxy:1080\n", ":6: destinations.d.proxy: must be an http:// or https:// proxy URL"},
		{"    proxy: \"http://u:SECRETVALUE@proxy:3128/path\"\n", ":6: destinations.d.proxy: must be only scheme://[user:password@]host:port"},
		{"    proxy: \"\"\n", ":6: destinations.d.proxy: is empty"},
	} {
		_, err := parseIn(dir, outboundHead+c.src)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v\nwant %q", c.src, err, c.want)
			continue
		}
		if !strings.Contains(err.Error(), "anyhook.yaml:") {
			t.Errorf("%q: %v: does not name the file", c.src, err)
		}
		if strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%q: %v: quotes a value", c.src, err)
		}
	}
}

// TestHeaderAuthMTLSProxyValid: a destination with every key parses,
// its header values may come from ${VAR}, and anyhook config shows none
// of its secrets (header names and the proxy's host are kept).
func TestHeaderAuthMTLSProxyValid(t *testing.T) {
	t.Parallel()
	dir := listenDir(t)
	certstest.NewCA(t, "clients").ClientLeaf(t, "anyhook").Write(t, dir, "c.crt", "c.key")
	src := outboundHead + `    headers: {X-Api-Key: "${API_KEY}", X-Tenant: acme-tenant-name}
    tls: {client_cert_file: c.crt, client_key_file: c.key, ca_file: ca.pem, server_name: hooks.internal}
    proxy: "http://proxyuser:PROXYPASSWORD@proxy.internal:3128"
    auth:
      oauth2:
        token_url: "https://idp.example.com/token?audience=hooks&client_secret=QUERYSECRET"
        client_id: CLIENTID-abc
        client_secret: CLIENTSECRET-def
        scopes: [hooks.write]
  e:
    url: https://e.example.com/
    sources: [s]
    auth: {basic: {user: BASICUSER, password: BASICPASSWORD}}
  f:
    url: https://f.example.com/
    sources: [s]
    auth: {bearer: BEARERTOKEN}
`
	c, err := Parse(dir+"/anyhook.yaml", []byte(src), env("API_KEY", "ENVAPIKEY-123"))
	if err != nil {
		t.Fatal(err)
	}
	d := c.Destinations["d"]
	if d.Headers["X-Api-Key"] != "ENVAPIKEY-123" || d.Auth.OAuth2.ClientSecret != "CLIENTSECRET-def" || d.TLS.ServerName != "hooks.internal" {
		t.Errorf("parsed %+v", d)
	}
	eff := string(c.Effective())
	for _, secret := range []string{"ENVAPIKEY-123", "acme-tenant-name", "PROXYPASSWORD", "QUERYSECRET", "CLIENTID-abc", "CLIENTSECRET-def", "BASICUSER", "BASICPASSWORD", "BEARERTOKEN"} {
		if strings.Contains(eff, secret) {
			t.Errorf("anyhook config shows %s:\n%s", secret, eff)
		}
	}
	for _, shown := range []string{"X-Api-Key: <redacted>", "proxy.internal:3128", "idp.example.com/token", "hooks.write", "c.crt"} {
		if !strings.Contains(eff, shown) {
			t.Errorf("anyhook config does not show %s:\n%s", shown, eff)
		}
	}
}

// TestHeaderAuthWarnsOverPlainHTTP: credentials to an http:// URL that is
// not loopback cross the network in the clear: a warning.
func TestHeaderAuthWarnsOverPlainHTTP(t *testing.T) {
	t.Parallel()
	src := listenSources + "destinations:\n  d:\n    url: http://10.0.0.5/in\n    sources: [s]\n    auth: {bearer: tok}\n"
	c, err := Parse("anyhook.yaml", []byte(src), env())
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, w := range c.Warnings() {
		found = found || strings.Contains(w.Error(), "destinations.d.url: is http://")
	}
	if !found {
		t.Errorf("warnings %v, want one about credentials over http://", c.Warnings())
	}
}
