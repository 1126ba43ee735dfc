package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// QueueStats implements store.StatsReader: the depth from the counters
// (delivery_counts, folded first), the oldest pending delivery as the
// smallest id among them (UUIDv7), and each destination's last success
// from its delivered counters (last_at, the latest next_attempt_at: when
// one finished, 0062).
func (s *Store) QueueStats(ctx context.Context, destinations []string) (store.QueueStats, error) {
	qs := store.QueueStats{Depth: map[string]map[anyhook.DeliveryStatus]int{}, LastDelivered: map[string]time.Time{}, DueSince: map[string]time.Time{}}
	if err := s.pool.QueryRow(ctx, `SELECT now()`).Scan(&qs.Now); err != nil {
		return qs, store.Unavailable("queue stats", err)
	}
	qs.Now = qs.Now.UTC()
	if err := s.foldCounters(ctx, qs.Now); err != nil {
		return qs, store.Unavailable("queue stats", err)
	}
	ds, err := s.counters(ctx)
	if err != nil {
		return qs, store.Unavailable("queue stats", err)
	}
	sqlstore.AddDepth(&qs, sqlstore.UnfinishedDepth(ds))
	var oldest time.Time
	err = s.pool.QueryRow(ctx, `SELECT created_at FROM deliveries WHERE status = 'pending'
		AND NOT EXISTS (SELECT 1 FROM destinations p WHERE p.name = deliveries.destination AND (p.paused OR p.breaker_at IS NOT NULL)) ORDER BY id LIMIT 1`).Scan(&oldest)
	switch {
	case err == nil:
		qs.OldestPending = oldest.UTC()
	case !errors.Is(err, pgx.ErrNoRows):
		return qs, store.Unavailable("queue stats", err)
	}
	for _, d := range destinations {
		var last *time.Time
		// Without last_at (a process of a build before 0062 folded the
		// counters, dropping it), the newest delivered delivery's, as
		// before: an older one retried until later is missed until the
		// next success.
		err := s.pool.QueryRow(ctx, `SELECT coalesce(
			(SELECT max(last_at) FROM delivery_counts WHERE destination = $1 AND status = 'delivered'),
			(SELECT next_attempt_at FROM deliveries WHERE destination = $1 AND status = 'delivered' ORDER BY id DESC LIMIT 1))`, d).Scan(&last)
		if err != nil {
			return qs, store.Unavailable("queue stats", err)
		}
		if last != nil {
			qs.LastDelivered[d] = last.UTC()
		}
		var due *time.Time
		err = s.pool.QueryRow(ctx, `SELECT min(next_attempt_at) FROM deliveries
			WHERE destination = $1 AND status = 'pending' AND next_attempt_at <= $2
				AND NOT EXISTS (SELECT 1 FROM destinations WHERE name = $1 AND (paused OR breaker_at IS NOT NULL))`, d, qs.Now).Scan(&due)
		if err != nil {
			return qs, store.Unavailable("queue stats", err)
		}
		if due != nil {
			qs.DueSince[d] = due.UTC()
		}
	}
	return qs, nil
}

// counters reads sqlstore.CountersQuery.
func (s *Store) counters(ctx context.Context) ([]sqlstore.Count, error) {
	rows, err := s.pool.Query(ctx, sqlstore.CountersQuery)
	if err != nil {
		return nil, err
	}
	return collect(rows, sqlstore.ScanDepth)
}

// The folds move the counts of the backends' own rows (shard: its
// pg_backend_pid()) into shard 0, so that the rows do not grow with every
// connection ever made. They skip the rows a transaction holds (SKIP
// LOCKED), so they never wait for a writer, and a writer waits for a fold
// only until it commits; the activity of the last two minutes is left
// where it is.
const (
	qFoldCounts = `WITH moved AS (
		DELETE FROM delivery_counts WHERE (destination, status, shard) IN (
			SELECT destination, status, shard FROM delivery_counts WHERE shard <> 0 FOR UPDATE SKIP LOCKED)
		RETURNING destination, status, n, last_at)
	INSERT INTO delivery_counts (destination, status, shard, n, last_at)
		SELECT destination, status, 0, sum(n), max(last_at) FROM moved GROUP BY 1, 2 ORDER BY 1, 2
		ON CONFLICT (destination, status, shard) DO UPDATE SET n = delivery_counts.n + excluded.n,
			last_at = greatest(delivery_counts.last_at, excluded.last_at)`
	qFoldActivity = `WITH moved AS (
		DELETE FROM activity WHERE (minute, destination, kind, shard) IN (
			SELECT minute, destination, kind, shard FROM activity WHERE shard <> 0 AND minute < $1 FOR UPDATE SKIP LOCKED)
		RETURNING minute, destination, kind, n)
	INSERT INTO activity (minute, destination, kind, shard, n)
		SELECT minute, destination, kind, 0, sum(n) FROM moved GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
		ON CONFLICT (minute, destination, kind, shard) DO UPDATE SET n = activity.n + excluded.n`
)

func (s *Store) foldCounters(ctx context.Context, now time.Time) error {
	if _, err := s.pool.Exec(ctx, qFoldCounts); err != nil {
		return err
	}
	_, err := s.pool.Exec(ctx, qFoldActivity, now.Unix()/60-2)
	return err
}

// Activity implements store.StatsReader from the activity rollup.
func (s *Store) Activity(ctx context.Context, aq store.ActivityQuery) (store.Activity, error) {
	var now time.Time
	if err := s.pool.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return store.Activity{}, store.Unavailable("activity", err)
	}
	act, from, to := sqlstore.NewActivity(aq, now)
	rows, err := s.pool.Query(ctx, sqlstore.Postgres.Rebind(sqlstore.ActivityQuery), from, to)
	if err != nil {
		return act, store.Unavailable("activity", err)
	}
	rs, err := collect(rows, sqlstore.ScanActivity)
	if err != nil {
		return act, store.Unavailable("activity", err)
	}
	sqlstore.AddActivity(&act, rs, aq.Destinations)
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
