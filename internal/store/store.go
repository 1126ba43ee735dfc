// Package store is the storage contract of the gateway. Two backends
// implement it (sqlite, postgres) and one conformance suite (storetest) holds
// both to the same behaviour. The deliveries table is the delivery queue.
//
// Each backend judges time by its own clock: SQLite by the process clock (an
// injectable func), PostgreSQL by now() in the database. Callers therefore
// pass durations (lease, retry delay), never absolute times.
package store

import (
	"context"
	"time"

	"github.com/anyhook/anyhook"
)

// NewEvent is one verified event that ingest asks the store to record.
type NewEvent struct {
	// Event.ID and Event.ReceivedAt are set by the caller. Event.DedupKey ""
	// means the event cannot be deduplicated by the provider's id.
	Event anyhook.Event
	// ContentKey, when set, is a second dedup key: a hash of the signed
	// content (see provider.Event.ContentKey). The event is a duplicate of
	// an earlier one of its source with the same dedup key or the same
	// content key. Both "" means every request is new.
	ContentKey string
	// Destinations get one pending delivery each, created in the same
	// transaction as the event.
	Destinations []string
	// Lease, when set, is parallel to Destinations: a delivery whose
	// lease is not zero is created already claimed by the caller, as
	// Claim would claim it (delivering, its first attempt counted, leased
	// for that long), in the ingest transaction, so that the caller can
	// send it at once without a claim of its own (a negative lease is one
	// already expired). A delivery to a paused destination, of a
	// duplicate, or of a stale event that is skipped is not claimed (it is created as it
	// would be without a lease, or not at all). IngestResult.Claims holds
	// the deliveries claimed. The rescuer treats an expired lease of these
	// as of any claim: the caller must send at once, as after Claim.
	Lease []time.Duration
	// When Event.Object is set, the store keeps the highest Event.Version per
	// (source, object) and marks an event with a strictly lower version
	// stale. A stale event's deliveries are created skipped when StaleSkip,
	// else pending with Stale set.
	StaleSkip bool
}

// IngestResult is the fate of one NewEvent.
type IngestResult struct {
	ID        string // the new event's id, or the original's for a duplicate
	Duplicate bool
	Stale     bool
	Err       error // this item failed; its batch-mates may still succeed
	// Claims are the deliveries NewEvent.Lease claimed, each with the
	// event as recorded (its body from the NewEvent, not read back).
	Claims []Claim
}

// Claim is a delivery leased to one worker together with what it must send.
type Claim struct {
	Delivery anyhook.Delivery // Status delivering; AttemptCount is this attempt's number
	Event    anyhook.Event
	// Probe marks a claim of Breakers.ClaimProbe: one try of a destination
	// whose breaker tripped. Its failure does not count towards
	// max_attempts.
	Probe bool
}

// Outcome is the result of one attempt, written after the attempt ended.
type Outcome struct {
	DeliveryID string
	Attempt    int // the claim's AttemptCount: the fence
	Result     anyhook.Attempt
	// Status is StatusDelivered, StatusPending (retry after RetryIn) or
	// StatusDead.
	Status  anyhook.DeliveryStatus
	RetryIn time.Duration
}

// Release gives back one claim whose request was never sent
// (Store.Release).
type Release struct {
	DeliveryID string
	Attempt    int // the claim's AttemptCount: the fence, as Outcome's
	// Probe: the claim was a probe (Claim.Probe); its probe, counted at
	// the claim, goes back down with its attempt.
	Probe bool
}

// StaleRule says what to do with an expired claim of a destination.
type StaleRule struct {
	Policy      anyhook.StalePolicy
	MaxAttempts int
}

