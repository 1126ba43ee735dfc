package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// RecordRejections implements store.RejectionLog: one pipelined batch, in
// one implicit transaction.
func (s *Store) RecordRejections(ctx context.Context, rs []anyhook.Rejection) error {
	if len(rs) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, r := range rs {
		b.Queue(sqlstore.InsertRejection(sqlstore.Postgres), sqlstore.RejectionArgs(sqlstore.Postgres, r)...)
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return store.Unavailable("record rejections", err)
	}
	return nil
}

// PruneRejections implements store.RejectionLog.
func (s *Store) PruneRejections(ctx context.Context, keepKnown, keepUnknown int) (int64, error) {
	b := &pgx.Batch{}
	var n int64
	for _, st := range sqlstore.PruneRejections(sqlstore.Postgres, keepKnown, keepUnknown) {
		b.Queue(st.SQL, st.Args...).Exec(func(ct pgconn.CommandTag) error { n += ct.RowsAffected(); return nil })
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return 0, store.Unavailable("prune rejections", err)
	}
	return n, nil
}

// ListRejections implements store.RejectionLog.
func (s *Store) ListRejections(ctx context.Context, f store.RejectionFilter) ([]anyhook.Rejection, string, error) {
	return sqlstore.ListRejections(sqlstore.Postgres, f, func(q string, args []any) ([]anyhook.Rejection, error) {
		rows, err := s.pool.Query(ctx, q, args...)
		if err != nil {
			return nil, err
		}
		return collect(rows, sqlstore.ScanRejection)
	})
}
