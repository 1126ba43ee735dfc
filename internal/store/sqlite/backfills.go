package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// StartBackfill implements store.BackfillLog.
func (s *Store) StartBackfill(ctx context.Context, b store.Backfill, staleAfter time.Duration) (store.Backfill, error) {
	var cur store.Backfill
	err := s.tx(ctx, "start backfill", func(tx *sql.Tx) error {
		now := s.now()
		q, args := sqlstore.StartBackfill(sqlstore.SQLite, b, now, staleAfter)
		err := tx.QueryRowContext(ctx, q, args...).Scan(sqlstore.Time(&b.HeardAt))
		if !errors.Is(err, sql.ErrNoRows) {
			cur = b
			return store.Unavailable("start backfill", err)
		}
		q, args = sqlstore.LatestBackfill(sqlstore.SQLite, b.Source, now, staleAfter)
		if cur, err = sqlstore.ScanBackfill(tx.QueryRowContext(ctx, q, args...)); err != nil {
			return store.Unavailable("start backfill", err)
		}
		return store.ErrBackfillRunning
	})
	return cur, err
}

// SaveBackfill implements store.BackfillLog.
func (s *Store) SaveBackfill(ctx context.Context, b store.Backfill) (bool, error) {
	var saved bool
	err := s.tx(ctx, "save backfill", func(tx *sql.Tx) error {
		q, args := sqlstore.SaveBackfill(sqlstore.SQLite, b, s.now())
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return store.Unavailable("save backfill", err)
		}
		n, err := res.RowsAffected()
		saved = n == 1
		return store.Unavailable("save backfill", err)
	})
	return saved, err
}

// LatestBackfill implements store.BackfillLog.
func (s *Store) LatestBackfill(ctx context.Context, source string, staleAfter time.Duration) (store.Backfill, bool, error) {
	q, args := sqlstore.LatestBackfill(sqlstore.SQLite, source, s.now(), staleAfter)
	b, err := sqlstore.ScanBackfill(s.r.QueryRowContext(ctx, q, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return store.Backfill{}, false, nil
	}
	if err != nil {
		return store.Backfill{}, false, store.Unavailable("latest backfill", err)
	}
	return b, true, nil
}
