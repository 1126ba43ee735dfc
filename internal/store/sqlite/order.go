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
// delivering, held or waiting for a retry), oldest due first, with each
// one's source and object. Parameters: destination, destination, now,
// destination, now, limit. The blocked objects are read once (from the
// destination's few deliveries in flight or held, by
// deliveries_destination_status, and waiting, by deliveries_due, which
// holds only the pending), not once per candidate through the object's
// whole queue: a hot object with thousands waiting made every claim walk
// its queue for each candidate.
const orderCandidates = `WITH blocked AS MATERIALIZED (
		SELECT DISTINCT be.source, be.object FROM (
			SELECT event_id FROM deliveries INDEXED BY deliveries_destination_status
			WHERE destination = ? AND status IN ('delivering', 'held')
			UNION ALL
			SELECT event_id FROM deliveries INDEXED BY deliveries_due
			WHERE destination = ? AND status = 'pending' AND next_attempt_at > ?
		) AS b CROSS JOIN events be ON be.id = b.event_id
		WHERE be.object IS NOT NULL)
	SELECT d.id, e.source, coalesce(e.object, '') FROM deliveries d INDEXED BY deliveries_due JOIN events e ON e.id = d.event_id
	WHERE d.destination = ? AND d.status = 'pending' AND d.next_attempt_at <= ?
		AND (e.object IS NULL OR NOT EXISTS (SELECT 1 FROM blocked k WHERE k.source = e.source AND k.object = e.object))
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
		if paused, err := s.paused(ctx, tx, destination); paused || err != nil {
			return err
		}
		var err error
		claims, err = s.claimInOrderTx(ctx, tx, destination, limit, lease)
		return err
	})
	if err != nil {
		return nil, err
	}
	return claims, nil
}

// claimInOrderTx claims, in tx, up to limit due pending deliveries of
// destination that head their object's queue, oldest due first.
func (s *Store) claimInOrderTx(ctx context.Context, tx *sql.Tx, destination string, limit int, lease time.Duration) ([]store.Claim, error) {
	now := s.now()
	cands, err := query(ctx, tx, sqlstore.ScanOrderCandidate, orderCandidates, destination, destination, micros(now), destination, micros(now), store.OrderCandidates(limit))
	if err != nil {
		return nil, store.Unavailable("claim", err)
	}
	ids, err := store.ToClaim(cands, limit, func(objects []string) ([]store.Queued, error) {
		return s.queued(ctx, tx, now, objects)
	})
	if err != nil {
		return nil, store.Unavailable("claim", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	lnow := s.leaseNow()
	args := []any{micros(lnow.Add(lease)), micros(now), micros(lnow)}
	for _, id := range ids {
		args = append(args, id)
	}
	ds, err := query(ctx, tx, sqlstore.ScanDelivery, `UPDATE deliveries
		SET status = 'delivering', attempt_count = attempt_count + 1, lease_until = ?, updated_at = ?, claimed_at = ?
		WHERE id IN (?`+strings.Repeat(",?", len(ids)-1)+`) AND status = 'pending'
		RETURNING `+deliveryCols, args...)
	if err != nil {
		return nil, store.Unavailable("claim", err)
	}
	return s.withEvents(ctx, tx, ds)
}

// WaitsBehind implements store.Store.
func (s *Store) WaitsBehind(ctx context.Context, ids []string) (map[string]store.Blocker, error) {
	if len(ids) == 0 {
		return map[string]store.Blocker{}, nil
	}
	qs, err := s.queued(ctx, s.r, s.now(), ids)
	if err != nil {
		return nil, store.Unavailable("waits behind", err)
	}
	return store.Behind(qs), nil
}

// queued reads the queues of the objects of the deliveries ids
// (sqlstore.QueuedQuery) as of now.
func (s *Store) queued(ctx context.Context, db querier, now time.Time, ids []string) ([]store.Queued, error) {
	args := []any{micros(now)}
	for _, id := range ids {
		args = append(args, id)
	}
	return query(ctx, db, sqlstore.ScanQueued, sqlstore.QueuedQuery(sqlstore.SQLite, len(ids)), args...)
}

// paused reports, in tx, whether destination is paused.
func (s *Store) paused(ctx context.Context, tx *sql.Tx, destination string) (bool, error) {
	var paused bool
	err := s.stmts(ctx, tx).queryRow(qPaused, destination).Scan(&paused)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, store.Unavailable("claim", err)
	}
	return paused, nil
}
