package sqlite

import (
	"context"
	"database/sql"
	"strconv"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

var _ store.RejectionLog = (*Store)(nil)

// RecordRejections implements store.RejectionLog.
func (s *Store) RecordRejections(ctx context.Context, rs []anyhook.Rejection) error {
	if len(rs) == 0 {
		return nil
	}
	return s.tx(ctx, "record rejections", func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `INSERT INTO rejections (at, source, known, reason, status, message, remote_addr, user_agent,
			body_size, body_sha256, header_count, header_bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return store.Unavailable("record rejections", err)
		}
		defer st.Close()
		for _, r := range rs {
			if _, err := st.ExecContext(ctx, micros(r.At), r.Source, r.KnownSource, r.Reason, r.Status, r.Message, r.RemoteAddr, r.UserAgent,
				r.BodySize, nullable(r.BodySHA256), r.HeaderCount, r.HeaderBytes); err != nil {
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
		for _, k := range []struct {
			known bool
			keep  int
		}{{true, keepKnown}, {false, keepUnknown}} {
			q, args := store.PruneRejectionsSQL, []any{k.known, k.known, k.keep - 1}
			if k.keep <= 0 {
				q, args = `DELETE FROM rejections WHERE known = ?`, []any{k.known}
			}
			res, err := tx.ExecContext(ctx, q, args...)
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
	cursor, err := store.RejectionCursor(f.Cursor)
	if err != nil {
		return nil, "", err
	}
	var conds []string
	var args []any
	add := func(cond string, arg any) { conds = append(conds, cond); args = append(args, arg) }
	if f.Source != "" {
		add("source = ?", f.Source)
	}
	if f.Reason != "" {
		add("reason = ?", f.Reason)
	}
	if !f.Since.IsZero() {
		add("at >= ?", micros(f.Since))
	}
	if !f.Until.IsZero() {
		add("at < ?", micros(f.Until))
	}
	if cursor > 0 {
		add("id < ?", cursor)
	}
	limit := store.PageLimit(f.Limit)
	rows, err := s.r.QueryContext(ctx, `SELECT id, at, source, known, reason, status, message, remote_addr, user_agent,
		body_size, coalesce(body_sha256, ''), header_count, header_bytes FROM rejections`+where(conds)+
		` ORDER BY id DESC LIMIT `+strconv.Itoa(limit+1), args...)
	if err != nil {
		return nil, "", store.Unavailable("list rejections", err)
	}
	defer rows.Close()
	var out []anyhook.Rejection
	for rows.Next() {
		var r anyhook.Rejection
		var at int64
		if err := rows.Scan(&r.ID, &at, &r.Source, &r.KnownSource, &r.Reason, &r.Status, &r.Message, &r.RemoteAddr, &r.UserAgent,
			&r.BodySize, &r.BodySHA256, &r.HeaderCount, &r.HeaderBytes); err != nil {
			return nil, "", store.Unavailable("list rejections", err)
		}
		r.At = fromMicros(at)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, "", store.Unavailable("list rejections", err)
	}
	out, next := store.Page(out, limit, func(r anyhook.Rejection) string { return strconv.FormatInt(r.ID, 10) })
	return out, next, nil
}
