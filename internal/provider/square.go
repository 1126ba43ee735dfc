package provider

import (
	"crypto/sha256"
	"time"

	"github.com/anyhook/anyhook"
)

// square verifies x-square-hmacsha256-signature: base64 HMAC-SHA256 of the
// notification URL (exactly as registered: the source's public_url) followed
// by the body. The legacy SHA-1 x-square-signature is not accepted.
type square struct{ keys [][]byte }

func buildSquare(_ *Settings, keys [][]byte, _ time.Duration) (Provider, error) {
	return &square{keys}, nil
}

const squareHeader = "X-Square-Hmacsha256-Signature"

func (p *square) Verify(r *Request, _ time.Time) (anyhook.Verification, error) {
	h := r.Header.Get(squareHeader)
	if h == "" {
		return anyhook.Verification{}, missing("x-square-hmacsha256-signature")
	}
	sig, err := decodeBase64(h)
	if err != nil {
		return anyhook.Verification{}, fail("malformed x-square-hmacsha256-signature header: want base64")
	}
	if r.URL == "" {
		return anyhook.Verification{}, fail("cannot verify a Square signature without the notification URL; set public_url")
	}
	return signedBy("square hmac-sha256", matchAny(sha256.New, p.keys, [][]byte{sig}, []byte(r.URL), r.Body))
}

// Extract: dedup on event_id. Objects that carry a version (payments,
// orders, …) are ordered by it: the object is data.type/data.id, the version
// data.object.<data.type>.version.
func (p *square) Extract(r *Request) (Extracted, error) {
	v := jsonScalars(r.Body, []string{"event_id"}, []string{"data", "type"}, []string{"data", "id"})
	e := Event{DedupKey: v[0]}
	if v[1] != "" && v[2] != "" {
		ver := jsonScalars(r.Body, []string{"data", "object", v[1], "version"})[0]
		e.Object, e.Version = order(v[1]+"/"+v[2], ver)
	}
	return Extracted{Events: []Event{e}}, nil
}

// contentKey: the signed URL and body. Only a source whose id rule reads
// an unsigned header uses it; the body's event_id is signed.
func (p *square) contentKey(r *Request) string {
	return contentKey("square", []byte(r.URL), r.Body)
}

func signSquare(secret string, r *Request, _ time.Time) error {
	r.Header.Set(squareHeader, b64(mac(sha256.New, []byte(secret), []byte(r.URL), r.Body)))
	return nil
}

// typeOfSquare: the body's type (payment.updated).
func typeOfSquare(_ *Request, body []byte) string { return jsonScalars(body, []string{"type"})[0] }
