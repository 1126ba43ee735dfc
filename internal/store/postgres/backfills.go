package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// StartBackfill implements store.BackfillLog: one upsert, whose
// condition PostgreSQL checks again on the row a concurrent start
// committed, so that of two starts one wins.
func (s *Store) StartBackfill(ctx context.Context, b store.Backfill, staleAfter time.Duration) (store.Backfill, error) {
	q, args := sqlstore.StartBackfill(sqlstore.Postgres, b, time.Time{}, staleAfter)
	err := s.pool.QueryRow(ctx, q, args...).Scan(sqlstore.Time(&b.HeardAt))
	if !errors.Is(err, pgx.ErrNoRows) {
		return b, store.Unavailable("start backfill", err)
	}
	cur, ok, err := s.LatestBackfill(ctx, b.Source, staleAfter)
	if err != nil {
		return store.Backfill{}, err
	}
	if !ok {
		return store.Backfill{}, store.Unavailable("start backfill", errors.New("the running backfill it found is gone"))
	}
	return cur, store.ErrBackfillRunning
}

// SaveBackfill implements store.BackfillLog.
func (s *Store) SaveBackfill(ctx context.Context, b store.Backfill) (bool, error) {
	q, args := sqlstore.SaveBackfill(sqlstore.Postgres, b, time.Time{})
	tag, err := s.pool.Exec(ctx, q, args...)
	if err != nil {
		return false, store.Unavailable("save backfill", err)
	}
	return tag.RowsAffected() == 1, nil
}

// LatestBackfill implements store.BackfillLog.
func (s *Store) LatestBackfill(ctx context.Context, source string, staleAfter time.Duration) (store.Backfill, bool, error) {
	q, args := sqlstore.LatestBackfill(sqlstore.Postgres, source, time.Time{}, staleAfter)
	b, err := sqlstore.ScanBackfill(s.pool.QueryRow(ctx, q, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Backfill{}, false, nil
	}
	if err != nil {
		return store.Backfill{}, false, store.Unavailable("latest backfill", err)
	}
	return b, true, nil
}
