package provider

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
)

// DefaultTolerance bounds the clock skew, past and future, of timestamped
// schemes when a source sets no tolerance.
const DefaultTolerance = 5 * time.Minute

func fail(format string, args ...any) *Error { return &Error{Msg: fmt.Sprintf(format, args...)} }

func missing(header string) *Error { return fail("missing %s header", header) }

func noMatch() *Error { return fail("no signature matched") }

// contentKey is a content key (see Event.ContentKey): the hex SHA-256 of
// tag, a NUL byte, and the concatenated parts — the exact bytes that the
// signature covers, so two requests get one key exactly when one
// signature would vouch for both.
func contentKey(tag string, parts ...[]byte) string {
	h := sha256.New()
	h.Write([]byte(tag))
	h.Write([]byte{0})
	for _, p := range parts {
		h.Write(p)
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))
}

// contentKeyer is implemented by every provider whose requests are signed:
// contentKey returns r's content key, "" when nothing in r is signed. A
// source whose id rule reads a header that the signature does not cover
// gets its events' content keys from it.
type contentKeyer interface {
	contentKey(r *Request) string
}

// headerSigner is implemented by providers whose signature covers some
// header values (Standard Webhooks' webhook-id): signsHeader reports
// whether it covers r's header name (canonical form).
type headerSigner interface {
	signsHeader(r *Request, name string) bool
}

// mac is the HMAC of the concatenated parts under key.
func mac(h func() hash.Hash, key []byte, parts ...[]byte) []byte {
	m := hmac.New(h, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// matchAny returns the index of the first key whose HMAC of parts equals
// any candidate signature, comparing in constant time; -1 when none does.
// A nil key (a secret the scheme could not decode) never matches, so the
// index is always the secret's own index in the source's secrets.
func matchAny(h func() hash.Hash, keys [][]byte, sigs [][]byte, parts ...[]byte) int {
	for i, key := range keys {
		if key == nil {
			continue
		}
		sum := mac(h, key, parts...)
		for _, s := range sigs {
			if hmac.Equal(sum, s) {
				return i
			}
		}
	}
	return -1
}

// signedBy is the verification of a request whose signature matched
// secrets[key] under scheme; a key of -1 (none matched) is the rejection
// "no signature matched".
func signedBy(scheme string, key int) (anyhook.Verification, error) {
	if key < 0 {
		return anyhook.Verification{}, noMatch()
	}
	return anyhook.Verification{Method: anyhook.VerifySignature, Scheme: scheme, Secret: key}, nil
}

// unsigned is the verification of a request of a signature: none source.
var unsigned = anyhook.Verification{Method: anyhook.VerifyNone, Scheme: "unsigned (signature: none)", Secret: -1}

// timely returns v, unless t is more than tol away from now.
func timely(v anyhook.Verification, err error, t, now time.Time, tol time.Duration) (anyhook.Verification, error) {
	if err != nil {
		return anyhook.Verification{}, err
	}
	if err := checkTime(t, now, tol); err != nil {
		return anyhook.Verification{}, err
	}
	return v, nil
}

// equalSecret compares a presented token with a secret in constant time,
// hashing both first so that not even the length leaks.
func equalSecret(presented, secret string) bool {
	a, b := sha256.Sum256([]byte(presented)), sha256.Sum256([]byte(secret))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// headerParam returns the value of the last key=value part of a
// sep-separated header value (Stripe's t=, Paddle's ts=): the one their
// verifiers sign with.
func headerParam(h, sep, key string) string {
	var val string
	for part := range strings.SplitSeq(h, sep) {
		if k, v, _ := strings.Cut(strings.TrimSpace(part), "="); k == key {
			val = v
		}
	}
	return val
}

// parseUnix parses a decimal timestamp; ms selects milliseconds.
func parseUnix(s string, ms bool) (time.Time, bool) {
	if s == "" || len(s) > 19 {
		return time.Time{}, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return time.Time{}, false
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return time.Time{}, false
	}
	if ms {
		return time.UnixMilli(n), true
	}
	return time.Unix(n, 0), true
}

// checkTime rejects a timestamp more than tol away from now, either way,
// saying by how much: a clock that drifted and a replay of an old request
// read differently.
func checkTime(t, now time.Time, tol time.Duration) error {
	d := now.Sub(t)
	switch {
	case d > tol:
		return fail("timestamp outside tolerance: %s old, %s allowed", beyond(d, tol), tol)
	case d < -tol:
		return fail("timestamp outside tolerance: %s in the future, %s allowed", beyond(-d, tol), tol)
	}
	return nil
}

// beyond is d, over tol, in whole seconds, or milliseconds where whole
// seconds would read as tol itself.
func beyond(d, tol time.Duration) time.Duration {
	if s := d.Truncate(time.Second); s > tol {
		return s
	}
	return d.Truncate(time.Millisecond)
}

// decodeBase64 accepts standard and URL-safe base64, padded or not.
func decodeBase64(s string) ([]byte, error) {
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		var b []byte
		if b, err = enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, err
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

// isForm reports whether the request carries a urlencoded form.
func isForm(h http.Header) bool {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && mt == "application/x-www-form-urlencoded"
}

// jsonBody reports whether body looks like a JSON object or array.
func jsonBody(body []byte) bool {
	s := strings.TrimLeft(string(body[:min(len(body), 64)]), " \t\r\n")
	return s != "" && (s[0] == '{' || s[0] == '[')
}

// order returns object and version only when both are known: half an
// ordering rule cannot order anything.
func order(object, version string) (string, string) {
	if object == "" || version == "" {
		return "", ""
	}
	return object, version
}

func unixString(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }

func ensureHeader(r *Request) {
	if r.Header == nil {
		r.Header = make(http.Header)
	}
}