// EventFilter selects events, newest first.
type EventFilter struct {
	Source string
	Status anyhook.DeliveryStatus // events with at least one delivery in this status
	Q      string                 // matches the dedup key exactly
	// Prefix, when set, keeps the events whose id, provider event id
	// (dedup key) or object starts with it, or one of whose deliveries'
	// ids does. No index answers that in the lists' order: bound it with
	// Since (see SearchPrefix).
	Prefix string
	Type   string    // a glob over the event type: * is any run of characters; ASCII case ignored
	Since  time.Time // received at or after
	Until  time.Time // received before
	Limit  int       // 0 = 50; at most 500
	Cursor string    // from a previous page
}

// EventsByTime says whether the events f selects are listed by receive
// time (then id), newest first: when f has a time window (Since, Until)
// (a Status too: a window far back must not walk every newer delivery
// in it). The ids are time-ordered (UUIDv7), so the two orders
// differ only where an event's id and receive time disagree (a clock
// moved, an event recorded late); a window far back is then a seek on the
// receive time index, not a walk through every newer event. The cursor is
// the last event's id either way.
func EventsByTime(f EventFilter) bool {
	return !f.Since.IsZero() || !f.Until.IsZero()
}

// DeliveriesByTime is EventsByTime for deliveries: with a time window
// they are listed by creation time (then id), newest first.
func DeliveriesByTime(f DeliveryFilter) bool {
	return !f.Since.IsZero() || !f.Until.IsZero()
}

// DeliveryFilter selects deliveries, newest first.
type DeliveryFilter struct {
	Status      anyhook.DeliveryStatus // as shown: paused selects the pending deliveries of paused destinations
	Destination string
	// Destinations, when set, keeps only deliveries to these destinations:
	// a bulk replay names the configured ones, so that it never queues a
	// replay no dispatcher will take.
	Destinations []string
	Source       string
	// EventIDs, when not nil, keeps only deliveries of these events (none
	// when empty): a bulk replay by a CEL filter names the events it
	// matched (at most MaxFilterReplay).
	EventIDs []string
	Since    time.Time // delivery created at or after
	Until    time.Time
	Limit    int
	Cursor   string
}

// Resolve actions for held and dead deliveries, and ActionReplay, the
// kind of the action a replay records.
const (
	ActionResend        = "resend"
	ActionMarkDelivered = "mark_delivered"
	ActionDiscard       = "discard"
	ActionReplay        = "replay"
)

// Actor is who asked for a replay or a resolve, and why. The store
// records it in the event's actions and on each delivery it resolves.
type Actor struct {
	Name   string // "api", "dashboard session 3f9a0c1e", "cli"; "" is recorded as "unknown"
	Reason string // optional, free text
}

// MaxReason bounds an actor's reason, in bytes; callers refuse longer
// ones.
const MaxReason = 1000

// BulkReplay is what ReplayDeliveries did.
type BulkReplay struct {
	Count int // replay deliveries created, one per (event, destination)
	// Pruned are the selected events, in id order, whose bodies retention
	// pruned: they cannot be sent again, so nothing was replayed for them.
	Pruned []string
}

// Store is the storage contract. A backend implements every part of it
// (sqlite and postgres assert so at compile time, and storetest.Exercise
// holds both to the same behaviour); a consumer declares only the part or
// the methods it uses, so nothing checks at run time what a store can do.
type Store interface {
	Queue
	Operator
	Reader
	StatsReader
	Ledger
	RejectionLog
	BackfillLog
	AlertOutbox
	Breakers
	Incidents
	SavedSearches

	Ping(ctx context.Context) error
	Close() error
}

