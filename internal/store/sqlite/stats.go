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

// QueueStats implements store.StatsReader. The depth is read from the
// counters (delivery_counts) the triggers keep; the rest is an index
// range scan each: the oldest pending delivery through deliveries_status
// (status, id) — ids are UUIDv7, so the smallest is the oldest — and the
// last success per destination from its delivered deliveries' counter
// (last_at, the latest next_attempt_at: when one finished, 0063).
func (s *Store) QueueStats(ctx context.Context, destinations []string) (store.QueueStats, error) {
	qs := store.QueueStats{Now: s.now().UTC(), Depth: map[string]map[anyhook.DeliveryStatus]int{}, LastDelivered: map[string]time.Time{}, DueSince: map[string]time.Time{}}
	ds, err := query(ctx, s.r, sqlstore.ScanDepth, sqlstore.CountersQuery)
	if err != nil {
		return qs, store.Unavailable("queue stats", err)
	}
	sqlstore.AddDepth(&qs, sqlstore.UnfinishedDepth(ds))
	var created int64
	err = s.r.QueryRowContext(ctx, `SELECT created_at FROM deliveries WHERE status = 'pending' AND NOT `+
		`EXISTS (SELECT 1 FROM destinations p WHERE p.name = deliveries.destination AND (p.paused OR p.breaker_at IS NOT NULL)) ORDER BY id LIMIT 1`).Scan(&created)
	switch {
	case err == nil:
		qs.OldestPending = fromMicros(created)
	case !errors.Is(err, sql.ErrNoRows):
		return qs, store.Unavailable("queue stats", err)
	}
	for _, d := range destinations {
		var last sql.NullInt64
		err := s.r.QueryRowContext(ctx, `SELECT last_at FROM delivery_counts WHERE destination = ? AND status = 'delivered'`, d).Scan(&last)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return qs, store.Unavailable("queue stats", err)
		}
		if last.Valid && last.Int64 > 0 {
			qs.LastDelivered[d] = fromMicros(last.Int64)
		}
		var due sql.NullInt64
		err = s.r.QueryRowContext(ctx, `SELECT min(next_attempt_at) FROM deliveries
			WHERE destination = ? AND status = 'pending' AND next_attempt_at <= ?
				AND NOT EXISTS (SELECT 1 FROM destinations WHERE name = ? AND (paused OR breaker_at IS NOT NULL))`, d, micros(qs.Now), d).Scan(&due)
		if err != nil {
			return qs, store.Unavailable("queue stats", err)
		}
		if due.Valid {
			qs.DueSince[d] = fromMicros(due.Int64)
		}
	}
	return qs, nil
}

// Activity implements store.StatsReader from the activity rollup.
func (s *Store) Activity(ctx context.Context, aq store.ActivityQuery) (store.Activity, error) {
	act, from, to := sqlstore.NewActivity(aq, s.now())
	rows, err := query(ctx, s.r, sqlstore.ScanActivity, sqlstore.ActivityQuery, from, to)
	if err != nil {
		return act, store.Unavailable("activity", err)
	}
	sqlstore.AddActivity(&act, rows, aq.Destinations)
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
