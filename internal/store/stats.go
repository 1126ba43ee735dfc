package store

import (
	"context"
	"time"

	"github.com/anyhook/anyhook"
)

// StatsReader is the part of Store that reads the cheap aggregates behind
// the dashboard's overview and the /metrics gauges. Each query is bounded
// by the rows of unfinished deliveries or of the asked window, read
// through an index; none scans the whole history, so both stay fast with
// millions of events.
type StatsReader interface {
	// QueueStats counts the unfinished deliveries (pending, retrying, delivering,
	// held, dead, paused) of every destination by status (listed in
	// destinations or not: a destination removed from the config keeps its
	// deliveries, and they count), and finds the
	// oldest pending delivery, and for each of the given destinations its
	// last successful delivery and, unless it is paused, since when its
	// most overdue pending delivery has been due.
	QueueStats(ctx context.Context, destinations []string) (QueueStats, error)
	// Activity counts, per bucket over the last q.Window (by the store's
	// clock), what happened then: the events received, and per destination
	// the deliveries that were delivered, went dead, the failed attempts and
	// the replays created; and over the window the stale events received,
	// and how many of them were skipped. It reads counters kept as the rows
	// were written (by the minute), never the rows: what a later replay or
	// resolve did changes no earlier minute.
	Activity(ctx context.Context, q ActivityQuery) (Activity, error)
	// DeliveryStates returns the deliveries of each of the given events
	// (at most 500) without their attempts, oldest first: what an event
	// list shows per row.
	DeliveryStates(ctx context.Context, eventIDs []string) (map[string][]DeliveryState, error)
}

// DeliveryState is a delivery in brief.
type DeliveryState struct {
	ID          string
	Destination string
	Status      anyhook.DeliveryStatus
	Replay      bool
	// NextAttemptAt is when a waiting delivery (Status.Waiting) is due.
	NextAttemptAt time.Time
}

// UnfinishedStatuses are the delivery statuses QueueStats counts. Delivered
// and skipped deliveries only grow; counting them would mean reading them
// all.
var UnfinishedStatuses = []anyhook.DeliveryStatus{
	anyhook.StatusPending, anyhook.StatusDelivering, anyhook.StatusHeld,
	anyhook.StatusDead, anyhook.StatusPaused, anyhook.StatusRetrying,
}

// QueueStats is the state of the delivery queue.
type QueueStats struct {
	// Now is the store's clock when the stats were read.
	Now time.Time
	// Depth counts unfinished deliveries per destination and status.
	Depth map[string]map[anyhook.DeliveryStatus]int
	// OldestPending is when the oldest pending delivery was created; zero
	// when nothing is pending.
	OldestPending time.Time
	// LastDelivered is, per destination, when its latest successful
	// delivery finished; absent when it never had one.
	LastDelivered map[string]time.Time
	// DueSince is, per destination that is not paused, the earliest
	// next_attempt_at among its pending deliveries that are due (at or
	// before Now); absent when none is due. A working dispatcher claims a
	// due delivery within its poll interval, so a DueSince far behind Now
	// is a delivery nobody picks up.
	DueSince map[string]time.Time
}

// OverdueFor is how long destination's most overdue delivery has been due
// without being claimed; 0 when none is due.
func (q QueueStats) OverdueFor(destination string) time.Duration {
	t, ok := q.DueSince[destination]
	if !ok {
		return 0
	}
	return max(q.Now.Sub(t), 0)
}

// Total is the number of deliveries in status over all destinations.
func (q QueueStats) Total(status anyhook.DeliveryStatus) int {
	n := 0
	for _, m := range q.Depth {
		n += m[status]
	}
	return n
}

// OldestPendingAge is how long the oldest pending delivery has waited; 0
// when nothing is pending.
func (q QueueStats) OldestPendingAge() time.Duration {
	if q.OldestPending.IsZero() {
		return 0
	}
	return max(q.Now.Sub(q.OldestPending), 0)
}

// ActivityKept is how long the activity rollup keeps a minute
// (Ledger.PruneActivity): a week, well past the overview's hour and a
// day's chart, so an incident over a weekend can still be looked at; the
// rollup then holds some 150,000 rows for three destinations, however
// many events the store keeps.
const ActivityKept = 7 * 24 * time.Hour

// ActivityQuery asks for Activity.
type ActivityQuery struct {
	Window       time.Duration // default 1h
	Bucket       time.Duration // default 1m, whole minutes; the window is cut into Window/Bucket buckets
	Destinations []string      // the destinations whose finished deliveries are counted
}

// Normalize fills the defaults, bounds the bucket count (at most 1440) and
// rounds the bucket up to whole minutes (the counters' grain).
func (q ActivityQuery) Normalize() ActivityQuery {
	if q.Window <= 0 {
		q.Window = time.Hour
	}
	if q.Bucket <= 0 {
		q.Bucket = time.Minute
	}
	if q.Window/q.Bucket > 1440 {
		q.Bucket = q.Window / 1440
	}
	q.Bucket = (q.Bucket + time.Minute - 1).Truncate(time.Minute)
	return q
}

// Buckets is the number of buckets of q (after Normalize).
func (q ActivityQuery) Buckets() int {
	return int((q.Window + q.Bucket - 1) / q.Bucket)
}

// Activity is traffic over a window, oldest bucket first.
type Activity struct {
	Start  time.Time     // start of the first bucket
	Bucket time.Duration // width of each bucket
	// Received counts events received per bucket.
	Received []int
	// Delivered and Dead count the deliveries that were delivered and
	// went dead per destination and bucket (a dead delivery replayed since
	// still counts where it went dead); Failed, the attempts that got no
	// 2xx; Replayed, the replay deliveries created.
	Delivered map[string][]int
	Dead      map[string][]int
	Failed    map[string][]int
	Replayed  map[string][]int
	// Stale counts the events received in the window that were older than
	// their object's newest version; Skipped, those of them whose
	// deliveries were skipped (stale: skip) rather than sent flagged.
	Stale, Skipped int
}

// Sum adds up a series.
func Sum(series []int) int {
	n := 0
	for _, v := range series {
		n += v
	}
	return n
}

// Merge adds up the series of every destination into one.
func Merge(byDest map[string][]int, buckets int) []int {
	out := make([]int, buckets)
	for _, s := range byDest {
		for i, v := range s {
			if i < buckets {
				out[i] += v
			}
		}
	}
	return out
}
