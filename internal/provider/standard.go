package provider

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
)

// standard verifies Standard Webhooks v1 (also Svix's svix-* headers):
// webhook-signature is a space-separated list of "<version>,<base64>" over
// "id.timestamp.body", keyed with the base64 after whsec_. Versions other
// than v1 (v1a, v2, …) are ignored.
type standard struct {
	keys [][]byte
	tol  time.Duration
}

func buildStandard(s *Settings, _ [][]byte, tol time.Duration) (Provider, error) {
	keys, err := standardKeys(s.Secrets, true)
	if err != nil {
		return nil, err
	}
	return &standard{keys, tol}, nil
}

// standardKeys decodes whsec_ (or bare base64) secrets, one key per
// secret in order. With strict unset, a secret that does not decode is a
// nil key (which never matches) instead of an error.
func standardKeys(secrets []string, strict bool) ([][]byte, error) {
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		k, err := standardKey(s)
		if err != nil {
			if strict {
				return nil, errorf(fmt.Sprintf("secrets[%d]", i), "not a Standard Webhooks secret (want whsec_ followed by base64)")
			}
			continue
		}
		keys[i] = k
	}
	return keys, nil
}

func standardKey(secret string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err == nil && len(k) == 0 {
		err = fmt.Errorf("empty key")
	}
	return k, err
}

func (p *standard) Verify(r *Request, now time.Time) (anyhook.Verification, error) {
	return verifyStandard("standard webhooks v1", p.keys, r.Header, r.Body, now, p.tol)
}

// standardHeaders returns id, timestamp and signature, from webhook-* or,
// when those are absent, svix-*.
func standardHeaders(h http.Header) (prefix, id, ts, sig string) {
	prefix = "webhook-"
	if h.Get("webhook-signature") == "" && h.Get("svix-signature") != "" {
		prefix = "svix-"
	}
	return prefix, h.Get(prefix + "id"), h.Get(prefix + "timestamp"), h.Get(prefix + "signature")
}

// verifyStandard checks a Standard Webhooks signature; scheme names it
// (svix-* headers add " (svix headers)").
func verifyStandard(scheme string, keys [][]byte, h http.Header, body []byte, now time.Time, tol time.Duration) (anyhook.Verification, error) {
	prefix, id, ts, sig := standardHeaders(h)
	switch {
	case sig == "":
		return anyhook.Verification{}, missing(prefix + "signature")
	case id == "":
		return anyhook.Verification{}, missing(prefix + "id")
	case ts == "":
		return anyhook.Verification{}, missing(prefix + "timestamp")
	}
	t, ok := parseUnix(ts, false)
	if !ok {
		return anyhook.Verification{}, fail("malformed %stimestamp header", prefix)
	}
	var sigs [][]byte
	for _, s := range strings.Fields(sig) {
		if v, b, _ := strings.Cut(s, ","); v == "v1" {
			if d, err := base64.StdEncoding.DecodeString(b); err == nil {
				sigs = append(sigs, d)
			}
		}
	}
	if len(sigs) == 0 {
		return anyhook.Verification{}, fail("no v1 signature in %ssignature header", prefix)
	}
	if prefix == "svix-" {
		scheme += " (svix headers)"
	}
	v, err := signedBy(scheme, matchAny(sha256.New, keys, sigs, []byte(id), []byte("."), []byte(ts), []byte("."), body))
	return timely(v, err, t, now, tol)
}

// standardContent is the content key of a Standard Webhooks request: its
// signed "id.timestamp.body".
func standardContent(id, ts string, body []byte) string {
	return contentKey("standard", []byte(id), []byte("."), []byte(ts), []byte("."), body)
}

func (p *standard) contentKey(r *Request) string {
	_, id, ts, _ := standardHeaders(r.Header)
	return standardContent(id, ts, r.Body)
}

func (p *standard) signsHeader(r *Request, name string) bool { return standardSigns(r.Header, name) }

// standardSigns reports whether the Standard Webhooks signature covers the
// header name (canonical form): the id and timestamp of the prefix in use.
func standardSigns(h http.Header, name string) bool {
	prefix, _, _, _ := standardHeaders(h)
	return name == http.CanonicalHeaderKey(prefix+"id") || name == http.CanonicalHeaderKey(prefix+"timestamp")
}

// Extract: webhook-id is the idempotency key, stable across retries; it is
// signed, so no content key is needed.
func (p *standard) Extract(r *Request) (Extracted, error) {
	_, id, _, _ := standardHeaders(r.Header)
	return Extracted{Events: []Event{{DedupKey: id}}}, nil
}

// signStandard uses webhook-id from r.Header, or sets a fresh one.
func signStandard(secret string, r *Request, now time.Time) error {
	key, err := standardKey(secret)
	if err != nil {
		return fmt.Errorf("not a Standard Webhooks secret (want whsec_ followed by base64)")
	}
	setStandard(key, r, now)
	return nil
}

func setStandard(key []byte, r *Request, now time.Time) {
	id := r.Header.Get("webhook-id")
	if id == "" {
		id = "msg_" + rand.Text()
		r.Header.Set("webhook-id", id)
	}
	ts := unixString(now)
	r.Header.Set("webhook-timestamp", ts)
	r.Header.Set("webhook-signature", "v1,"+b64(mac(sha256.New, key, []byte(id), []byte("."), []byte(ts), []byte("."), r.Body)))
}

// typeOfStandard: the body's type, as the Standard Webhooks spec
// recommends (invoice.paid).
func typeOfStandard(_ *Request, body []byte) string { return jsonScalars(body, []string{"type"})[0] }