// Queue is the delivery queue's engine side: events in, claims out,
// outcomes back, expired claims rescued.
type Queue interface {
	// Ingest records each new event and its deliveries in one durable
	// transaction and reports, per item in order, whether it was new or a
	// duplicate of an event with the same (source, dedup key) or the same
	// (source, content key); when the two keys name different events, the
	// dedup key's wins. A duplicate creates nothing but increments the
	// original's duplicate counter and answers its id. Items that share
	// either key in one batch yield one event. The error is for a failure
	// of the whole batch (wraps anyhook.ErrUnavailable).
	Ingest(ctx context.Context, evs []NewEvent) ([]IngestResult, error)

	// Claim leases up to limit due pending deliveries of destination for
	// lease, marking them delivering and counting the attempt. Each claim's
	// Event has BodyPruned set when retention emptied its body (which the
	// store never lets happen to an event with a pending delivery; the
	// engine refuses to send such a claim all the same).
	Claim(ctx context.Context, destination string, limit int, lease time.Duration) ([]Claim, error)

	// ClaimInOrder is Claim for a destination that delivers each object's
	// events in order (order: per_object). Deliveries of one (source,
	// object) to destination go one at a time: none is claimed while
	// another of its object is delivering, held or waiting for a retry,
	// and then only the earliest pending one, by version (CompareVersions)
	// then arrival. A delivery whose event has no object is claimed as
	// Claim would. Concurrent claimers, in one process or several, never
	// claim two deliveries of one object at once.
	ClaimInOrder(ctx context.Context, destination string, limit int, lease time.Duration) ([]Claim, error)

	// Finish records outcomes. An outcome whose (delivery, attempt) no
	// longer holds the claim changes nothing; its delivery id is returned
	// in lost. A call carries one outcome per delivery (the finisher
	// keeps a delivery's outcomes in separate calls): of several for one
	// delivery only the first is judged, and the others are lost whatever
	// their attempt.
	Finish(ctx context.Context, outs []Outcome) (lost []string, err error)

	// Release gives back claims whose request was never sent. Each one
	// whose (delivery, attempt) still holds its claim, fenced as Finish
	// is, becomes pending again as if it had not been claimed: its
	// attempt is not counted (the attempt count, and a probe's probe count,
	// go back down), its
	// claim time is its previous attempt's start (none before the
	// first), no attempt row is written, and its due time, so its place
	// in the queue, is unchanged: in order (ClaimInOrder) it is still its
	// object's head. A claim that no longer holds (finished, rescued,
	// released) changes nothing and is left out of released, the ids of
	// the deliveries released. The holder of a released claim must forget
	// it: the delivery's next claim has the same attempt number, so the
	// fence no longer tells the two apart.
	//
	// It is for a claim nobody sent, whatever the reason: the engine
	// releases one that came back with too little of its lease left to
	// send it (the database stalled between the claim and its answer);
	// a graceful shutdown, an automatic pause, a broker publish that was
	// never made or a pull consumer giving work back release theirs the
	// same way. A claim whose request may have left must not be
	// released: that would hide an attempt whose outcome is unknown
	// (the lease and Rescue are for those).
	Release(ctx context.Context, rs []Release) (released []string, err error)

	// Renew starts each claim of rs over with a lease of lease from now,
	// by the store's clock, when its (delivery, attempt) still holds the
	// claim, fenced as Release is; renewed are the ids of those. Nothing
	// else of the claim changes. It is for a claim that came back with
	// too little of its lease left to send: the holder takes a fresh
	// deadline of its own before it asks (as before a claim), and sends
	// the claim if the renewal came back in time, so a database slow to
	// claim does not keep a delivery from ever being sent. A claim whose
	// lease has ended but that no rescue has taken yet is still held,
	// and renewed.
	Renew(ctx context.Context, rs []Release, lease time.Duration) (renewed []string, err error)

	// Rescue handles claims whose lease has expired, per the rule of their
	// destination: reclaim makes them due now (or dead past MaxAttempts),
	// hold marks them held. The lost attempt is recorded as one whose
	// outcome is unknown. A claim of a destination for which rule answers
	// false (one this process does not know, say during a rolling config
	// change) is left as it is, for a process that knows its policy. It
	// returns the deliveries it changed, in their new state.
	Rescue(ctx context.Context, rule func(destination string) (StaleRule, bool)) ([]anyhook.Delivery, error)

	// ExpirePending makes dead, with note why, up to limit of
	// destination's pending deliveries (due or not, never one being
	// delivered) created before before, oldest first, and returns them:
	// a pull destination's max_age, so that an abandoned one does not
	// keep its backlog for ever.
	ExpirePending(ctx context.Context, destination string, before time.Time, limit int, why string) ([]anyhook.Delivery, error)
}

