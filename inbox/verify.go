package inbox

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrBadSignature is wrapped by every verification failure. The wrapped
// message says what was wrong (missing header, stale timestamp, no matching
// signature) and never contains the expected signature.
var ErrBadSignature = errors.New("inbox: bad signature")

// Verifier authenticates a request from its exact body bytes and headers.
type Verifier interface {
	Verify(body []byte, header http.Header) error
}

// VerifierFunc adapts a function to Verifier, for a provider's own scheme.
type VerifierFunc func(body []byte, header http.Header) error

// Verify calls f.
func (f VerifierFunc) Verify(body []byte, header http.Header) error { return f(body, header) }

// StandardWebhooks verifies the Standard Webhooks v1 signature AnyHook puts
// on outbound deliveries when a destination has a signing_secret: headers
// webhook-id, webhook-timestamp and webhook-signature, an HMAC-SHA256 over
// "id.timestamp.body" in base64, possibly several space-separated "v1,…"
// entries (during secret rotation).
type StandardWebhooks struct {
	key []byte
	// Tolerance is how far webhook-timestamp may be from Now, either way.
	// Default 5 minutes.
	Tolerance time.Duration
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// NewStandardWebhooks returns a verifier for secret, in the "whsec_…" form
// AnyHook's configuration uses (base64 after the prefix).
func NewStandardWebhooks(secret string) (*StandardWebhooks, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil || len(key) == 0 {
		return nil, fmt.Errorf("%w: signing secret must be whsec_ followed by base64", ErrInvalid)
	}
	return &StandardWebhooks{key: key}, nil
}

// Verify implements Verifier.
func (s *StandardWebhooks) Verify(body []byte, h http.Header) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return fmt.Errorf("%w: missing webhook-id, webhook-timestamp or webhook-signature", ErrBadSignature)
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: malformed webhook-timestamp", ErrBadSignature)
	}
	now, tol := time.Now, s.Tolerance
	if s.Now != nil {
		now = s.Now
	}
	if tol <= 0 {
		tol = 5 * time.Minute
	}
	if d := now().Sub(time.Unix(sec, 0)); d > tol || d < -tol {
		return fmt.Errorf("%w: webhook-timestamp outside tolerance", ErrBadSignature)
	}
	mac := hmac.New(sha256.New, s.key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(ts))
	mac.Write([]byte{'.'})
	mac.Write(body)
	want := mac.Sum(nil)
	for _, sig := range strings.Fields(sigs) {
		version, b64, ok := strings.Cut(sig, ",")
		if !ok || version != "v1" {
			continue
		}
		got, err := base64.StdEncoding.DecodeString(b64)
		if err == nil && hmac.Equal(got, want) {
			return nil
		}
	}
	return fmt.Errorf("%w: no matching v1 signature", ErrBadSignature)
}
