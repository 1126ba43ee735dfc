package anyhook

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Event is one genuine request as it arrived from a provider, kept byte for
// byte. A provider request that carries a batch (HubSpot) yields one Event
// per item, each with its own dedup key.
type Event struct {
	ID         string    // AnyHook event id; the X-AnyHook-Delivery value
	Source     string    // source name from the config
	DedupKey   string    // provider event id; "" when the source has none
	ReceivedAt time.Time // when the gateway read the request

	Method string
	Path   string
	Header http.Header // as received, canonical header keys
	Body   []byte      // exact bytes received

	// Type is the event type as the provider names it (invoice.paid,
	// pull_request.opened); "" when it has none.
	Type string
	// NotRouted are the destinations of the source that a filter kept
	// this event from: they got no delivery (SPEC §4).
	NotRouted []string

	// Ordering hints (SPEC §7); empty when the source has no ordering rules.
	Object  string
	Version string
	Stale   bool // older than the highest version seen for Object

	Duplicates int64 // how many duplicates of this event were absorbed

	// RemoteAddr is the address of the connection the event arrived on
	// ("" for events recorded before the store kept it).
	RemoteAddr string
	// Verification is how the request was authenticated.
	Verification Verification
	// Origin is how the event reached the gateway: OriginWebhook (a
	// request to its source's URL) or OriginBackfill (read from the
	// provider's API by a backfill, docs/backfill.md).
	Origin string
	// Arrivals are the first duplicates' arrivals (at most
	// store.MaxArrivals, oldest first); Duplicates counts them all.
	// Filled by Store.Event, not by lists.
	Arrivals []Arrival

	// BodyPruned is set once retention (log.retention) emptied Body: the
	// event can no longer be sent. Filled by Store.Event and Store.Claim.
	BodyPruned bool

	Deliveries []Delivery // filled by Store.Event, not by lists
	// Actions are what people did to the event's deliveries (replays,
	// resends, discards, marks), oldest first; filled by Store.Event.
	Actions []Action
}

// Verification methods: how an event was authenticated.
const (
	VerifySignature = "signature" // a signature over the request, with one of the source's secrets
	VerifyToken     = "token"     // a shared token sent as is (GitLab's X-Gitlab-Token)
	VerifyNone      = "none"      // nothing: the source says signature: none
	VerifyFetched   = "fetched"   // read from the provider's API, not received
)

// Origins of an event (Event.Origin).
const (
	OriginWebhook  = "webhook"  // received at POST /webhooks/{source}
	OriginBackfill = "backfill" // fetched from the provider's API after an outage
)

// Verification is what was checked before an event was recorded. It names
// the secret that matched by its index in the source's secrets list, never
// the secret itself.
type Verification struct {
	// Method is one of the Verify* values; "" when it was not recorded
	// (events recorded before the store kept it).
	Method string
	// Scheme names what was checked: "stripe v1", "github sha256",
	// "gitlab token", "unsigned (signature: none)", …
	Scheme string
	// Secret is the index in the source's secrets of the one that
	// matched; -1 when no secret was involved.
	Secret int
}

// Arrival is one duplicate request of an event: the provider (or anyone
// holding a signed copy) sent it again.
type Arrival struct {
	Seq        int // 1 for the first duplicate, 2 for the second, …
	ReceivedAt time.Time
	RemoteAddr string
	// Header is the duplicate's headers as received (credential headers
	// removed, as for the event); HeaderCut says they were cut to fit the
	// stored bound (long values shortened, trailing headers dropped).
	Header    http.Header
	HeaderCut bool
	// BodySHA256 is set when this duplicate's body differed from the
	// event's (the same dedup key, another payload, which was dropped):
	// the hex SHA-256 of its body. "" when the bodies were the same, or
	// the event's body was pruned before the duplicate came.
	BodySHA256 string
}

// Reasons of a Rejection: the ingest outcome of the refused request.
const (
	RejectUnknownSource = "unknown_source"     // 404: no such source
	RejectSignature     = "rejected_signature" // 400: missing or invalid signature, timestamp outside tolerance
	RejectInvalid       = "invalid"            // 400: verified, but no event could be read from it
	RejectTooLarge      = "too_large"          // 413: body over max_body
	RejectRateLimited   = "rate_limited"       // 429: over the source's rate_limit
)

// ValidRejectReason reports whether s is one of the Reject* reasons.
func ValidRejectReason(s string) bool {
	switch s {
	case RejectUnknownSource, RejectSignature, RejectInvalid, RejectTooLarge, RejectRateLimited:
		return true
	}
	return false
}

