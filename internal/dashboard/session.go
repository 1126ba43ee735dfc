package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anyhook/anyhook/internal/auth"
)

const (
	sessionCookie = "anyhook_session"
	flashCookie   = "anyhook_flash"
)

// sessions issues and checks session cookies. A cookie is
// base64url(expiry ‖ nonce ‖ token name) "." base64url(HMAC-SHA256(key,
// expiry ‖ nonce ‖ token name)) with key derived from the named token
// (auth.Tokens.Key): no server-side state but the nonces revoked by
// logout, and changing or removing a token ends the sessions it opened.
// A cookie without a name is the admin token's (issued before tokens had
// names: its key is the same).
type sessions struct {
	tokens *auth.Tokens // Off: authentication is off
	ttl    time.Duration
	now    func() time.Time

	mu      sync.Mutex
	revoked map[string]time.Time // nonce → expiry
}

// sessionPurpose is what a token's session key is derived for.
const sessionPurpose = "anyhook dashboard session v1"

func newSessions(tokens *auth.Tokens, ttl time.Duration, now func() time.Time) *sessions {
	return &sessions{tokens: tokens, ttl: ttl, now: now, revoked: map[string]time.Time{}}
}

func (s *sessions) off() bool { return s.tokens.Off() }

// sign is the MAC of payload with the session key of the token named
// name; false when there is no such token.
func (s *sessions) sign(name string, payload []byte) ([]byte, bool) {
	key, ok := s.tokens.Key(name, sessionPurpose)
	if !ok {
		return nil, false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(payload)
	return mac.Sum(nil), true
}

// issue returns a new cookie value for the token named name, and its
// expiry.
func (s *sessions) issue(name string) (string, time.Time) {
	exp := s.now().Add(s.ttl)
	payload := make([]byte, 8+16, 8+16+len(name))
	binary.BigEndian.PutUint64(payload, uint64(exp.Unix()))
	rand.Read(payload[8:])
	payload = append(payload, name...)
	mac, _ := s.sign(name, payload)
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(mac), exp
}

// parse checks a cookie value and returns its nonce, expiry and
// principal. A session whose token has since lost the right to log in
// (its scopes changed) is not valid.
func (s *sessions) parse(v string) (nonce string, exp time.Time, p auth.Principal, ok bool) {
	pv, m, found := strings.Cut(v, ".")
	if !found || s.off() {
		return "", time.Time{}, p, false
	}
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(pv)
	mac, err2 := enc.DecodeString(m)
	if err1 != nil || err2 != nil || len(payload) < 24 {
		return "", time.Time{}, p, false
	}
	name := string(payload[24:])
	if name == "" {
		name = auth.AdminTokenName
	}
	want, known := s.sign(name, payload)
	if !known || !hmac.Equal(mac, want) {
		return "", time.Time{}, p, false
	}
	exp = time.Unix(int64(binary.BigEndian.Uint64(payload)), 0)
	if !s.now().Before(exp) {
		return "", time.Time{}, p, false
	}
	if p, ok = s.tokens.Lookup(name); !ok || !p.CanLogin() {
		return "", time.Time{}, auth.Principal{}, false
	}
	nonce = string(payload[8:24])
	s.mu.Lock()
	_, gone := s.revoked[nonce]
	s.mu.Unlock()
	return nonce, exp, p, !gone
}

// principal is who r's live session is of (auth.Anonymous with
// authentication off), and whether r has one.
func (s *sessions) principal(r *http.Request) (auth.Principal, bool) {
	if s.off() {
		return auth.Anonymous, true
	}
	c, err := r.Cookie(cookieName(r, sessionCookie))
	if err != nil {
		return auth.Principal{}, false
	}
	_, _, p, ok := s.parse(c.Value)
	return p, ok
}

// valid reports whether r carries a live session (always, with
// authentication off).
func (s *sessions) valid(r *http.Request) bool {
	_, ok := s.principal(r)
	return ok
}

// actor names the person behind r in the audit trail of replays and
// resolves: the name of the token they logged in with, and their
// session, by the first 8 hex digits of the SHA-256 of its nonce. That
// tells sessions apart and reveals nothing of the cookie, which is the
// nonce and its MAC. Without a login (no token) it is "dashboard".
func (s *sessions) actor(r *http.Request) string {
	if s.off() {
		return "dashboard"
	}
	c, err := r.Cookie(cookieName(r, sessionCookie))
	if err != nil {
		return "dashboard"
	}
	nonce, _, p, ok := s.parse(c.Value)
	if !ok {
		return "dashboard"
	}
	sum := sha256.Sum256([]byte(nonce))
	return p.Name + " (dashboard session " + hex.EncodeToString(sum[:4]) + ")"
}

// revoke ends the session of cookie value v in this process.
func (s *sessions) revoke(v string) {
	nonce, exp, _, ok := s.parse(v)
	if !ok {
		return
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for n, e := range s.revoked {
		if !now.Before(e) {
			delete(s.revoked, n) // expired anyway
		}
	}
	s.revoked[nonce] = exp
}

func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName(r, name), Value: value, Path: "/", MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: overTLS(r),
	})
}

