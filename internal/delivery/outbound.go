package delivery

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anyhook/anyhook/internal/redirect"
	"golang.org/x/net/http/httpproxy"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// Auth is a destination's own credential, added to each request at send
// time (never to what is stored); exactly one field is set.
type Auth struct {
	Bearer string
	Basic  *BasicAuth
	OAuth2 *OAuth2
}

// BasicAuth is HTTP Basic authentication.
type BasicAuth struct{ User, Password string }

// OAuth2 is the client credentials grant: a token from TokenURL, cached
// until shortly before it expires, fetched again once when the
// destination answers 401.
type OAuth2 struct {
	TokenURL, ClientID, ClientSecret string
	Scopes                           []string
}

// Kind names the credential, for the pages and the API: bearer, basic,
// oauth2, or "" for none.
func (a *Auth) Kind() string {
	switch {
	case a == nil:
		return ""
	case a.Basic != nil:
		return "basic"
	case a.OAuth2 != nil:
		return "oauth2"
	case a.Bearer != "":
		return "bearer"
	}
	return ""
}

// outbound is how one destination is reached: its client (its TLS and
// proxy), its credential, and the secrets its error texts and stored
// answers are cleaned of.
type outbound struct {
	client  *http.Client
	headers http.Header
	auth    string // a static Authorization value; "": none or oauth2
	token   *tokenCache
	secrets []string // values never stored or logged (scrub)
}

// minScrub is the shortest secret scrub looks for: a shorter value would
// cut ordinary words out of a destination's answers.
const minScrub = 8

// newOutbound returns how d is reached over base (the engine's client),
// with copies of base where d has TLS settings or a proxy of its own.
// insecure is shared by destinations that only skip verification.
func newOutbound(base *http.Client, d *Destination, now func() time.Time, insecure func() *http.Client) *outbound {
	o := &outbound{client: base, headers: d.Headers}
	switch {
	case d.TLS != nil || d.RootCAs != nil || d.Proxy != nil:
		o.client = ownClient(base, d)
	case d.InsecureSkipVerify:
		o.client = insecure()
	}
	for k, vs := range d.Headers {
		o.secrets = append(o.secrets, vs...)
		if k == "Authorization" || k == "Proxy-Authorization" {
			for _, v := range vs {
				// "Scheme credential": the credential may be quoted alone.
				if _, cred, ok := strings.Cut(v, " "); ok {
					o.secrets = append(o.secrets, strings.TrimSpace(cred))
				}
			}
		}
	}
	if d.Proxy != nil {
		o.secrets = append(o.secrets, proxySecrets(d.Proxy)...)
	} else {
		// The environment's proxy (HTTPS_PROXY, HTTP_PROXY) may carry a
		// credential too, and a proxy may quote it back.
		env := httpproxy.FromEnvironment()
		for _, raw := range []string{env.HTTPProxy, env.HTTPSProxy} {
			if raw == "" {
				continue
			}
			if !strings.Contains(raw, "://") {
				raw = "http://" + raw // as http.ProxyFromEnvironment reads it
			}
			if u, err := url.Parse(raw); err == nil {
				o.secrets = append(o.secrets, proxySecrets(u)...)
			}
		}
	}
	switch a := d.Auth; {
	case a == nil:
	case a.Basic != nil:
		cred := base64.StdEncoding.EncodeToString([]byte(a.Basic.User + ":" + a.Basic.Password))
		o.auth = "Basic " + cred
		o.secrets = append(o.secrets, a.Basic.Password, cred)
	case a.OAuth2 != nil:
		tokenClient := o.client
		if d.TLS != nil && d.TLS.ServerName != "" {
			// server_name is the destination's; the token endpoint, on a
			// host of its own, is verified by its URL's host.
			td := *d
			td.TLS = d.TLS.Clone()
			td.TLS.ServerName = ""
			tokenClient = ownClient(base, &td)
		}
		o.token = &tokenCache{
			cfg: &clientcredentials.Config{ClientID: a.OAuth2.ClientID, ClientSecret: a.OAuth2.ClientSecret, TokenURL: a.OAuth2.TokenURL, Scopes: a.OAuth2.Scopes},
			// The token endpoint is reached as the destination is (its
			// TLS, its proxy), and a redirect that would carry the
			// client's credentials elsewhere is refused.
			client: &http.Client{Transport: tokenClient.Transport, CheckRedirect: redirect.Check},
			now:    now,
			lock:   make(chan struct{}, 1),
		}
		o.secrets = append(o.secrets, a.OAuth2.ClientSecret)
	case a.Bearer != "":
		o.auth = "Bearer " + a.Bearer
		o.secrets = append(o.secrets, a.Bearer)
	}
	return o
}

