package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// orderCandidates selects due pending deliveries of a destination whose
// object is not blocked (no delivery of it to the destination is
// delivering, held or waiting for a retry), oldest due first, and says
// whether each has an object. Parameters: destination, now, now, limit.
const orderCandidates = `SELECT d.id, e.object IS NOT NULL FROM deliveries d JOIN events e ON e.id = d.event_id
	WHERE d.destination = ? AND d.status = 'pending' AND d.next_attempt_at <= ?
		AND (e.object IS NULL OR NOT EXISTS (
			SELECT 1 FROM events be JOIN deliveries b ON b.event_id = be.id
			WHERE be.source = e.source AND be.object = e.object AND b.destination = d.destination
				AND (b.status IN ('delivering', 'held') OR (b.status = 'pending' AND b.next_attempt_at > ?))))
	ORDER BY d.next_attempt_at LIMIT ?`

// ClaimInOrder implements store.Store. SQLite runs one write transaction
// at a time, so what it reads of an object's queue holds until it commits.
func (s *Store) ClaimInOrder(ctx context.Context, destination string, limit int, lease time.Duration) ([]store.Claim, error) {
	if limit <= 0 {
		return nil, nil
	}
	var claims []store.Claim
	err := s.tx(ctx, "claim", func(tx *sql.Tx) error {
		claims = nil
		st := s.stmts(ctx, tx)
		var paused bool
		err := st.queryRow(qPaused, destination).Scan(&paused)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return store.Unavailable("claim", err)
		}
		if paused {
			return nil
		}
		now := s.now()
		type cand struct {
			id     string
			object bool
		}
		cands, err := query(ctx, tx, func(sc scanner) (cand, error) {
			var c cand
			return c, sc.Scan(&c.id, &c.object)
		}, orderCandidates, destination, micros(now), micros(now), store.OrderCandidates(limit))
		if err != nil {
			return store.Unavailable("claim", err)
		}
		var ids, objects []any
		for _, c := range cands {
			if c.object {
				objects = append(objects, c.id)
			} else {
				ids = append(ids, c.id)
			}
		}
		if len(objects) > 0 {
			qs, err := query(ctx, tx, sqlstore.ScanQueued, sqlstore.QueuedQuery(sqlstore.SQLite, len(objects)), append([]any{micros(now)}, objects...)...)
			if err != nil {
				return store.Unavailable("claim", err)
			}
			for _, id := range store.Heads(qs) {
				ids = append(ids, id)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		ids = ids[:min(len(ids), limit)]
		ds, err := query(ctx, tx, sqlstore.ScanDelivery, `UPDATE deliveries
			SET status = 'delivering', attempt_count = attempt_count + 1, lease_until = ?, updated_at = ?, claimed_at = ?
			WHERE id IN (?`+strings.Repeat(",?", len(ids)-1)+`) AND status = 'pending'
			RETURNING `+deliveryCols, append([]any{micros(now.Add(lease)), micros(now), micros(now)}, ids...)...)
		if err != nil {
			return store.Unavailable("claim", err)
		}
		for _, d := range ds {
			claims = append(claims, store.Claim{Delivery: d})
		}
		return s.attachEvents(ctx, tx, claims)
	})
	if err != nil {
		return nil, err
	}
	return claims, nil
}

// WaitsBehind implements store.Store.
func (s *Store) WaitsBehind(ctx context.Context, ids []string) (map[string]store.Blocker, error) {
	if len(ids) == 0 {
		return map[string]store.Blocker{}, nil
	}
	args := []any{micros(s.now())}
	for _, id := range ids {
		args = append(args, id)
	}
	qs, err := query(ctx, s.r, sqlstore.ScanQueued, sqlstore.QueuedQuery(sqlstore.SQLite, len(ids)), args...)
	if err != nil {
		return nil, store.Unavailable("waits behind", err)
	}
	return store.Behind(qs), nil
}
