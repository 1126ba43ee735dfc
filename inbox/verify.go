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

// ErrBadSignature matches every verification failure of StandardWebhooks
// (errors.Is), and any *SignatureError.
var ErrBadSignature = errors.New("inbox: bad signature")

// SignatureError is a verification failure whose Reason is safe to send
// back to the sender: it never contains a secret or an expected signature.
// StandardWebhooks returns one; a custom Verifier may too. NewHandler
// answers 400 "invalid signature: " + Reason for it, and plain "invalid
// signature" for any other error.
type SignatureError struct {
	// Reason says what was wrong: "timestamp outside tolerance",
	// "signature mismatch", a missing header.
	Reason string
}

func (e *SignatureError) Error() string { return "inbox: bad signature: " + e.Reason }

// Is makes errors.Is(err, ErrBadSignature) true.
func (e *SignatureError) Is(target error) bool { return target == ErrBadSignature }

func badSignature(format string, args ...any) error {
	return &SignatureError{Reason: fmt.Sprintf(format, args...)}
}

// Verifier authenticates a request from its exact body bytes and headers.
// Return a *SignatureError to give the sender a safe reason.
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
		return badSignature("missing webhook-id, webhook-timestamp or webhook-signature")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return badSignature("malformed webhook-timestamp")
	}
	now, tol := time.Now, s.Tolerance
	if s.Now != nil {
		now = s.Now
	}
	if tol <= 0 {
		tol = 5 * time.Minute
	}
	if d := now().Sub(time.Unix(sec, 0)); d > tol || d < -tol {
		return badSignature("timestamp outside tolerance (%v)", tol)
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
	return badSignature("signature mismatch (no matching v1 signature)")
}

// EventIDFunc returns the event id (the dedup key) of a request that its
// Verifier has accepted. Take it from material the verifier authenticated
// (a signed header, the provider's event id in a signed body), never from
// an unsigned header: a captured request resent with another value there
// would escape deduplication and run again. Return a *SignatureError to
// give the sender a safe reason.
type EventIDFunc func(body []byte, header http.Header) (string, error)

// WebhookID is the EventIDFunc for StandardWebhooks, and NewHandler's
// default with it: the webhook-id header, which the signature covers.
// AnyHook sets it to the X-AnyHook-Delivery value (the AnyHook event id); a
// request where the two differ is refused.
func WebhookID(_ []byte, header http.Header) (string, error) {
	id, delivery := header.Get("webhook-id"), header.Get("X-AnyHook-Delivery")
	switch {
	case id == "":
		return "", badSignature("missing webhook-id")
	case delivery != "" && delivery != id:
		return "", badSignature("X-AnyHook-Delivery does not match the signed webhook-id")
	}
	return id, nil
}
