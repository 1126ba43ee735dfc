package sqlstore

import (
	"slices"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// CountersQuery (both dialects) reads the delivery counters per
// destination and shown status: the pending and retrying deliveries of a
// paused destination (by a person or its breaker) are shown paused. Rows that add up to nothing are left out.
const CountersQuery = `SELECT c.destination, CASE WHEN c.status IN ('pending', 'retrying') AND (p.paused IS TRUE OR p.breaker_at IS NOT NULL) THEN 'paused' ELSE c.status END, sum(c.n)
	FROM delivery_counts c LEFT JOIN destinations p ON p.name = c.destination
	GROUP BY 1, 2 HAVING sum(c.n) <> 0`

// UnfinishedDepth keeps the counts of the statuses QueueStats reports.
func UnfinishedDepth(cs []Count) []Count {
	return slices.DeleteFunc(cs, func(c Count) bool { return !slices.Contains(store.UnfinishedStatuses, c.Status) })
}

// CountsByStatus adds counters up over destinations (Store.Counts).
func CountsByStatus(cs []Count) map[anyhook.DeliveryStatus]int {
	out := map[anyhook.DeliveryStatus]int{}
	for _, c := range cs {
		out[c.Status] += c.N
	}
	return out
}

// ActivityQuery (both dialects, ? placeholders) reads the activity rollup
// over a range of minutes, from and to included.
const ActivityQuery = `SELECT minute, destination, kind, sum(n) FROM activity WHERE minute >= ? AND minute <= ? GROUP BY 1, 2, 3`

// ActivityRow is one row of ActivityQuery.
type ActivityRow struct {
	Minute     int64
	Dest, Kind string
	N          int
}

// ScanActivity scans one row of ActivityQuery.
func ScanActivity(sc Scanner) (ActivityRow, error) {
	var r ActivityRow
	return r, sc.Scan(&r.Minute, &r.Dest, &r.Kind, &r.N)
}

// NewActivity lays out the answer to aq at now and says which minutes
// to read.
func NewActivity(aq store.ActivityQuery, now time.Time) (act store.Activity, from, to int64) {
	aq = aq.Normalize()
	n := aq.Buckets()
	start := now.UTC().Truncate(aq.Bucket).Add(-time.Duration(n-1) * aq.Bucket)
	act = store.Activity{Start: start, Bucket: aq.Bucket, Received: make([]int, n),
		Delivered: map[string][]int{}, Dead: map[string][]int{}, Failed: map[string][]int{}, Replayed: map[string][]int{}}
	return act, start.Unix() / 60, now.Unix() / 60
}

// AddActivity adds rows of ActivityQuery to act: what happened to events,
// and to the deliveries of the destinations listed.
func AddActivity(act *store.Activity, rows []ActivityRow, destinations []string) {
	n := len(act.Received)
	for _, r := range rows {
		b := int(time.Unix(r.Minute*60, 0).Sub(act.Start) / act.Bucket)
		if b < 0 || b >= n {
			continue
		}
		if r.Dest == "" {
			switch r.Kind {
			case "received":
				act.Received[b] += r.N
			case "stale":
				act.Stale += r.N
			case "skipped":
				act.Skipped += r.N
			}
			continue
		}
		if !slices.Contains(destinations, r.Dest) {
			continue
		}
		m := map[string]map[string][]int{"delivered": act.Delivered, "dead": act.Dead, "failed": act.Failed, "replayed": act.Replayed}[r.Kind]
		if m == nil {
			continue
		}
		if m[r.Dest] == nil {
			m[r.Dest] = make([]int, n)
		}
		m[r.Dest][b] += r.N
	}
}
