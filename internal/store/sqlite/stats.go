package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// placeholders is "?, ?, …" for n values.
func placeholders(n int) string {
	if n == 0 {
		return ""
	}
	return "?" + strings.Repeat(", ?", n-1)
}

// QueueStats implements store.StatsReader. Every query is an index range
// scan: depth through deliveries_status (status, id) restricted to the
// unfinished statuses, the oldest pending delivery through
// deliveries_status (status, id) — ids are UUIDv7, so the smallest is the
// oldest — and the last success per destination as a max over
// deliveries_due (a finished delivery's next_attempt_at is when it
// finished).
func (s *Store) QueueStats(ctx context.Context, destinations []string) (store.QueueStats, error) {
	qs := store.QueueStats{Now: s.now().UTC(), Depth: map[string]map[anyhook.DeliveryStatus]int{}, LastDelivered: map[string]time.Time{}, DueSince: map[string]time.Time{}}
	// Depth covers every destination, also those destinations does not
	// list (orphaned: no longer in the config), as on PostgreSQL.
	var args []any
	// Grouped through the index first (every destination, so that the
	// deliveries of one no config names are counted too); then the
	// pending of a paused destination are shown paused, per group rather
	// than per row.
	q := `SELECT g.destination, CASE WHEN g.status IN ('pending', 'retrying') AND coalesce(p.paused, 0) THEN 'paused' ELSE g.status END, g.n
		FROM (SELECT destination, ` + sqlstore.DepthStatusExpr + ` AS status, count(*) AS n FROM deliveries
			WHERE status IN (` + placeholders(len(store.UnfinishedStatuses)) + `) GROUP BY 1, 2) g
		LEFT JOIN destinations p ON p.name = g.destination`
	for _, st := range store.UnfinishedStatuses {
		args = append(args, string(st))
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return qs, store.Unavailable("queue stats", err)
	}
	ds, err := sqlstore.Collect(rows, sqlstore.ScanDepth)
	rows.Close()
	if err != nil {
		return qs, store.Unavailable("queue stats", err)
	}
	sqlstore.AddDepth(&qs, ds)
	var created int64
	err = s.r.QueryRowContext(ctx, `SELECT created_at FROM deliveries WHERE status = 'pending' AND NOT `+
		`EXISTS (SELECT 1 FROM destinations p WHERE p.name = deliveries.destination AND p.paused) ORDER BY id LIMIT 1`).Scan(&created)
	switch {
	case err == nil:
		qs.OldestPending = fromMicros(created)
	case !errors.Is(err, sql.ErrNoRows):
		return qs, store.Unavailable("queue stats", err)
	}
	for _, d := range destinations {
		var last sql.NullInt64
		err := s.r.QueryRowContext(ctx, `SELECT max(next_attempt_at) FROM deliveries WHERE destination = ? AND status = 'delivered'`, d).Scan(&last)
		if err != nil {
			return qs, store.Unavailable("queue stats", err)
		}
		if last.Valid && last.Int64 > 0 {
			qs.LastDelivered[d] = fromMicros(last.Int64)
		}
		var due sql.NullInt64
		err = s.r.QueryRowContext(ctx, `SELECT min(next_attempt_at) FROM deliveries
			WHERE destination = ? AND status = 'pending' AND next_attempt_at <= ?
				AND NOT EXISTS (SELECT 1 FROM destinations WHERE name = ? AND paused)`, d, micros(qs.Now), d).Scan(&due)
		if err != nil {
			return qs, store.Unavailable("queue stats", err)
		}
		if due.Valid {
			qs.DueSince[d] = fromMicros(due.Int64)
		}
	}
	return qs, nil
}

// Activity implements store.StatsReader: events through events_received,
// finished deliveries through deliveries_due, both read only over the
// window.
func (s *Store) Activity(ctx context.Context, aq store.ActivityQuery) (store.Activity, error) {
	aq = aq.Normalize()
	n := aq.Buckets()
	now := s.now().UTC()
	start := now.Truncate(aq.Bucket).Add(-time.Duration(n-1) * aq.Bucket)
	act := store.Activity{Start: start, Bucket: aq.Bucket, Received: make([]int, n),
		Delivered: map[string][]int{}, Dead: map[string][]int{}}
	from, width := micros(start), aq.Bucket.Microseconds()
	bucket := func(b int64) int {
		return int(min(max(b, 0), int64(n-1)))
	}
	rs, err := query(ctx, s.r, sqlstore.ScanBucket, `SELECT (received_at - ?) / ?, count(*) FROM events WHERE received_at >= ? GROUP BY 1`, from, width, from)
	if err != nil {
		return act, store.Unavailable("activity", err)
	}
	for _, c := range rs {
		act.Received[bucket(c.Bucket)] += c.N
	}
	// Stale events through events_received too: few rows per window.
	if err := s.r.QueryRowContext(ctx, `SELECT count(*), coalesce(sum(EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = events.id AND d.status = 'skipped')), 0)
		FROM events WHERE received_at >= ? AND stale`, from).Scan(&act.Stale, &act.Skipped); err != nil {
		return act, store.Unavailable("activity", err)
	}
	if len(aq.Destinations) == 0 {
		return act, nil
	}
	args := []any{from, width}
	for _, d := range aq.Destinations {
		args = append(args, d)
	}
	args = append(args, from)
	fs, err := query(ctx, s.r, sqlstore.ScanDestBucket, `SELECT destination, status, (next_attempt_at - ?) / ?, count(*) FROM deliveries
		WHERE destination IN (`+placeholders(len(aq.Destinations))+`) AND status IN ('delivered', 'dead') AND next_attempt_at >= ?
		GROUP BY 1, 2, 3`, args...)
	if err != nil {
		return act, store.Unavailable("activity", err)
	}
	sqlstore.AddFinished(&act, fs, n, bucket)
	return act, nil
}

// DeliveryStates implements store.StatsReader through deliveries_event.
func (s *Store) DeliveryStates(ctx context.Context, eventIDs []string) (map[string][]store.DeliveryState, error) {
	return sqlstore.DeliveryStates(eventIDs, func(ids []string) ([]sqlstore.EventState, error) {
		args := make([]any, len(ids))
		for i, id := range ids {
			args[i] = id
		}
		return query(ctx, s.r, sqlstore.ScanState, `SELECT `+sqlstore.StatesColumns+` FROM deliveries
		WHERE event_id IN (`+placeholders(len(args))+`) ORDER BY id`, args...)
	})
}
