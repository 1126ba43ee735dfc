package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook/internal/store"
)

// TripBreaker implements store.Breakers.
func (s *Store) TripBreaker(ctx context.Context, destination string, at time.Time, reason string, firstProbe time.Time) (bool, error) {
	tag, err := s.pool.Exec(ctx, `INSERT INTO destinations (name, breaker_at, breaker_reason, probe_at) VALUES ($1, $2, $3, $4)
		ON CONFLICT (name) DO UPDATE SET breaker_at = excluded.breaker_at, breaker_reason = excluded.breaker_reason, probe_at = excluded.probe_at
		WHERE destinations.breaker_at IS NULL`, destination, at, reason, firstProbe)
	if err != nil {
		return false, store.Unavailable("trip breaker", err)
	}
	if tag.RowsAffected() > 0 {
		s.analyzeDestinations(ctx)
	}
	return tag.RowsAffected() > 0, nil
}

// ResetBreaker implements store.Breakers.
func (s *Store) ResetBreaker(ctx context.Context, destination string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `UPDATE destinations SET breaker_at = NULL, breaker_reason = '', probe_at = NULL
		WHERE name = $1 AND breaker_at IS NOT NULL`, destination)
	if err != nil {
		return false, store.Unavailable("reset breaker", err)
	}
	return tag.RowsAffected() > 0, nil
}

// Breakers implements store.Breakers.
func (s *Store) Breakers(ctx context.Context) (map[string]store.Breaker, error) {
	rows, err := s.pool.Query(ctx, `SELECT name, breaker_at, breaker_reason, probe_at FROM destinations WHERE breaker_at IS NOT NULL`)
	if err != nil {
		return nil, store.Unavailable("breakers", err)
	}
	bs, err := collect(rows, func(sc scanner) (store.Breaker, error) {
		var b store.Breaker
		var probe *time.Time
		err := sc.Scan(&b.Destination, &b.TrippedAt, &b.Reason, &probe)
		if probe != nil {
			b.NextProbe = probe.UTC()
		}
		b.TrippedAt = b.TrippedAt.UTC()
		return b, err
	})
	if err != nil {
		return nil, store.Unavailable("breakers", err)
	}
	m := make(map[string]store.Breaker, len(bs))
	for _, b := range bs {
		m[b.Destination] = b
	}
	return m, nil
}

// ClaimProbe implements store.Breakers. A plain read comes first: every
// poll of an auto_pause destination asks, and one whose breaker is not
// tripped (or whose probe is not due) costs no transaction. The probe
// itself locks the destination's row, so that of the processes that ask
// at once one probes and the others find the next probe moved on.
func (s *Store) ClaimProbe(ctx context.Context, destination string, inOrder bool, at time.Time, every, lease time.Duration) ([]store.Claim, bool, error) {
	const q = `SELECT breaker_at IS NOT NULL, paused, coalesce(probe_at <= $2, true) FROM destinations WHERE name = $1`
	var tripped, paused, due bool
	err := s.pool.QueryRow(ctx, q, destination, at).Scan(&tripped, &paused, &due)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, store.Unavailable("probe", err)
	}
	if !tripped || paused || !due {
		return nil, tripped, nil
	}
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, false, store.Unavailable("probe", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	err = tx.QueryRow(ctx, q+` FOR UPDATE`, destination, at).Scan(&tripped, &paused, &due)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, false, store.Unavailable("probe", err)
	}
	if !tripped || paused || !due {
		return nil, tripped, nil
	}
	if _, err := tx.Exec(ctx, `UPDATE destinations SET probe_at = $2 WHERE name = $1`, destination, at.Add(every)); err != nil {
		return nil, false, store.Unavailable("probe", err)
	}
	var claims []store.Claim
	if inOrder {
		claims, err = claimInOrderTx(ctx, tx, probeCandidates, destination, 1, lease)
	} else {
		claims, err = claimRows(ctx, tx, probeDeliveries, destination, 1, micros(lease))
	}
	if err != nil {
		return nil, false, err
	}
	for i := range claims {
		if _, err := tx.Exec(ctx, `UPDATE deliveries SET probes = probes + 1 WHERE id = $1`, claims[i].Delivery.ID); err != nil {
			return nil, false, store.Unavailable("probe", err)
		}
		claims[i].Delivery.Probes++
		claims[i].Probe = true
	}
	if err := commit(ctx, tx); err != nil {
		return nil, false, store.Unavailable("probe", err)
	}
	return claims, true, nil
}
