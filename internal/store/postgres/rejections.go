package postgres

import (
	"context"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

var _ store.RejectionLog = (*Store)(nil)

// RecordRejections implements store.RejectionLog: one pipelined batch, in
// one implicit transaction.
func (s *Store) RecordRejections(ctx context.Context, rs []anyhook.Rejection) error {
	if len(rs) == 0 {
		return nil
	}
	b := &pgx.Batch{}
	for _, r := range rs {
		b.Queue(`INSERT INTO rejections (at, source, known, reason, status, message, remote_addr, user_agent,
			body_size, body_sha256, header_count, header_bytes) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)`,
			r.At, r.Source, r.KnownSource, r.Reason, r.Status, r.Message, r.RemoteAddr, r.UserAgent,
			r.BodySize, nullable(r.BodySHA256), r.HeaderCount, r.HeaderBytes)
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
	count := func(ct pgconn.CommandTag) error { n += ct.RowsAffected(); return nil }
	for _, k := range []struct {
		known bool
		keep  int
	}{{true, keepKnown}, {false, keepUnknown}} {
		if k.keep <= 0 {
			b.Queue(`DELETE FROM rejections WHERE known = $1`, k.known).Exec(count)
			continue
		}
		b.Queue(placeholders(store.PruneRejectionsSQL), k.known, k.known, k.keep-1).Exec(count)
	}
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return 0, store.Unavailable("prune rejections", err)
	}
	return n, nil
}

// placeholders numbers the ? placeholders of q: $1, $2, …
func placeholders(q string) string {
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// ListRejections implements store.RejectionLog.
func (s *Store) ListRejections(ctx context.Context, f store.RejectionFilter) ([]anyhook.Rejection, string, error) {
	cursor, err := store.RejectionCursor(f.Cursor)
	if err != nil {
		return nil, "", err
	}
	var c conds
	if f.Source != "" {
		c.add("source = ?", f.Source)
	}
	if f.Reason != "" {
		c.add("reason = ?", f.Reason)
	}
	if !f.Since.IsZero() {
		c.add("at >= ?", f.Since)
	}
	if !f.Until.IsZero() {
		c.add("at < ?", f.Until)
	}
	if cursor > 0 {
		c.add("id < ?", cursor)
	}
	limit := store.PageLimit(f.Limit)
	rows, err := s.pool.Query(ctx, `SELECT id, at, source, known, reason, status, message, remote_addr, user_agent,
		body_size, coalesce(body_sha256, ''), header_count, header_bytes FROM rejections`+c.String()+
		` ORDER BY id DESC LIMIT `+strconv.Itoa(limit+1), c.args...)
	if err != nil {
		return nil, "", store.Unavailable("list rejections", err)
	}
	out, err := collect(rows, func(sc scanner) (anyhook.Rejection, error) {
		var r anyhook.Rejection
		err := sc.Scan(&r.ID, &r.At, &r.Source, &r.KnownSource, &r.Reason, &r.Status, &r.Message, &r.RemoteAddr, &r.UserAgent,
			&r.BodySize, &r.BodySHA256, &r.HeaderCount, &r.HeaderBytes)
		r.At = utc(r.At)
		return r, err
	})
	if err != nil {
		return nil, "", store.Unavailable("list rejections", err)
	}
	out, next := store.Page(out, limit, func(r anyhook.Rejection) string { return strconv.FormatInt(r.ID, 10) })
	return out, next, nil
}
