package dashboard

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"
)

const (
	sessionCookie = "anyhook_session"
	flashCookie   = "anyhook_flash"
)

// sessions issues and checks session cookies. A cookie is
// base64url(expiry ‖ nonce) "." base64url(HMAC-SHA256(key, expiry ‖ nonce))
// with key derived from the admin token: no server-side state but the
// nonces revoked by logout.
type sessions struct {
	key   []byte // nil: authentication is off
	token []byte // sha256 of the admin token
	ttl   time.Duration
	now   func() time.Time

	mu      sync.Mutex
	revoked map[string]time.Time // nonce → expiry
}

func newSessions(token string, ttl time.Duration, now func() time.Time) *sessions {
	s := &sessions{ttl: ttl, now: now, revoked: map[string]time.Time{}}
	if token != "" {
		mac := hmac.New(sha256.New, []byte(token))
		mac.Write([]byte("anyhook dashboard session v1"))
		s.key = mac.Sum(nil)
		sum := sha256.Sum256([]byte(token))
		s.token = sum[:]
	}
	return s
}

func (s *sessions) off() bool { return s.key == nil }

// checkToken compares a typed token with the admin token in constant time.
func (s *sessions) checkToken(typed string) bool {
	sum := sha256.Sum256([]byte(strings.TrimSpace(typed)))
	return subtle.ConstantTimeCompare(sum[:], s.token) == 1
}

func (s *sessions) sign(payload []byte) []byte {
	mac := hmac.New(sha256.New, s.key)
	mac.Write(payload)
	return mac.Sum(nil)
}

// issue returns a new cookie value and its expiry.
func (s *sessions) issue() (string, time.Time) {
	exp := s.now().Add(s.ttl)
	payload := make([]byte, 8+16)
	binary.BigEndian.PutUint64(payload, uint64(exp.Unix()))
	rand.Read(payload[8:])
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(s.sign(payload)), exp
}

// parse checks a cookie value and returns its nonce and expiry.
func (s *sessions) parse(v string) (nonce string, exp time.Time, ok bool) {
	p, m, found := strings.Cut(v, ".")
	if !found || s.key == nil {
		return "", time.Time{}, false
	}
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(p)
	mac, err2 := enc.DecodeString(m)
	if err1 != nil || err2 != nil || len(payload) != 24 || !hmac.Equal(mac, s.sign(payload)) {
		return "", time.Time{}, false
	}
	exp = time.Unix(int64(binary.BigEndian.Uint64(payload)), 0)
	if !s.now().Before(exp) {
		return "", time.Time{}, false
	}
	nonce = string(payload[8:])
	s.mu.Lock()
	_, gone := s.revoked[nonce]
	s.mu.Unlock()
	return nonce, exp, !gone
}

// valid reports whether r carries a live session (always, with
// authentication off).
func (s *sessions) valid(r *http.Request) bool {
	if s.off() {
		return true
	}
	c, err := r.Cookie(cookieName(r, sessionCookie))
	if err != nil {
		return false
	}
	_, _, ok := s.parse(c.Value)
	return ok
}

// actor names the person behind r in the audit trail of replays and
// resolves: their session, by the first 8 hex digits of the SHA-256 of its
// nonce. That tells sessions apart and reveals nothing of the cookie,
// which is the nonce and its MAC. Without a login (no admin token) it is
// "dashboard".
func (s *sessions) actor(r *http.Request) string {
	if s.off() {
		return "dashboard"
	}
	c, err := r.Cookie(cookieName(r, sessionCookie))
	if err != nil {
		return "dashboard"
	}
	nonce, _, ok := s.parse(c.Value)
	if !ok {
		return "dashboard"
	}
	sum := sha256.Sum256([]byte(nonce))
	return "dashboard session " + hex.EncodeToString(sum[:4])
}

// revoke ends the session of cookie value v in this process.
func (s *sessions) revoke(v string) {
	nonce, exp, ok := s.parse(v)
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

// requireSession lets a request through with a live session; else a page
// load is sent to the login form and anything else gets 401.
func (d *Dashboard) requireSession(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.sessions.valid(r) {
			next.ServeHTTP(w, r)
			return
		}
		if r.Method == http.MethodGet && r.Header.Get("X-AnyHook-Partial") == "" {
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		d.renderError(w, r, &pageError{http.StatusUnauthorized, "your session has ended; log in again"})
	})
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
	if !d.sessions.checkToken(r.PostForm.Get("token")) {
		d.log.LogAttrs(r.Context(), slog.LevelWarn, "dashboard: login failed", slog.String("remote", r.RemoteAddr))
		d.render(w, r, http.StatusUnauthorized, "login", "Log in", loginData{Next: next, Error: "That is not the admin token."})
		return nil
	}
	v, exp := d.sessions.issue()
	setCookie(w, r, sessionCookie, v, int(time.Until(exp).Seconds()))
	d.log.LogAttrs(r.Context(), slog.LevelInfo, "dashboard: login", slog.String("remote", r.RemoteAddr))
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
