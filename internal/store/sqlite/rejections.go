package sqlite

import (
	"context"
	"database/sql"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// RecordRejections implements store.RejectionLog.
func (s *Store) RecordRejections(ctx context.Context, rs []anyhook.Rejection) error {
	if len(rs) == 0 {
		return nil
	}
	return s.tx(ctx, "record rejections", func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, sqlstore.InsertRejection(sqlstore.SQLite))
		if err != nil {
			return store.Unavailable("record rejections", err)
		}
		defer st.Close()
		for _, r := range rs {
			if _, err := st.ExecContext(ctx, sqlstore.RejectionArgs(sqlstore.SQLite, r)...); err != nil {
				return store.Unavailable("record rejections", err)
			}
		}
		return nil
	})
}

// PruneRejections implements store.RejectionLog.
func (s *Store) PruneRejections(ctx context.Context, keepKnown, keepUnknown int) (int64, error) {
	var n int64
	err := s.tx(ctx, "prune rejections", func(tx *sql.Tx) error {
		for _, st := range sqlstore.PruneRejections(sqlstore.SQLite, keepKnown, keepUnknown) {
			res, err := tx.ExecContext(ctx, st.SQL, st.Args...)
			if err != nil {
				return store.Unavailable("prune rejections", err)
			}
			d, _ := res.RowsAffected()
			n += d
		}
		return nil
	})
	return n, err
}

// ListRejections implements store.RejectionLog.
func (s *Store) ListRejections(ctx context.Context, f store.RejectionFilter) ([]anyhook.Rejection, string, error) {
	return sqlstore.ListRejections(sqlstore.SQLite, f, func(q string, args []any) ([]anyhook.Rejection, error) {
		return query(ctx, s.r, sqlstore.ScanRejection, q, args...)
	})
}
