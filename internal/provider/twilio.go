package provider

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
)

// twilio verifies X-Twilio-Signature: base64 HMAC-SHA1, keyed with the auth
// token, of the full URL Twilio called followed by the form parameters
// sorted by name (name then value, no separators). For JSON bodies Twilio
// puts bodySHA256=<hex SHA-256 of the body> in the URL and signs the URL
// alone. Like Twilio's own SDKs, the URL is tried as given, without its port
// and with the scheme's default port, since Twilio is not consistent there.
type twilio struct{ keys [][]byte }

func buildTwilio(_ *Settings, keys [][]byte, _ time.Duration) (Provider, error) {
	return &twilio{keys}, nil
}

func (p *twilio) Verify(r *Request, _ time.Time) (anyhook.Verification, error) {
	h := r.Header.Get("X-Twilio-Signature")
	if h == "" {
		return anyhook.Verification{}, missing("X-Twilio-Signature")
	}
	sig, err := base64.StdEncoding.DecodeString(h)
	if err != nil {
		return anyhook.Verification{}, fail("malformed X-Twilio-Signature header: want base64")
	}
	if r.URL == "" {
		return anyhook.Verification{}, fail("cannot verify a Twilio signature without the public URL; set public_url")
	}
	bodyHash := queryParam(r.URL, "bodySHA256")
	if bodyHash == "" && !isForm(r.Header) && len(r.Body) > 0 {
		// Only the URL would be signed: the body would be unauthenticated.
		return anyhook.Verification{}, fail("a Twilio request with a body must be a form or carry bodySHA256 in its URL")
	}
	params, err := twilioSigned(r, bodyHash)
	if err != nil {
		return anyhook.Verification{}, fail("malformed form body")
	}
	key := -1
	for _, cand := range urlVariants(r.URL) {
		if key = matchAny(sha1.New, p.keys, [][]byte{sig}, []byte(cand), params); key >= 0 {
			break
		}
	}
	scheme := "twilio hmac-sha1"
	if bodyHash != "" {
		scheme += " with bodySHA256"
	}
	v, err := signedBy(scheme, key)
	if err != nil {
		return v, err
	}
	if bodyHash != "" {
		sum := sha256.Sum256(r.Body)
		got, err := hex.DecodeString(bodyHash)
		if err != nil || !hmac.Equal(got, sum[:]) {
			return anyhook.Verification{}, fail("body does not match bodySHA256")
		}
	}
	return v, nil
}

// twilioSigned returns what Twilio signs after the URL: a form's sorted
// parameters, or nothing when the URL carries bodySHA256 (it binds the
// body) or the body is not a form.
func twilioSigned(r *Request, bodyHash string) ([]byte, error) {
	if bodyHash != "" || !isForm(r.Header) {
		return nil, nil
	}
	return twilioParams(r.Body)
}

// queryParam reads one query parameter of a URL, leniently.
func queryParam(u, name string) string {
	_, q, _ := strings.Cut(u, "?")
	q, _, _ = strings.Cut(q, "#")
	vals, _ := url.ParseQuery(q) // keeps what parses
	return vals.Get(name)
}

// twilioParams concatenates the form's names and values sorted by name
// (and, for a repeated name, by value), as Twilio signs them.
func twilioParams(body []byte) ([]byte, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, err
	}
	var b []byte
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range form {
			if !yield(k) {
				return
			}
		}
	}) {
		vs := slices.Clone(form[k])
		slices.Sort(vs)
		for _, v := range vs {
			b = append(append(b, k...), v...)
		}
	}
	return b, nil
}

// urlVariants returns u, then u without its port, or with the scheme's
// default port when it has none.
func urlVariants(u string) []string {
	i := strings.Index(u, "://")
	if i < 0 {
		return []string{u}
	}
	start := i + 3
	end := len(u)
	if j := strings.IndexAny(u[start:], "/?#"); j >= 0 {
		end = start + j
	}
	hostStart := start
	if at := strings.LastIndexByte(u[start:end], '@'); at >= 0 {
		hostStart = start + at + 1
	}
	host := u[hostStart:end]
	if c := strings.LastIndexByte(host, ':'); c >= 0 && c > strings.LastIndexByte(host, ']') {
		return []string{u, u[:hostStart] + host[:c] + u[end:]}
	}
	port := map[string]string{"https": "443", "http": "80"}[strings.ToLower(u[:i])]
	if port == "" {
		return []string{u}
	}
	return []string{u, u[:end] + ":" + port + u[end:]}
}

// statusRank orders messaging statuses, which Twilio may deliver out of order.
var statusRank = map[string]string{
	"accepted": "1", "scheduled": "1", "queued": "2", "sending": "3", "sent": "4",
	"receiving": "4", "received": "5", "delivered": "5", "undelivered": "5",
	"failed": "5", "canceled": "5", "partially_delivered": "5", "read": "6",
}

// Extract: I-Twilio-Idempotency-Token is constant across Twilio's retries,
// but not signed. The content key is the canonical signed string — the URL
// followed by the decoded form parameters sorted by name, or the URL alone
// when it carries bodySHA256 — so a resend under a fresh token, or with the
// same parameters re-encoded (reordered, %20 for +, escaped letters), is
// still a duplicate. Without a token the dedup key is "sha256:" and the
// content key. Form callbacks are ordered per SID: voice by SequenceNumber,
// messaging by the rank of MessageStatus (queued < sending < sent <
// delivered/failed < read).
func (p *twilio) Extract(r *Request) (Extracted, error) {
	e := Event{DedupKey: r.Header.Get("I-Twilio-Idempotency-Token"), ContentKey: p.contentKey(r)}
	if e.DedupKey == "" {
		e.DedupKey = "sha256:" + e.ContentKey
	}
	if isForm(r.Header) {
		if form, err := url.ParseQuery(string(r.Body)); err == nil {
			if sid := form.Get("MessageSid"); sid != "" {
				e.Object, e.Version = order(sid, statusRank[strings.ToLower(form.Get("MessageStatus"))])
			} else if sid := form.Get("CallSid"); sid != "" {
				e.Object, e.Version = order(sid, form.Get("SequenceNumber"))
			}
		}
	}
	return Extracted{Events: []Event{e}}, nil
}

// contentKey hashes the string Twilio signs. A form that does not parse
// (it cannot have verified) is hashed as received.
func (p *twilio) contentKey(r *Request) string {
	params, err := twilioSigned(r, queryParam(r.URL, "bodySHA256"))
	if err != nil {
		params = r.Body
	}
	return contentKey("twilio", []byte(r.URL), params)
}

// signTwilio signs a form body with its parameters; any other non-empty
// body is bound by appending bodySHA256 to r.URL, as Twilio does for JSON.
func signTwilio(secret string, r *Request, _ time.Time) error {
	var params []byte
	if isForm(r.Header) {
		var err error
		if params, err = twilioParams(r.Body); err != nil {
			return err
		}
	} else if len(r.Body) > 0 {
		sum := sha256.Sum256(r.Body)
		base, frag, hasFrag := strings.Cut(r.URL, "#") // the query ends at a fragment
		sep := "?"
		if strings.Contains(base, "?") {
			sep = "&"
		}
		r.URL = base + sep + "bodySHA256=" + hex.EncodeToString(sum[:])
		if hasFrag {
			r.URL += "#" + frag
		}
	}
	r.Header.Set("X-Twilio-Signature", b64(mac(sha1.New, []byte(secret), []byte(r.URL), params)))
	return nil
}