// cookieName is the name of cookie base for r: over TLS with the __Host-
// prefix, which browsers accept only with Secure, Path=/ and no Domain, so
// that no other site under the same domain, and no plain-HTTP page of this
// host, can set or shadow it.
func cookieName(r *http.Request, base string) string {
	if overTLS(r) {
		return "__Host-" + base
	}
	return base
}

// overTLS reports whether the browser reached us over TLS: directly, or
// through a TLS-terminating proxy that says so. Trusting the header here is
// safe: a forged "https" only makes the cookie stricter.
func overTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

// requireSession lets a request through with a live session, its
// principal in the request's context; else a page load is sent to the
// login form and anything else gets 401.
func (d *Dashboard) requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := d.sessions.principal(r); ok {
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
			return
		}
		if r.Method == http.MethodGet && r.Header.Get("X-AnyHook-Partial") == "" {
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		d.renderError(w, r, &pageError{http.StatusUnauthorized, "your session has ended; log in again"})
	})
}

// requireAct lets an action through only for a principal that may act
// (scope admin): a read token sees the pages but gets 403 here. The pages
// do not offer it the actions (canAct).
func (d *Dashboard) requireAct(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, _ := auth.FromContext(r.Context()); !p.CanAct() {
			d.renderError(w, r, &pageError{http.StatusForbidden,
				"you are logged in with " + p.Describe() + ": it can see everything but not act (replay, resolve, pause …); log in with a token with scope admin"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

// canAct reports whether the principal of r's session may act: the pages
// offer their action buttons only then.
func canAct(r *http.Request) bool {
	p, _ := auth.FromContext(r.Context())
	return p.CanAct()
}

type loginData struct {
	Next  string
	Error string
}

// maxLocalPath bounds the length of a redirect target taken from a request.
const maxLocalPath = 2048

// localPath returns next, normalized, when it is a path on this site, else
// "/". It decides on what browsers would resolve, not on the raw text:
// next is parsed and percent-decoded, its path cleaned (path.Clean, as
// http.Redirect does), and only a path that starts with exactly one "/"
// followed by neither "/" nor "\" is kept, with its query; no scheme, no
// host, no backslash and no control character anywhere after decoding
// (browsers read "\" as "/" and drop tabs and newlines inside URLs, so
// "/\evil", "/\t/evil" and "/./\evil" all mean another site). The
// answer is rebuilt from the cleaned path, so what was checked is what is
// sent.
func localPath(next string) string {
	if len(next) > maxLocalPath || !strings.HasPrefix(next, "/") || strings.ContainsRune(next, '\\') || hasControl(next) {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "/"
	}
	query, err := url.QueryUnescape(u.RawQuery)
	if err != nil || strings.ContainsRune(u.Path, '\\') || hasControl(u.Path) ||
		strings.ContainsRune(query, '\\') || hasControl(query) {
		return "/"
	}
	if !singleSlash(u.Path) {
		return "/"
	}
	v := &url.URL{Path: path.Clean(u.Path), RawQuery: u.RawQuery}
	if v.Path == u.Path {
		v.RawPath = u.RawPath // keep the original escaping where it is valid
	}
	out := v.String()
	if !singleSlash(out) {
		return "/"
	}
	return out
}

// singleSlash reports whether p is "/" or starts with one "/" followed by
// neither "/" nor "\".
func singleSlash(p string) bool {
	return p == "/" || len(p) > 1 && p[0] == '/' && p[1] != '/' && p[1] != '\\'
}

// hasControl reports whether s holds an ASCII control character.
func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}

// GET /login
func (d *Dashboard) loginPage(w http.ResponseWriter, r *http.Request) error {
	next := localPath(r.URL.Query().Get("next"))
	if d.sessions.valid(r) {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return nil
	}
	d.render(w, r, http.StatusOK, "login", "Log in", loginData{Next: next})
	return nil
}

// POST /login token=…&next=…
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		return &pageError{http.StatusBadRequest, "unreadable form"}
	}
	next := localPath(r.PostForm.Get("next"))
	if d.sessions.off() {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return nil
	}
	p, ok := d.sessions.tokens.Resolve(r.PostForm.Get("token"))
	if !ok {
		d.log.LogAttrs(r.Context(), slog.LevelWarn, "dashboard: login failed", slog.String("remote", r.RemoteAddr))
		d.render(w, r, http.StatusUnauthorized, "login", "Log in", loginData{Next: next, Error: "That is not a token of this gateway."})
		return nil
	}
	if !p.CanLogin() {
		// The token is right, so this is no guess: 403, which the
		// gateway does not count as an authentication failure.
		d.log.LogAttrs(r.Context(), slog.LevelWarn, "dashboard: login refused: the token's scopes do not include the dashboard",
			slog.String("remote", r.RemoteAddr), slog.String("token", p.Name))
		d.render(w, r, http.StatusForbidden, "login", "Log in", loginData{Next: next,
			Error: "The token " + strconv.Quote(p.Name) + " has scope " + strings.Join(p.Scopes, ", ") +
				": it pulls deliveries (anyhook listen) and cannot log in to the dashboard. Log in with a token with scope admin or read."})
		return nil
	}
	v, exp := d.sessions.issue(p.Name)
	setCookie(w, r, sessionCookie, v, int(time.Until(exp).Seconds()))
	d.log.LogAttrs(r.Context(), slog.LevelInfo, "dashboard: login", slog.String("remote", r.RemoteAddr), slog.String("token", p.Name))
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

// POST /logout
func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) error {
	if c, err := r.Cookie(cookieName(r, sessionCookie)); err == nil {
		d.sessions.revoke(c.Value)
	}
	setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, "/login", http.StatusSeeOther)
	return nil
}

// flash is a one-time message shown on the page an action redirects to.
type flash struct {
	Error   bool
	Message string
}

func setFlash(w http.ResponseWriter, r *http.Request, isErr bool, msg string) {
	if len(msg) > 1500 {
		msg = msg[:1500] + "…"
	}
	prefix := "o"
	if isErr {
		prefix = "e"
	}
	setCookie(w, r, flashCookie, prefix+base64.RawURLEncoding.EncodeToString([]byte(msg)), 60)
}

// takeFlash reads and clears the flash cookie.
func takeFlash(w http.ResponseWriter, r *http.Request) *flash {
	c, err := r.Cookie(cookieName(r, flashCookie))
	if err != nil || len(c.Value) < 2 {
		return nil
	}
	setCookie(w, r, flashCookie, "", -1)
	b, err := base64.RawURLEncoding.DecodeString(c.Value[1:])
	if err != nil {
		return nil
	}
	return &flash{Error: c.Value[0] == 'e', Message: string(b)}
}