// Operator is what a person does to the queue through the API, the
// dashboard and the CLI: replay, resolve, pause, discard.
type Operator interface {
	// Replay creates a new replay delivery of event for each destination
	// and, in the same transaction, resolves every held or dead delivery
	// of the event to that destination (StatusResolved, resolution
	// replayed, ReplayedBy the new delivery) and records one ActionReplay
	// per new delivery, by the actor. An event whose body retention
	// pruned is refused with an error wrapping anyhook.ErrPruned,
	// atomically with pruning: either the deliveries are created and the
	// body is kept (PruneBodies skips the event), or nothing is created.
	Replay(ctx context.Context, eventID string, destinations []string, by Actor) ([]anyhook.Delivery, error)

	// ReplayDeliveries replays, as Replay does, each (event, destination)
	// among the deliveries the filter selects (Limit is ignored) once,
	// however many deliveries that pair already has, in (event id,
	// destination) order, and says how many. It never selects a resolved
	// delivery (replayed or discarded: a person already dealt with it).
	// An event whose body retention pruned cannot be sent: its pairs are
	// skipped and listed in BulkReplay.Pruned (atomically with pruning, as
	// Replay), and the others are replayed.
	ReplayDeliveries(ctx context.Context, f DeliveryFilter, by Actor) (BulkReplay, error)

	// Resolve acts on a held or dead delivery (Action* constants) and
	// records the action: resend makes it pending, due now; discard
	// resolves it (StatusResolved); mark_delivered makes it delivered with
	// resolution marked_delivered. Any other status is refused with
	// ErrInvalid. A resend of an event whose body was pruned is refused
	// with an error wrapping anyhook.ErrPruned (atomically, as Replay).
	Resolve(ctx context.Context, deliveryID, action string, by Actor) (anyhook.Delivery, error)

	// SetPaused pauses or resumes a destination: while paused, Claim
	// returns nothing for it, and its pending deliveries are shown (by
	// every read, and selected by filters) as StatusPaused. It leaves the
	// breaker (Breakers) alone: a person's resume clears that apart.
	SetPaused(ctx context.Context, destination string, paused bool) error
	DestinationDiscarder
}

// Reader reads events and deliveries as the API and the pages show them.
type Reader interface {
	// Paused says which destinations are paused.
	Paused(ctx context.Context) (map[string]bool, error)
	Event(ctx context.Context, id string) (anyhook.Event, error)
	ListEvents(ctx context.Context, f EventFilter) (evs []anyhook.Event, next string, err error)
	BodyLister
	ListDeliveries(ctx context.Context, f DeliveryFilter) (ds []anyhook.Delivery, next string, err error)
	// Counts returns the number of deliveries per status (as shown:
	// paused for the pending deliveries of a paused destination).
	Counts(ctx context.Context) (map[anyhook.DeliveryStatus]int, error)
	// WaitsBehind answers, for each of the deliveries ids (those of
	// destinations with order: per_object; others are not the store's to
	// tell apart) that is pending and waits behind another delivery of its
	// object, that delivery: the head of the object's queue (Behind).
	WaitsBehind(ctx context.Context, ids []string) (map[string]Blocker, error)
	DeliveryReader
	QueueReader
}

// Page trims a page read with limit+1 rows to limit and returns the cursor
// of the next page: the last row's id, or "" when there is none.
func Page[T any](rows []T, limit int, id func(T) string) ([]T, string) {
	if len(rows) <= limit {
		return rows, ""
	}
	rows = rows[:limit]
	return rows, id(rows[limit-1])
}

// PageLimit clamps a requested page size.
func PageLimit(n int) int {
	switch {
	case n <= 0:
		return 50
	case n > 500:
		return 500
	}
	return n
}
