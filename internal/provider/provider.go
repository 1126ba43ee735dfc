// Package provider knows each webhook provider's signature scheme, dedup key
// and ordering hints. Everything here is a pure function of the request bytes
// (and the clock, for timestamped schemes): verify over the exact bytes
// received, in constant time, before anything else looks at the body.
package provider

import (
	"net/http"
	"time"

	"github.com/anyhook/anyhook"
)

// Request is an inbound request as a verifier sees it.
type Request struct {
	Method string
	// URL is the full URL as the provider called it: the source's
	// public_url (plus the request's query) when configured, else
	// rebuilt from the request. URL-bound schemes sign it.
	URL    string
	Header http.Header
	Body   []byte // exact bytes received
}

// Event is what a provider derives from one verified request (or one item
// of a batch).
type Event struct {
	DedupKey string // "" when the request carries none
	// ContentKey is a second dedup key, set where the dedup key is read
	// from a header the signature does not cover: the hex SHA-256 of what
	// the signature covers (plus, for Shopify, the topic if it is a known
	// one). An event is a duplicate when either key was seen before in its
	// source, so a resend of one signed request under a fresh id header is
	// a duplicate too. "" when the dedup key is itself signed.
	ContentKey string
	// Type is the event type as the provider names it
	// (invoice.paid, pull_request.opened, orders/create); "" when the
	// provider has none or the request does not say.
	Type    string
	Object  string // ordering: the object the event is about
	Version string // ordering: its monotonic version (integer or RFC 3339)
	// Body is the item's own bytes for a batch item; nil means the
	// request body.
	Body []byte
}

// Extracted is the result of reading a verified request.
type Extracted struct {
	Events []Event
	// Challenge, when set, is answered as is with 200 and nothing is
	// recorded (Slack url_verification and the like).
	Challenge *Challenge
}

// Challenge is a direct answer to a request-echo challenge.
type Challenge struct {
	ContentType string
	Body        []byte
}

// Provider verifies and reads the requests of one configured source.
type Provider interface {
	// Verify checks the signature (and timestamp, where the scheme has
	// one) over r's exact bytes and says what it checked: the scheme and
	// the index of the secret that matched. Its error is an *Error, safe
	// to show.
	Verify(r *Request, now time.Time) (anyhook.Verification, error)
	// Extract derives the events of a verified request.
	Extract(r *Request) (Extracted, error)
}

// Error is a rejection whose message is safe to send to the client: it
// never contains a secret or an expected signature.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }
