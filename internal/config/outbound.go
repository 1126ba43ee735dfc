package config

import (
	"crypto/tls"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// reservedHeaders are the request headers a destination's headers: may
// not set: the gateway's own (X-AnyHook-*, the Standard Webhooks
// webhook-* it signs with), what describes the body or the connection
// (set by net/http), and the trace context (internal/tracing).
var reservedHeaders = []string{
	"Content-Type", "Content-Length", "Host", "Traceparent", "Tracestate",
	"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// reservedHeader says why a destination's headers: may not set name, or
// "" when it may.
func reservedHeader(name string) string {
	canon := http.CanonicalHeaderKey(name)
	lower := strings.ToLower(name)
	switch {
	case strings.HasPrefix(lower, "x-anyhook-"):
		return "X-AnyHook-* headers are the gateway's own"
	case strings.HasPrefix(lower, "webhook-"):
		return "webhook-* headers are the gateway's Standard Webhooks signature (signing_secret)"
	case slices.Contains(reservedHeaders, canon):
		return canon + " is set by the gateway for each request"
	}
	return ""
}

// validateOutbound checks how a destination is reached: its headers,
// auth, tls and proxy. No message quotes a value: any of them may be a
// secret (a proxy's password, a token in a URL).
func (c *Config) validateOutbound(k string, d *Destination) error {
	var p problems
	seen := map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(d.Headers)) {
		hk := k + ".headers." + name
		canon := http.CanonicalHeaderKey(name)
		switch {
		case !headerRe.MatchString(name):
			p.add(c.Errorf(hk, "%q is not a valid header name", name))
		case reservedHeader(name) != "":
			p.add(c.Errorf(hk, "may not be set: %s", reservedHeader(name)))
		case canon == "Authorization" && d.Auth != nil:
			p.add(c.Errorf(hk, "is set by auth: give the credential once, in auth or in headers"))
		case seen[canon] != "":
			p.add(c.Errorf(hk, "is the header %s again (names are case-insensitive)", seen[canon]))
		case !httpguts.ValidHeaderFieldValue(d.Headers[name]):
			p.add(c.Errorf(hk, "the value holds a line break or a control character"))
		}
		seen[canon] = name
	}
	if d.Auth != nil || c.has(k+".auth") {
		p.add(c.validateAuth(k+".auth", d.Auth))
	}
	if d.TLS != nil || c.has(k+".tls") {
		p.add(c.validateDestinationTLS(k, d))
	}
	if d.Proxy != "" || c.has(k+".proxy") {
		if err := checkProxy(d.Proxy); err != nil {
			p.add(c.Errorf(k+".proxy", "%s", err))
		}
	}
	if (len(d.Headers) > 0 || d.Auth != nil) && checkHTTPURL(d.URL) == nil {
		if err := overTLS(d.URL, "credentials go to it"); err != nil {
			c.warnf(k+".url", "is http:// to a host other than loopback, and headers or auth are sent to it in the clear")
		}
	}
	return p.err()
}

func (c *Config) validateAuth(k string, a *DestinationAuth) error {
	if a == nil {
		return c.Errorf(k, "must be a mapping with one of bearer, basic or oauth2")
	}
	set := 0
	for _, on := range []bool{a.Bearer != "" || c.has(k+".bearer"), a.Basic != nil || c.has(k+".basic"), a.OAuth2 != nil || c.has(k+".oauth2")} {
		if on {
			set++
		}
	}
	if set != 1 {
		return c.Errorf(k, "sets exactly one of bearer, basic or oauth2 (found %d)", set)
	}
	switch {
	case a.Bearer != "" || c.has(k+".bearer"):
		if !httpguts.ValidHeaderFieldValue(a.Bearer) || a.Bearer == "" || strings.ContainsAny(a.Bearer, " \t") {
			return c.Errorf(k+".bearer", "must be a token: not empty, without spaces, line breaks or control characters")
		}
	case a.Basic != nil || c.has(k+".basic"):
		b := a.Basic
		if b == nil || b.User == "" {
			return c.Errorf(k+".basic.user", "required")
		}
		if strings.Contains(b.User, ":") || !httpguts.ValidHeaderFieldValue(b.User) {
			return c.Errorf(k+".basic.user", "must not hold ':' or control characters (RFC 7617)")
		}
		if !httpguts.ValidHeaderFieldValue(b.Password) {
			return c.Errorf(k+".basic.password", "must not hold control characters")
		}
	default:
		o := a.OAuth2
		if o == nil {
			return c.Errorf(k+".oauth2", "must be a mapping {token_url, client_id, client_secret, scopes}")
		}
		var p problems
		switch {
		case o.TokenURL == "":
			p.add(c.Errorf(k+".oauth2.token_url", "required"))
		case strings.Contains(o.TokenURL, "@") && checkHTTPURL(o.TokenURL) == nil && hasUser(o.TokenURL):
			p.add(c.Errorf(k+".oauth2.token_url", "must not hold a user name or password (they go in client_id and client_secret); remove the part before @"))
		default:
			if err := overTLS(o.TokenURL, "client_secret is sent to it"); err != nil {
				p.add(c.Errorf(k+".oauth2.token_url", "%s", err))
			}
		}
		if o.ClientID == "" {
			p.add(c.Errorf(k+".oauth2.client_id", "required"))
		}
		if o.ClientSecret == "" {
			p.add(c.Errorf(k+".oauth2.client_secret", "required"))
		}
		for i, s := range o.Scopes {
			if s == "" || strings.ContainsAny(s, " \t\r\n\"\\") {
				p.add(c.Errorf(fmt.Sprintf("%s.oauth2.scopes[%d]", k, i), "a scope is one word, without spaces or quotes"))
			}
		}
		return p.err()
	}
	return nil
}

func (c *Config) validateDestinationTLS(k string, d *Destination) error {
	t := d.TLS
	if t == nil {
		return c.Errorf(k+".tls", "must be a mapping {client_cert_file, client_key_file, ca_file, server_name}")
	}
	k += ".tls"
	var p problems
	switch {
	case t.ClientCertFile != "" && t.ClientKeyFile == "":
		p.add(c.Errorf(k+".client_key_file", "is required with client_cert_file"))
	case t.ClientKeyFile != "" && t.ClientCertFile == "":
		p.add(c.Errorf(k+".client_cert_file", "is required with client_key_file"))
	case t.ClientCertFile != "":
		if _, err := tls.LoadX509KeyPair(c.FilePath(t.ClientCertFile), c.FilePath(t.ClientKeyFile)); err != nil {
			p.add(c.Errorf(k+".client_cert_file", "%s and %s: %s", t.ClientCertFile, t.ClientKeyFile, err))
		}
	}
	if t.CAFile != "" {
		if d.TLSInsecureSkipVerify {
			p.add(c.Errorf(k+".ca_file", "is set with tls_insecure_skip_verify, which verifies nothing: keep ca_file and remove tls_insecure_skip_verify"))
		} else if _, err := LoadCertPool(c.FilePath(t.CAFile)); err != nil {
			p.add(c.Errorf(k+".ca_file", "%s", err))
		}
	}
	if t.ServerName != "" && !validServerName(t.ServerName) {
		p.add(c.Errorf(k+".server_name", "%q is not a host name", t.ServerName))
	}
	if *t == (DestinationTLS{}) {
		p.add(c.Errorf(k, "is empty: set client_cert_file and client_key_file, ca_file or server_name, or remove it"))
	}
	return p.err()
}

// validServerName accepts a DNS name (one label will do: an internal
// host) or an IP address.
func validServerName(s string) bool {
	if len(s) > 253 || s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == ':') {
			return false
		}
	}
	return true
}

// checkProxy accepts an http:// or https:// proxy URL with a host and
// nothing after it but a /; user:password may be in it.
func checkProxy(s string) error {
	u, err := url.Parse(s)
	switch {
	case s == "":
		return fmt.Errorf("is empty; remove the key to use HTTPS_PROXY, HTTP_PROXY and NO_PROXY")
	case err != nil:
		return fmt.Errorf("not a valid URL")
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("must be an http:// or https:// proxy URL such as http://proxy.internal:3128")
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("URL has no host")
	case (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "":
		return fmt.Errorf("must be only scheme://[user:password@]host:port")
	}
	return nil
}

func hasUser(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.User != nil
}