// proxySecrets are what of proxy u's credential a proxy may quote back:
// the password (or a key given as the user name), and the
// Proxy-Authorization value that carries them, which a proxy may quote
// in its answer or in a CONNECT refusal's reason phrase.
func proxySecrets(u *url.URL) []string {
	if u.User == nil {
		return nil
	}
	pw, ok := u.User.Password()
	first := pw
	if !ok {
		first = u.User.Username() // a key as the user name
	}
	return []string{first, base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + pw))}
}

// ownClient is a copy of base with d's TLS configuration and proxy. A
// client whose transport is not an *http.Transport gets NewClient's.
func ownClient(base *http.Client, d *Destination) *http.Client {
	c := *base
	t, ok := base.Transport.(*http.Transport)
	if !ok {
		t = NewClient().Transport.(*http.Transport)
	}
	t = t.Clone()
	if d.TLS != nil {
		t.TLSClientConfig = d.TLS.Clone()
	}
	if d.InsecureSkipVerify {
		if t.TLSClientConfig == nil {
			t.TLSClientConfig = &tls.Config{}
		}
		t.TLSClientConfig.InsecureSkipVerify = true
	}
	if d.Proxy != nil {
		t.Proxy = http.ProxyURL(d.Proxy)
	}
	c.Transport = t
	if d.RootCAs != nil {
		c.Transport = &caTransport{tmpl: t, cas: d.RootCAs}
	}
	return &c
}

// CAs are CAs read from a file, again when it changes (certs.CAFile):
// Pool returns them as the file is now, with a generation that changes
// when they do.
type CAs interface {
	Pool() (*x509.CertPool, uint64)
}

// caTransport is a transport whose CAs are read again when their file
// changes. A Go transport's TLS configuration is fixed once it is in use,
// so a change makes a new transport; the old one's idle connections are
// closed (one in use finishes its request first).
type caTransport struct {
	tmpl *http.Transport
	cas  CAs

	mu  sync.Mutex
	gen uint64
	cur *http.Transport
}

func (c *caTransport) transport() *http.Transport {
	pool, gen := c.cas.Pool() // a stat, unless the file changed
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cur == nil || gen != c.gen {
		t := c.tmpl.Clone()
		if t.TLSClientConfig == nil {
			t.TLSClientConfig = &tls.Config{}
		}
		t.TLSClientConfig.RootCAs = pool
		if c.cur != nil {
			c.cur.CloseIdleConnections()
		}
		c.cur, c.gen = t, gen
	}
	return c.cur
}

func (c *caTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return c.transport().RoundTrip(r)
}

// CloseIdleConnections closes the current transport's idle connections
// (http.Client.CloseIdleConnections).
func (c *caTransport) CloseIdleConnections() {
	c.mu.Lock()
	cur := c.cur
	c.mu.Unlock()
	if cur != nil {
		cur.CloseIdleConnections()
	}
}

// authorize sets the destination's headers and credential on h; with
// OAuth2 it returns the token it used (for drop, on a 401).
func (o *outbound) authorize(ctx context.Context, h http.Header) (string, error) {
	for k, vs := range o.headers {
		h[k] = vs
	}
	switch {
	case o.auth != "":
		h.Set("Authorization", o.auth)
	case o.token != nil:
		tok, err := o.token.get(ctx)
		if err != nil {
			return "", err
		}
		h.Set("Authorization", "Bearer "+tok)
		return tok, nil
	}
	return "", nil
}

// scrub replaces the destination's secrets (and its current OAuth2
// token) in s: a destination or a token endpoint that echoes a
// credential in an answer or an error must not have it stored, logged
// or alerted.
func (o *outbound) scrub(s string) string {
	if o == nil {
		return s
	}
	for _, secret := range o.all() {
		s = strings.ReplaceAll(s, secret, redacted)
	}
	return s
}

// scrubBytes is scrub of a response body.
func (o *outbound) scrubBytes(b []byte) []byte {
	if o == nil {
		return b
	}
	for _, secret := range o.all() {
		b = bytes.ReplaceAll(b, []byte(secret), []byte(redacted))
	}
	return b
}

