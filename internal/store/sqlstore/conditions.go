package sqlstore

import (
	"slices"
	"strings"

	"github.com/anyhook/anyhook"
)

// The SQL conditions and expressions on deliveries both dialects share.

// NotResolved is the SQL condition (both dialects) on a delivery d that a
// bulk replay may select: a resolved one (replayed or discarded) is done,
// and one whose event has a delivery to that destination still to send
// (pending, retrying, paused, delivering: an earlier replay's, say)
// would be sent twice.
const NotResolved = `d.status <> 'resolved' AND NOT EXISTS (SELECT 1 FROM deliveries u
	WHERE u.event_id = d.event_id AND u.destination = d.destination AND u.status IN ('pending', 'delivering'))`

// Resolvable is the SQL condition (both dialects) on a delivery d that a
// replay of its event to its destination resolves.
const Resolvable = `d.status IN ('held', 'dead')`

// NeedsBody is the SQL condition (the same in both dialects) on a delivery
// d that still needs its event's body: one that is unfinished (pending,
// delivering; paused is stored pending), held for a person, or dead, so a
// person may still resend or replay it. A resolved delivery (replayed,
// discarded) does not. Retention never prunes the body of an event with
// such a delivery (store.Ledger.PruneBodies), and log verification reports a
// pruned body that one still needs.
const NeedsBody = `d.status IN ('pending', 'delivering', 'paused', 'held', 'dead')`

// pausedCond is the SQL condition that the destination of the delivery
// whose columns are prefixed by p is paused.
func pausedCond(p string) string {
	return `EXISTS (SELECT 1 FROM destinations ps WHERE ps.name = ` + p + `destination AND ` + HeldBack("ps.") + `)`
}

// StatusExpr is the SQL expression (both dialects) of the status of the
// delivery whose columns are prefixed by p, as it is shown: a stored
// pending delivery of a paused destination is paused (docs/design.md,
// "Pause: a status derived at read time"); else one with an attempt
// behind it (which failed: a pending delivery has no success) is
// retrying.
func StatusExpr(p string) string {
	return `CASE WHEN ` + p + `status = 'pending' AND ` + pausedCond(p) + ` THEN 'paused'` +
		` WHEN ` + p + `status = 'pending' AND ` + p + `attempt_count > 0 THEN 'retrying' ELSE ` + p + `status END`
}

// HeldBackNames is the query (both dialects) of the destinations that
// hold their deliveries back, read before a list of a status derived from
// the pause (DerivedStatus): the list then compares its deliveries'
// destination with these few names, which the indexes on the destination
// serve, where a per-row test of the destinations table is served by none
// and read the whole paused backlog (BENCHMARKS.md, "A paused backlog by
// name").
var HeldBackNames = `SELECT name FROM destinations WHERE ` + HeldBack("") + ` ORDER BY name`

// DerivedStatus reports whether st is shown from a stored pending
// delivery by its destination's pause or its attempts.
func DerivedStatus(st anyhook.DeliveryStatus) bool {
	return st == anyhook.StatusPending || st == anyhook.StatusRetrying || st == anyhook.StatusPaused
}

// StatusIs is the condition, with a ? for each of args, that the delivery
// whose columns are prefixed by p is shown in status st; held names the
// destinations holding their deliveries back (HeldBackNames), needed only
// when DerivedStatus(st). none reports that st selects nothing: paused
// while no destination is held back.
func StatusIs(p string, st anyhook.DeliveryStatus, held []string) (cond string, args []any, none bool) {
	names := func(op string) (string, []any) {
		marks := strings.TrimSuffix(strings.Repeat("?, ", len(held)), ", ")
		args := make([]any, len(held))
		for i, h := range held {
			args[i] = h
		}
		return ` AND ` + p + `destination ` + op + ` (` + marks + `)`, args
	}
	pending := p + `status = 'pending'`
	switch st {
	case anyhook.StatusPaused:
		if len(held) == 0 {
			return `1 = 0`, nil, true
		}
		in, args := names("IN")
		return pending + in, args, false
	case anyhook.StatusPending, anyhook.StatusRetrying:
		cond = pending + ` AND ` + p + `attempt_count = 0`
		if st == anyhook.StatusRetrying {
			cond = pending + ` AND ` + p + `attempt_count > 0`
		}
		if len(held) == 0 {
			return cond, nil, false
		}
		notIn, args := names("NOT IN")
		return cond + notIn, args, false
	}
	return p + `status = ?`, []any{string(st)}, false
}

// DestinationExcluded reports whether a list of status st of destination
// dest selects nothing because of held (HeldBackNames): paused of a
// destination not held back, pending or retrying of one held back. The
// query would find that out by reading every pending delivery of dest
// (288 ms at a million events).
func DestinationExcluded(st anyhook.DeliveryStatus, held []string, dest string) bool {
	if dest == "" || !DerivedStatus(st) {
		return false
	}
	return slices.Contains(held, dest) != (st == anyhook.StatusPaused)
}

// NoneShown reports whether the delivery counters cs (CountersQuery,
// read in the list's snapshot, so by the same held-back names) show no
// delivery in st, a status derived from the pause, of dest if not "".
// The list then selects nothing without a query: its walk of the status's
// index would read every delivery a held-back destination keeps there to
// find none (pending or retrying while a paused destination's backlog
// waits: 86-132 ms at a million events with 300,000 waiting, growing with
// the backlog).
func NoneShown(cs []Count, st anyhook.DeliveryStatus, dest string) bool {
	if !DerivedStatus(st) {
		return false
	}
	for _, c := range cs {
		if c.Status == st && c.N > 0 && (dest == "" || c.Dest == dest) {
			return false
		}
	}
	return true
}

// HeldBack is the SQL condition that the destinations row whose columns
// are prefixed by p holds its deliveries back: paused by a person, or by
// its breaker (auto_pause). Claims skip such a destination and reads show
// its pending deliveries paused.
func HeldBack(p string) string {
	return `(` + p + `paused OR ` + p + `breaker_at IS NOT NULL)`
}
