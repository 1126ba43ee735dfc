package store

import (
	"context"
	"time"
)

// Breaker is a destination's automatic pause (auto_pause: a circuit
// breaker) as stored: while it is tripped, Claim and ClaimInOrder return
// nothing for the destination and reads show its pending deliveries
// paused, as for a person's pause (Operator.SetPaused), which it is kept
// apart from; only ClaimProbe takes deliveries, one per probe.
type Breaker struct {
	Destination string
	TrippedAt   time.Time // by the tripping engine's clock
	Reason      string    // why it tripped, in words
	NextProbe   time.Time // when the next probe is due (engine clock)
}

// Breakers is the store side of automatic pauses. The state is shared:
// on PostgreSQL a destination tripped by one process is paused for all.
type Breakers interface {
	// TripBreaker trips destination's breaker at at, for reason, with
	// its first probe due at firstProbe. It reports false, changing
	// nothing, when the breaker was tripped already (another worker or
	// process got there first).
	TripBreaker(ctx context.Context, destination string, at time.Time, reason string, firstProbe time.Time) (bool, error)
	// ResetBreaker clears destination's breaker (a probe succeeded, or a
	// person resumed the destination) and reports false when it was not
	// tripped.
	ResetBreaker(ctx context.Context, destination string) (bool, error)
	// Breakers lists the tripped breakers by destination.
	Breakers(ctx context.Context) (map[string]Breaker, error)
	// ClaimProbe is how a tripped destination is tried: when
	// destination's breaker is tripped, the destination is not paused by
	// a person and its next probe is due at at, it moves the next probe
	// to at+every and claims, for lease, the oldest due delivery (the
	// head of an object's queue when inOrder, as ClaimInOrder), counting
	// the attempt as a probe (anyhook.Delivery.Probes) and marking the
	// claim Probe. tripped reports whether the breaker is tripped at all,
	// so that every process learns of a trip or a reset elsewhere. A
	// probe that finds nothing due still spends its turn.
	ClaimProbe(ctx context.Context, destination string, inOrder bool, at time.Time, every, lease time.Duration) (claims []Claim, tripped bool, err error)
}
