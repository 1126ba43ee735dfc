package inbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
)

// Order compares an incoming version with the high-water mark stored for
// its object.
type Order int

// Orders.
const (
	// Newer: the version is above the mark (or the object is new); the mark
	// now holds it. Apply the event.
	Newer Order = iota + 1
	// Equal: the version equals the mark; the mark is unchanged. Whether to
	// apply is the caller's decision (a provider may send two different
	// events with the same version).
	Equal
	// Older: the version is below the mark; the mark is unchanged. Ignore the
	// event: a newer state is already applied.
	Older
)

func (o Order) String() string {
	switch o {
	case Newer:
		return "newer"
	case Equal:
		return "equal"
	case Older:
		return "older"
	}
	return "Order(" + strconv.Itoa(int(o)) + ")"
}

// Advance compares version with the high-water mark of (entity, id) and
// raises the mark if version is higher, inside the caller's transaction tx,
// so the mark and the state it guards commit together. Concurrent
// transactions on the same object are serialized by the database: the one
// that waits sees the other's committed mark, so the highest version wins in
// any order of arrival.
//
// Use it inside Apply's function, with the object's version (Stripe's
// created timestamp, a sequence number from X-AnyHook-Version). entity
// and id follow Event.ID's rules (ErrInvalid otherwise, on every database).
func (ib *Inbox[TTx]) Advance(ctx context.Context, tx TTx, entity, id string, version int64) (Order, error) {
	if entity == "" || id == "" {
		return 0, fmt.Errorf("%w: empty entity or id", ErrInvalid)
	}
	if p := idProblem(entity + id); p != "" {
		return 0, fmt.Errorf("%w: entity and id %s", ErrInvalid, p)
	}
	x := ib.drv.WrapTx(tx)
	n, err := x.Exec(ctx, ib.q(`INSERT INTO inbox_versions AS v (entity, id, version, updated_at) VALUES ($1, $2, $3, {now})
		ON CONFLICT (entity, id) DO UPDATE SET version = excluded.version, updated_at = excluded.updated_at
		WHERE v.version < excluded.version`), entity, id, version)
	if err != nil {
		return 0, fmt.Errorf("inbox: advance %s/%s: %w", entity, id, err)
	}
	if n == 1 {
		return Newer, nil
	}
	var stored int64
	if err := x.QueryRow(ctx, ib.q(`SELECT version FROM inbox_versions WHERE entity = $1 AND id = $2`), entity, id).Scan(&stored); err != nil {
		return 0, fmt.Errorf("inbox: advance %s/%s: %w", entity, id, err)
	}
	if stored == version {
		return Equal, nil
	}
	return Older, nil
}

// ErrIllegalTransition is wrapped by the *TransitionError Machine.Check
// returns.
var ErrIllegalTransition = errors.New("inbox: illegal state transition")

// TransitionError reports a transition a Machine does not allow.
type TransitionError struct {
	Machine, From, To string
}

func (e *TransitionError) Error() string {
	from := e.From
	if from == "" {
		from = "(initial)"
	}
	return fmt.Sprintf("inbox: %s: illegal transition %s -> %s", e.Machine, from, e.To)
}

// Is makes errors.Is(err, ErrIllegalTransition) true.
func (e *TransitionError) Is(target error) bool { return target == ErrIllegalTransition }

// Machine is a small state machine: the allowed transitions of one kind of
// object. It pairs with Advance: the version guard rejects stale events, the
// machine rejects events that make no sense in the current state.
type Machine struct {
	name  string
	edges map[[2]string]bool
}

// NewMachine returns a machine named name (for errors) allowing exactly the
// listed transitions: from state → states it may move to. The empty state ""
// is the state of an object not seen yet, so transitions[""] lists the
// allowed first states.
func NewMachine(name string, transitions map[string][]string) *Machine {
	m := &Machine{name: name, edges: make(map[[2]string]bool)}
	for from, tos := range transitions {
		for _, to := range tos {
			m.edges[[2]string{from, to}] = true
		}
	}
	return m
}

// Check returns nil if moving from one state to another is allowed, and a
// *TransitionError otherwise. Staying in the same state is always allowed: a
// repeated event is not an illegal one.
func (m *Machine) Check(from, to string) error {
	if from == to || m.edges[[2]string{from, to}] {
		return nil
	}
	return &TransitionError{Machine: m.name, From: from, To: to}
}