// readScrubbed reads the first maxResponse bytes of an answer cleaned of
// the secrets. It reads further by the longest secret and cleans before
// it cuts, so that a secret echoed across the cut is not kept in part; a
// cut answer that then ends in the start of a secret loses that end.
func (o *outbound) readScrubbed(r io.Reader) []byte {
	secrets := o.all()
	longest := 0
	for _, s := range secrets {
		longest = max(longest, len(s))
	}
	b, _ := io.ReadAll(io.LimitReader(r, int64(maxResponse+longest)))
	cut := len(b) > maxResponse
	b = o.scrubBytes(b)
	if !cut && len(b) <= maxResponse {
		return b
	}
	b = b[:min(len(b), maxResponse)]
	for _, s := range secrets {
		for n := min(len(s)-1, len(b)); n > 0; n-- {
			if bytes.HasSuffix(b, []byte(s[:n])) {
				b = b[:len(b)-n]
				break
			}
		}
	}
	return b
}

func (o *outbound) all() []string {
	out := make([]string, 0, len(o.secrets)+2)
	for _, s := range o.secrets {
		if len(s) >= minScrub {
			out = append(out, s)
		}
	}
	if o.token != nil {
		for _, s := range o.token.known() {
			if len(s) >= minScrub {
				out = append(out, s)
			}
		}
	}
	return out
}

const redacted = "<redacted>"

// tokenCache holds a destination's OAuth2 token: one token serves every
// request until shortly before it expires (by the engine's clock), and
// one fetch at a time gets the next.
type tokenCache struct {
	cfg    *clientcredentials.Config
	client *http.Client
	now    func() time.Time
	lock   chan struct{} // held while a token is fetched

	mu        sync.Mutex
	tok, prev string    // the current token, and the one before it
	refresh   time.Time // when tok is fetched again; zero: only on a 401
}

// get returns the cached token, or fetches one.
func (c *tokenCache) get(ctx context.Context) (string, error) {
	if tok, ok := c.current(); ok {
		return tok, nil
	}
	select {
	case c.lock <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	defer func() { <-c.lock }()
	if tok, ok := c.current(); ok {
		return tok, nil // fetched while this one waited
	}
	t, err := c.cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, c.client))
	if err != nil {
		return "", tokenError(err)
	}
	if t.AccessToken == "" || !validToken(t.AccessToken) {
		return "", errors.New("oauth2 token endpoint: the answer holds no usable access_token")
	}
	now := c.now()
	var refresh time.Time
	if !t.Expiry.IsZero() {
		// The library dates the expiry by the wall clock; the engine's
		// clock decides. Fetched again before it expires: at half its
		// life, or a minute before, whichever is later.
		life := time.Until(t.Expiry)
		refresh = now.Add(life - min(life/2, time.Minute))
	}
	c.mu.Lock()
	c.prev, c.tok, c.refresh = c.tok, t.AccessToken, refresh
	c.mu.Unlock()
	return t.AccessToken, nil
}

func (c *tokenCache) current() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tok == "" || (!c.refresh.IsZero() && !c.now().Before(c.refresh)) {
		return "", false
	}
	return c.tok, true
}

// drop forgets tok, which the destination refused, unless a newer token
// replaced it already: concurrent 401s make one fetch.
func (c *tokenCache) drop(tok string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tok == tok {
		c.tok, c.prev = "", tok
	}
}

func (c *tokenCache) known() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return []string{c.tok, c.prev}
}

// validToken accepts a token that can go in a header.
func validToken(s string) bool {
	for _, r := range s {
		if r <= ' ' || r >= 0x7f {
			return false
		}
	}
	return true
}

var errorCodeRe = regexp.MustCompile(`^[a-z_]{1,64}$`)

// tokenError says why a token could not be had without quoting what the
// library does: a RetrieveError holds the endpoint's whole answer (which
// may echo the client secret), and a *url.Error the token URL.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		msg := "oauth2 token endpoint answered"
		if re.Response != nil {
			msg += " HTTP " + strconv.Itoa(re.Response.StatusCode)
		}
		if errorCodeRe.MatchString(re.ErrorCode) {
			msg += " (" + re.ErrorCode + ")"
		}
		return errors.New(msg)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s to the oauth2 token endpoint: %w", ue.Op, ue.Err)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return fmt.Errorf("oauth2 token endpoint: %w", err)
	}
	return errors.New("oauth2 token endpoint: the answer could not be read as a token")
}
