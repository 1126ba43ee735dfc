package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

func statusStrings(sts []anyhook.DeliveryStatus) []string {
	out := make([]string, len(sts))
	for i, s := range sts {
		out[i] = string(s)
	}
	return out
}

// QueueStats implements store.StatsReader: depth through deliveries_status
// (status, id) restricted to the unfinished statuses, the oldest pending
// delivery as the smallest id among them (UUIDv7), and each destination's
// last success as the newest delivered delivery found walking
// deliveries_destination (destination, id) backwards — it stops at the
// first delivered one, which is at the head when the destination works.
func (s *Store) QueueStats(ctx context.Context, destinations []string) (store.QueueStats, error) {
	qs := store.QueueStats{Depth: map[string]map[anyhook.DeliveryStatus]int{}, LastDelivered: map[string]time.Time{}, DueSince: map[string]time.Time{}}
	if err := s.pool.QueryRow(ctx, `SELECT now()`).Scan(&qs.Now); err != nil {
		return qs, store.Unavailable("queue stats", err)
	}
	qs.Now = qs.Now.UTC()
	// Grouped through the index first; then the pending of a paused
	// destination are shown paused, per group rather than per row.
	rows, err := s.pool.Query(ctx, `SELECT g.destination, CASE WHEN g.status IN ('pending', 'retrying') AND coalesce(p.paused, false) THEN 'paused' ELSE g.status END, g.n
		FROM (SELECT destination, `+sqlstore.DepthStatusExpr+` AS status, count(*) AS n FROM deliveries WHERE status = ANY($1) GROUP BY 1, 2) g
		LEFT JOIN destinations p ON p.name = g.destination`,
		statusStrings(store.UnfinishedStatuses))
	if err != nil {
		return qs, store.Unavailable("queue stats", err)
	}
	ds, err := collect(rows, sqlstore.ScanDepth)
	if err != nil {
		return qs, store.Unavailable("queue stats", err)
	}
	sqlstore.AddDepth(&qs, ds)
	var oldest time.Time
	err = s.pool.QueryRow(ctx, `SELECT created_at FROM deliveries WHERE status = 'pending'
		AND NOT EXISTS (SELECT 1 FROM destinations p WHERE p.name = deliveries.destination AND p.paused) ORDER BY id LIMIT 1`).Scan(&oldest)
	switch {
	case err == nil:
		qs.OldestPending = oldest.UTC()
	case !errors.Is(err, pgx.ErrNoRows):
		return qs, store.Unavailable("queue stats", err)
	}
	for _, d := range destinations {
		var last time.Time
		err := s.pool.QueryRow(ctx, `SELECT next_attempt_at FROM deliveries WHERE destination = $1 AND status = 'delivered' ORDER BY id DESC LIMIT 1`, d).Scan(&last)
		switch {
		case err == nil:
			qs.LastDelivered[d] = last.UTC()
		case !errors.Is(err, pgx.ErrNoRows):
			return qs, store.Unavailable("queue stats", err)
		}
		var due *time.Time
		err = s.pool.QueryRow(ctx, `SELECT min(next_attempt_at) FROM deliveries
			WHERE destination = $1 AND status = 'pending' AND next_attempt_at <= $2
				AND NOT EXISTS (SELECT 1 FROM destinations WHERE name = $1 AND paused)`, d, qs.Now).Scan(&due)
		if err != nil {
			return qs, store.Unavailable("queue stats", err)
		}
		if due != nil {
			qs.DueSince[d] = due.UTC()
		}
	}
	return qs, nil
}

// idAt is the smallest UUIDv7 text of a time: ids compare bytewise
// (COLLATE "C"), so id >= idAt(t) selects rows created at or after t
// through an (…, id) index.
func idAt(t time.Time) string {
	ms := uint64(max(t.UnixMilli(), 0))
	return fmt.Sprintf("%08x-%04x-", ms>>16, ms&0xffff)
}

// Activity implements store.StatsReader: events through events_received;
// finished deliveries through deliveries_status (status, id), reading only
// deliveries created within two windows (a delivery still retrying after
// that is not counted when it finally finishes), then keeping those that
// finished in the window.
func (s *Store) Activity(ctx context.Context, aq store.ActivityQuery) (store.Activity, error) {
	aq = aq.Normalize()
	n := aq.Buckets()
	var now time.Time
	if err := s.pool.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return store.Activity{}, store.Unavailable("activity", err)
	}
	now = now.UTC()
	start := now.Truncate(aq.Bucket).Add(-time.Duration(n-1) * aq.Bucket)
	act := store.Activity{Start: start, Bucket: aq.Bucket, Received: make([]int, n),
		Delivered: map[string][]int{}, Dead: map[string][]int{}}
	width := aq.Bucket.Seconds()
	bucket := func(b int64) int { return int(min(max(b, 0), int64(n-1))) }
	rows, err := s.pool.Query(ctx, `SELECT floor(extract(epoch FROM received_at - $1) / $2)::bigint, count(*)
		FROM events WHERE received_at >= $1 GROUP BY 1`, start, width)
	if err != nil {
		return act, store.Unavailable("activity", err)
	}
	rs, err := collect(rows, sqlstore.ScanBucket)
	if err != nil {
		return act, store.Unavailable("activity", err)
	}
	for _, c := range rs {
		act.Received[bucket(c.Bucket)] += c.N
	}
	// Stale events through events_received too: few rows per window.
	if err := s.pool.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = events.id AND d.status = 'skipped'))
		FROM events WHERE received_at >= $1 AND stale`, start).Scan(&act.Stale, &act.Skipped); err != nil {
		return act, store.Unavailable("activity", err)
	}
	if len(aq.Destinations) == 0 {
		return act, nil
	}
	rows, err = s.pool.Query(ctx, `SELECT destination, status, floor(extract(epoch FROM next_attempt_at - $1) / $2)::bigint, count(*)
		FROM deliveries
		WHERE status IN ('delivered', 'dead') AND id >= $3 AND next_attempt_at >= $1 AND destination = ANY($4)
		GROUP BY 1, 2, 3`, start, width, idAt(start.Add(-aq.Window)), aq.Destinations)
	if err != nil {
		return act, store.Unavailable("activity", err)
	}
	fs, err := collect(rows, sqlstore.ScanDestBucket)
	if err != nil {
		return act, store.Unavailable("activity", err)
	}
	sqlstore.AddFinished(&act, fs, n, bucket)
	return act, nil
}

// DeliveryStates implements store.StatsReader through deliveries_event.
func (s *Store) DeliveryStates(ctx context.Context, eventIDs []string) (map[string][]store.DeliveryState, error) {
	return sqlstore.DeliveryStates(eventIDs, func(ids []string) ([]sqlstore.EventState, error) {
		rows, err := s.pool.Query(ctx, `SELECT `+sqlstore.StatesColumns+` FROM deliveries WHERE event_id = ANY($1) ORDER BY id`, ids)
		if err != nil {
			return nil, err
		}
		return collect(rows, sqlstore.ScanState)
	})
}
