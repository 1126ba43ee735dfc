package provider

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
)

// stripe verifies Stripe-Signature: t=<unix s>,v1=<hex>[,v1=…]. The MAC is
// HMAC-SHA256 of "t.body" keyed with the whole secret string (whsec_… is
// not decoded). Unknown schemes such as v0 are ignored.
type stripe struct {
	keys [][]byte
	tol  time.Duration
}

func buildStripe(_ *Settings, keys [][]byte, tol time.Duration) (Provider, error) {
	for i, k := range keys {
		// Stripe's endpoint secrets (and the Stripe CLI's) all start with
		// whsec_; anything else is an API key or a typo, and would fail
		// every request.
		if !strings.HasPrefix(string(k), "whsec_") {
			return nil, errorf(fmt.Sprintf("secrets[%d]", i), "not a Stripe signing secret: those start with whsec_ (the endpoint's signing secret in the Stripe dashboard, or stripe listen --print-secret)")
		}
	}
	return &stripe{keys, tol}, nil
}

func (p *stripe) Verify(r *Request, now time.Time) (anyhook.Verification, error) {
	h := r.Header.Get("Stripe-Signature")
	if h == "" {
		return anyhook.Verification{}, missing("Stripe-Signature")
	}
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(h, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if b, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, b)
			}
		}
	}
	t, ok := parseUnix(ts, false)
	if !ok {
		return anyhook.Verification{}, fail("malformed Stripe-Signature header: no valid t= timestamp")
	}
	if len(sigs) == 0 {
		return anyhook.Verification{}, fail("malformed Stripe-Signature header: no v1 signature")
	}
	v, err := signedBy("stripe v1", matchAny(sha256.New, p.keys, sigs, []byte(ts), []byte("."), r.Body))
	return timely(v, err, t, now, p.tol)
}

// Extract: dedup on the event id; order by data.object.id at created.
func (p *stripe) Extract(r *Request) (Extracted, error) {
	v := jsonScalars(r.Body, []string{"id"}, []string{"created"}, []string{"data", "object", "id"})
	e := Event{DedupKey: v[0]}
	e.Object, e.Version = order(v[2], v[1])
	return Extracted{Events: []Event{e}}, nil
}

// contentKey: the signed "t.body". Only a source whose id rule reads an
// unsigned header uses it; the body's id is signed.
func (p *stripe) contentKey(r *Request) string {
	return contentKey("stripe", []byte(headerParam(r.Header.Get("Stripe-Signature"), ",", "t")), []byte("."), r.Body)
}

func signStripe(secret string, r *Request, now time.Time) error {
	ts := unixString(now)
	sum := mac(sha256.New, []byte(secret), []byte(ts), []byte("."), r.Body)
	r.Header.Set("Stripe-Signature", "t="+ts+",v1="+hex.EncodeToString(sum))
	return nil
}

// typeOfStripe: the body's type (invoice.paid).
func typeOfStripe(_ *Request, body []byte) string { return jsonScalars(body, []string{"type"})[0] }