// Rejection is one webhook request the gateway refused with a 4xx, as the
// rejection log keeps it: sizes, a hash and the answer, never a body, a
// secret or a header value other than User-Agent.
type Rejection struct {
	ID          int64 // assigned by the store, increasing
	At          time.Time
	Source      string // the source name as requested (cut and cleaned)
	KnownSource bool   // the name is a configured source
	Reason      string // one of the Reject* reasons
	Status      int    // the HTTP status answered
	Message     string // the message answered, safe to show
	RemoteAddr  string
	UserAgent   string // cut
	// BodySize is the number of body bytes read; for a body that was not
	// read (unknown source, too large, rate limited) the announced
	// Content-Length, -1 when none was announced.
	BodySize int64
	// BodySHA256 is the hex SHA-256 of the body when it was read in full;
	// "" otherwise.
	BodySHA256  string
	HeaderCount int // header values
	HeaderBytes int // total size of header names and values
	// IDs are the values that name the request without being secret,
	// as the source's provider allows (its delivery id headers, the
	// timestamp of its signature header, the event id in a body that was
	// read): what a person searches for. As sent: nothing verified them.
	IDs []RequestID
}

// RequestID is a value that names a request without being a secret.
type RequestID struct {
	Name  string // where it was read: "X-GitHub-Delivery", "Stripe-Signature t", "body id"
	Value string
}

// DeliveryStatus is the state of one delivery; see docs/design.md for the
// transitions.
type DeliveryStatus string

const (
	StatusPending    DeliveryStatus = "pending"    // due now or at NextAttemptAt
	StatusDelivering DeliveryStatus = "delivering" // claimed by a worker
	StatusDelivered  DeliveryStatus = "delivered"
	StatusDead       DeliveryStatus = "dead"    // max_attempts reached
	StatusHeld       DeliveryStatus = "held"    // stale claim under on_stale_claim: hold
	StatusSkipped    DeliveryStatus = "skipped" // stale event, stale: skip
	StatusPaused     DeliveryStatus = "paused"  // pending, and its destination is paused (derived when read)
	// StatusRetrying is a pending delivery with at least one failed
	// attempt, waiting for its next (derived when read; paused wins).
	StatusRetrying DeliveryStatus = "retrying"
	// StatusResolved is a held or dead delivery a person dealt with
	// without sending it again as itself: replayed (a replay delivery took
	// over) or discarded. Final; see Delivery.Resolution.
	StatusResolved DeliveryStatus = "resolved"
)

// DeliveryStatuses are the statuses above, in the order a delivery goes
// through them; filters and messages list them from here.
var DeliveryStatuses = []DeliveryStatus{
	StatusPending, StatusDelivering, StatusDelivered, StatusDead,
	StatusHeld, StatusSkipped, StatusPaused, StatusRetrying, StatusResolved,
}

// Waiting reports whether s is a delivery still to be sent at its next
// attempt: pending, or one of the statuses derived from it (paused,
// retrying).
func (s DeliveryStatus) Waiting() bool {
	return s == StatusPending || s == StatusPaused || s == StatusRetrying
}

// Valid reports whether s is one of the statuses above.
func (s DeliveryStatus) Valid() bool { return slices.Contains(DeliveryStatuses, s) }

// Delivery is one (event, destination) pair and its progress.
type Delivery struct {
	ID           string
	EventID      string
	Destination  string
	Status       DeliveryStatus
	Replay       bool // created by a replay
	Stale        bool // the event was stale and the source says stale: deliver
	AttemptCount int  // attempts started so far
	// Probes is how many of those attempts were probes of a destination
	// paused by its breaker (auto_pause): they do not count towards
	// max_attempts.
	Probes        int
	NextAttemptAt time.Time
	LeaseUntil    time.Time // while StatusDelivering
	ClaimedAt     time.Time // when the latest claim (attempt) started; zero before the first
	CreatedAt     time.Time
	UpdatedAt     time.Time
	Note          string // what a person did to it, in words, if one did
	// Resolution is how a person took it out of the held or dead queue
	// for good; zero while nobody has.
	Resolution Resolution
	Attempts   []Attempt // filled by Store.Event, not by lists
	// WaitsBehind is, for a pending delivery to a destination with order:
	// per_object, the delivery of the same object it waits behind, and
	// WaitsBehindEvent that delivery's event and WaitsBehindVersion its
	// ordering version; "" when it waits for nobody. The admin API and
	// the dashboard fill them (store.FillWaitsBehind); the store's reads
	// do not.
	WaitsBehind, WaitsBehindEvent, WaitsBehindVersion string
}

// How a person resolved a held or dead delivery (Resolution.Kind).
const (
	ResolvedReplayed        = "replayed"         // status resolved; ReplayedBy carries the work
	ResolvedDiscarded       = "discarded"        // status resolved
	ResolvedMarkedDelivered = "marked_delivered" // status delivered, though the gateway saw no 2xx
)

