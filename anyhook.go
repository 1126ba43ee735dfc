package anyhook

import (
	"errors"
	"net/http"
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

	// Ordering hints (SPEC §7); empty when the source has no ordering rules.
	Object  string
	Version string
	Stale   bool // older than the highest version seen for Object

	Duplicates int64 // how many duplicates of this event were absorbed

	// BodyPruned is set once retention (log.retention) emptied Body: the
	// event can no longer be sent. Filled by Store.Event and Store.Claim.
	BodyPruned bool

	Deliveries []Delivery // filled by Store.Event, not by lists
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
	StatusPaused     DeliveryStatus = "paused"  // destination paused
)

// Valid reports whether s is one of the statuses above.
func (s DeliveryStatus) Valid() bool {
	switch s {
	case StatusPending, StatusDelivering, StatusDelivered, StatusDead,
		StatusHeld, StatusSkipped, StatusPaused:
		return true
	}
	return false
}

// Delivery is one (event, destination) pair and its progress.
type Delivery struct {
	ID            string
	EventID       string
	Destination   string
	Status        DeliveryStatus
	Replay        bool // created by a replay
	Stale         bool // the event was stale and the source says stale: deliver
	AttemptCount  int  // attempts started so far
	NextAttemptAt time.Time
	LeaseUntil    time.Time // while StatusDelivering
	CreatedAt     time.Time
	UpdatedAt     time.Time
	Note          string    // why a person resolved it, if one did
	Attempts      []Attempt // filled by Store.Event, not by lists
}

// Attempt is one try of a delivery.
type Attempt struct {
	Number       int
	StartedAt    time.Time
	Duration     time.Duration
	StatusCode   int    // 0 when no response arrived
	Error        string // "" on a 2xx
	ResponseBody []byte // first 4 KiB
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
