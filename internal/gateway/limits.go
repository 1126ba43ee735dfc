package gateway

import (
	"encoding/json"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/ingest"
	"github.com/anyhook/anyhook/internal/throttle"
)

// The admin brute-force guard: after AuthMaxFailures answers of 401 to one
// remote address within AuthWindow, a wrong credential from that address
// gets 429 instead of 401 until the window ends. A right one always
// passes. At most authMaxAddresses addresses are tracked.
const (
	AuthMaxFailures  = 10
	AuthWindow       = time.Minute
	authMaxAddresses = 10000
)

// limitSources puts each source's token bucket (sourceBuckets: its
// rate_limit) in front of ingest: over it, 429 with Retry-After, before the
// body is read, and a record in rejected.
func limitSources(next http.Handler, buckets map[string]*throttle.Bucket, now func() time.Time, rejected ingest.RejectionLog) http.Handler {
	if len(buckets) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b := buckets[r.PathValue("source")]; b != nil {
			if ok, wait := b.Allow(now()); !ok {
				const msg = "rate limit of this source exceeded; retry later"
				w.Header().Set("Retry-After", retryAfter(wait))
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusTooManyRequests)
				json.NewEncoder(w).Encode(map[string]string{"error": msg})
				rejected.Record(anyhook.Rejection{Source: r.PathValue("source"), KnownSource: true,
					Reason: anyhook.RejectRateLimited, Status: http.StatusTooManyRequests, Message: msg,
					RemoteAddr: r.RemoteAddr, BodySize: r.ContentLength}, r.Header, nil)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// guardAuth counts the 401 answers to presented credentials (a wrong
// bearer token, a failed dashboard login) per remote address. A 403 (a
// right token refused for its scopes) is no guess and is not counted. Past the
// limit, a credential is still checked: the right one passes, a wrong one
// gets 429 with Retry-After instead of its 401. Refusing the right one too
// would let one misconfigured client lock the on-call engineer out, and
// behind a proxy every client shares one address. What stops guessing is
// the token's length, not this counter: it makes a guesser visible (the
// log, the 429s) and keeps the failures from filling the log.
// Ingest is not guarded: it has no token, and providers share addresses.
func guardAuth(next http.Handler, f *throttle.Failures, now func() time.Time, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Only a presented credential counts: a bearer token or a login
		// form. An expired dashboard session (a page refreshing itself)
		// also gets 401 but guesses nothing: its cookie is MACed.
		guess := r.Header.Get("Authorization") != "" || (r.Method == http.MethodPost && r.URL.Path == "/login")
		if !guess || strings.HasPrefix(r.URL.Path, "/webhooks/") {
			next.ServeHTTP(w, r)
			return
		}
		ip := remoteIP(r)
		if wait, blocked := f.Blocked(ip, now()); blocked {
			lw := &lockoutWriter{w: w, r: r, wait: wait, header: http.Header{}}
			next.ServeHTTP(lw, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.code == http.StatusUnauthorized {
			f.Fail(ip, now())
			if _, blocked := f.Blocked(ip, now()); blocked {
				log.Warn("admin authentication: address blocked after repeated failures", "remote", ip, "path", r.URL.Path)
			}
		}
	})
}

// lockoutWriter answers for a handler serving a blocked address: whatever
// the handler answers passes, but a 401 (the credential was wrong) becomes
// 429 with Retry-After. The handler's headers are held until its status is
// known, so that a 401's WWW-Authenticate never reaches the 429.
type lockoutWriter struct {
	w       http.ResponseWriter
	r       *http.Request
	wait    time.Duration
	header  http.Header
	code    int
	refused bool // the 401 became a 429: the handler's body is dropped
}

func (l *lockoutWriter) Header() http.Header { return l.header }

func (l *lockoutWriter) WriteHeader(code int) {
	if l.code != 0 {
		return
	}
	l.code = code
	if code == http.StatusUnauthorized {
		l.refused = true
		tooManyFailures(l.w, l.r, l.wait)
		return
	}
	h := l.w.Header()
	for k, v := range l.header {
		h[k] = v
	}
	l.w.WriteHeader(code)
}

func (l *lockoutWriter) Write(b []byte) (int, error) {
	if l.code == 0 {
		l.WriteHeader(http.StatusOK)
	}
	if l.refused {
		return len(b), nil
	}
	return l.w.Write(b)
}

func (l *lockoutWriter) Flush() {
	if f, ok := l.w.(http.Flusher); ok && !l.refused && l.code != 0 {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection (a lease
// stream lifts its write deadline).
func (l *lockoutWriter) Unwrap() http.ResponseWriter { return l.w }

// tooManyFailures answers 429 to a wrong credential from a blocked address.
func tooManyFailures(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	w.Header().Set("Retry-After", retryAfter(wait))
	msg := "too many failed authentication attempts from this address; retry later"
	if strings.HasPrefix(r.URL.Path, "/api/") {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "too_many_requests", "message": msg}})
		return
	}
	http.Error(w, msg, http.StatusTooManyRequests)
}

// remoteIP is the address of the connection (X-Forwarded-For is not
// trusted: anyone can send it).
func remoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// retryAfter renders a wait as whole seconds, at least 1.
func retryAfter(d time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(d.Seconds()))))
}

// statusWriter remembers the status code of a response.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