// Resolution records who took a delivery out of the held or dead queue,
// when, why and how.
type Resolution struct {
	Kind       string // Resolved*; "" when not resolved
	At         time.Time
	By         string // the actor, e.g. "api", "dashboard session 3f9a0c1e", "cli"
	Reason     string
	ReplayedBy string // with ResolvedReplayed: the replay delivery's id
}

// Action is one thing a person did to an event's deliveries: the audit
// trail of replays, resends, discards and marks.
type Action struct {
	ID          string
	EventID     string
	Kind        string // replay, resend, mark_delivered, discard
	DeliveryID  string // the delivery acted on; for a replay, the replay delivery it created
	Destination string
	Actor       string
	Reason      string
	At          time.Time
}

// Attempt is one try of a delivery.
type Attempt struct {
	Number       int
	StartedAt    time.Time
	Duration     time.Duration
	StatusCode   int    // 0 when no response arrived
	Error        string // "" on a 2xx
	ResponseBody []byte // first 4 KiB
	// Outcome is what the request came to (Outcome*): whether the
	// destination's handler may have run.
	Outcome string
}

// Outcomes of an attempt (Attempt.Outcome): the one grouping of failures
// that pages, metrics and alerts share.
const (
	// OutcomeNotSent: the request was never written (DNS, a refused
	// connection, TLS, or refused before sending): the handler did not run.
	OutcomeNotSent = "not_sent"
	// OutcomeNoAnswer: the request was written, then no HTTP status came
	// (a timeout, a reset): the handler may have run.
	OutcomeNoAnswer = "no_answer"
	// OutcomeAnswered: an HTTP status came back; the handler ran.
	OutcomeAnswered = "answered"
	// OutcomeUnknown: recorded before outcomes were kept, or closed by a
	// rescuer after its worker died: the handler may have run.
	OutcomeUnknown = "unknown"
)

// AttemptOutcomes are the Outcome* values, in the order pages list them.
var AttemptOutcomes = []string{OutcomeAnswered, OutcomeNoAnswer, OutcomeNotSent, OutcomeUnknown}

// MayHaveRun reports whether the destination's handler may have run on
// this attempt: every outcome but not_sent.
func (a Attempt) MayHaveRun() bool { return a.Outcome != OutcomeNotSent }

// OutcomeCounts counts attempts by outcome.
type OutcomeCounts struct {
	Answered, NoAnswer, NotSent, Unknown int
}

// CountOutcomes counts as by outcome; an attempt without one counts as
// unknown.
func CountOutcomes(as []Attempt) OutcomeCounts {
	var c OutcomeCounts
	for _, a := range as {
		c.Add(a)
	}
	return c
}

// Add counts a.
func (c *OutcomeCounts) Add(a Attempt) {
	switch a.Outcome {
	case OutcomeAnswered:
		c.Answered++
	case OutcomeNoAnswer:
		c.NoAnswer++
	case OutcomeNotSent:
		c.NotSent++
	default:
		c.Unknown++
	}
}

// MayHaveRun is how many times the handler may have run: every attempt
// but those not sent.
func (c OutcomeCounts) MayHaveRun() int { return c.Answered + c.NoAnswer + c.Unknown }

// String says it in words, for alerts and logs: "the handler may have
// run 3 times (1 answered, 2 sent without an answer: timed out or reset);
// 1 not sent (the handler did not run)".
func (c OutcomeCounts) String() string {
	var parts []string
	for _, p := range []struct {
		n    int
		what string
	}{{c.Answered, "answered"}, {c.NoAnswer, "sent without an answer: timed out or reset"}, {c.Unknown, "outcome unknown: lost in a crash, or recorded before outcomes were kept"}} {
		if p.n > 0 {
			parts = append(parts, strconv.Itoa(p.n)+" "+p.what)
		}
	}
	s := "the handler may have run " + times(c.MayHaveRun())
	if len(parts) > 0 {
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	if c.NotSent > 0 {
		s += "; " + strconv.Itoa(c.NotSent) + " not sent (refused, DNS or TLS: the handler did not run)"
	}
	return s
}

func times(n int) string {
	if n == 1 {
		return "1 time"
	}
	return strconv.Itoa(n) + " times"
}

// StalePolicy says what happens to a claim whose lease ran out (SPEC §6).
type StalePolicy string

const (
	Reclaim StalePolicy = "reclaim" // send again: a possible duplicate over a certain loss
	Hold    StalePolicy = "hold"    // park for a person
)

// Errors callers branch on.
var (
	ErrNotFound    = errors.New("not found")
	ErrUnavailable = errors.New("store unavailable")
	ErrLostClaim   = errors.New("claim lost: the delivery was rescued or finished by another worker")
	ErrInvalid     = errors.New("invalid")
	// ErrPruned refuses to send an event again (replay, resend) whose body
	// retention has emptied: what would go out is no longer what arrived.
	ErrPruned = errors.New("body pruned")
)
