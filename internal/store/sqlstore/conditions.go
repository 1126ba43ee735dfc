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

// DerivedStatus reports whether st is shown from a stored pending
// delivery by its destination's pause or its attempts.
func DerivedStatus(st anyhook.DeliveryStatus) bool {
	return st == anyhook.StatusPending || st == anyhook.StatusRetrying || st == anyhook.StatusPaused
}

// ShownIn names, sorted, the destinations that the delivery counters cs
// (CountersQuery, which shows a held-back destination's pending and
// retrying deliveries paused) show with deliveries in st, a status derived
// from the pause, keeping only dest if not "". A list of st reads those
// destinations' stored pending deliveries by name (StatusIs), through
// indexes led by the destination: tested row by row against the
// destinations table, which no index serves, or compared with the
// held-back names by NOT IN, a list read a whole paused backlog to find
// the few it shows (up to 4.4 s at a million events; BENCHMARKS.md, "A
// paused backlog by name"). The counters are kept in the deliveries'
// own transactions, so read in the list's snapshot they name exactly the
// destinations of its rows.
func ShownIn(cs []Count, st anyhook.DeliveryStatus, dest string) []string {
	var out []string
	for _, c := range cs {
		if c.Status == st && c.N > 0 && (dest == "" || c.Dest == dest) && !slices.Contains(out, c.Dest) {
			out = append(out, c.Dest)
		}
	}
	slices.Sort(out)
	return out
}

// ShownTotal is how many deliveries the counters cs show in st of the
// destinations dests.
func ShownTotal(cs []Count, st anyhook.DeliveryStatus, dests []string) int {
	n := 0
	for _, c := range cs {
		if c.Status == st && slices.Contains(dests, c.Dest) {
			n += c.N
		}
	}
	return n
}

// TypedStatus reports whether the deliveries in st are those of the
// partial index deliveries_status_source_type (migration 0043): only
// these are sure to keep their event's type (d.type); a delivered or
// skipped one recorded before 0043 keeps none.
func TypedStatus(st anyhook.DeliveryStatus) bool {
	return st == anyhook.StatusDead || st == anyhook.StatusHeld || st == anyhook.StatusResolved
}

// TypedStatusIn is that index's condition as 0043 writes it, of the
// deliveries whose columns are prefixed by p: a query that is to read
// through it names it as is, since SQLite uses a partial index only when
// the query's WHERE implies the index's, and proves it term by term.
func TypedStatusIn(p string) string { return p + `status IN ('dead', 'held', 'resolved')` }

// StatusIs is the condition, with a ? for each of args, that the delivery
// whose columns are prefixed by p is shown in status st; dests names the
// destinations shown with deliveries in st (ShownIn), needed only when
// DerivedStatus(st). none reports that st selects nothing: no such
// destination.
func StatusIs(p string, st anyhook.DeliveryStatus, dests []string) (cond string, args []any, none bool) {
	if !DerivedStatus(st) {
		return p + `status = ?`, []any{string(st)}, false
	}
	if len(dests) == 0 {
		return `1 = 0`, nil, true
	}
	cond = p + `status = 'pending'`
	switch st {
	case anyhook.StatusPending:
		cond += ` AND ` + p + `attempt_count = 0`
	case anyhook.StatusRetrying:
		cond += ` AND ` + p + `attempt_count > 0`
	}
	args = make([]any, len(dests))
	for i, d := range dests {
		args[i] = d
	}
	return cond + ` AND ` + p + `destination IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(dests)), ", ") + `)`, args, false
}

// HeldBack is the SQL condition that the destinations row whose columns
// are prefixed by p holds its deliveries back: paused by a person, or by
// its breaker (auto_pause). Claims skip such a destination and reads show
// its pending deliveries paused.
func HeldBack(p string) string {
	return `(` + p + `paused OR ` + p + `breaker_at IS NOT NULL)`
}
