package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/anyhook/anyhook/internal/store"
)

// TripBreaker implements store.Breakers.
func (s *Store) TripBreaker(ctx context.Context, destination string, at time.Time, reason string, firstProbe time.Time) (bool, error) {
	var tripped bool
	err := s.tx(ctx, "trip breaker", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO destinations (name, breaker_at, breaker_reason, probe_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET breaker_at = excluded.breaker_at, breaker_reason = excluded.breaker_reason, probe_at = excluded.probe_at
			WHERE destinations.breaker_at IS NULL`, destination, micros(at), reason, micros(firstProbe))
		if err != nil {
			return store.Unavailable("trip breaker", err)
		}
		n, err := res.RowsAffected()
		tripped = n > 0
		return store.Unavailable("trip breaker", err)
	})
	return tripped, err
}

// ResetBreaker implements store.Breakers.
func (s *Store) ResetBreaker(ctx context.Context, destination string) (bool, error) {
	var reset bool
	err := s.tx(ctx, "reset breaker", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `UPDATE destinations SET breaker_at = NULL, breaker_reason = '', probe_at = NULL
			WHERE name = ? AND breaker_at IS NOT NULL`, destination)
		if err != nil {
			return store.Unavailable("reset breaker", err)
		}
		n, err := res.RowsAffected()
		reset = n > 0
		return store.Unavailable("reset breaker", err)
	})
	return reset, err
}

// Breakers implements store.Breakers.
func (s *Store) Breakers(ctx context.Context) (map[string]store.Breaker, error) {
	bs, err := query(ctx, s.r, func(sc scanner) (store.Breaker, error) {
		var b store.Breaker
		var at, probe int64
		err := sc.Scan(&b.Destination, &at, &b.Reason, &probe)
		b.TrippedAt, b.NextProbe = fromMicros(at), fromMicros(probe)
		return b, err
	}, `SELECT name, breaker_at, breaker_reason, coalesce(probe_at, 0) FROM destinations WHERE breaker_at IS NOT NULL`)
	if err != nil {
		return nil, store.Unavailable("breakers", err)
	}
	m := make(map[string]store.Breaker, len(bs))
	for _, b := range bs {
		m[b.Destination] = b
	}
	return m, nil
}

// ClaimProbe implements store.Breakers. The read of the breaker comes
// first, outside a write transaction: a destination whose breaker is not
// tripped (every poll of an auto_pause destination asks) costs a read.
func (s *Store) ClaimProbe(ctx context.Context, destination string, inOrder bool, at time.Time, every, lease time.Duration) ([]store.Claim, bool, error) {
	b, err := s.breaker(ctx, s.r, destination)
	if err != nil || !b.tripped || b.paused || b.probeAt > micros(at) {
		return nil, b.tripped, err
	}
	var claims []store.Claim
	tripped := true
	err = s.tx(ctx, "probe", func(tx *sql.Tx) error {
		claims = nil
		b, err := s.breaker(ctx, tx, destination) // as of this transaction: one prober per turn
		tripped = b.tripped
		if err != nil || !b.tripped || b.paused || b.probeAt > micros(at) {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE destinations SET probe_at = ? WHERE name = ?`, micros(at.Add(every)), destination); err != nil {
			return store.Unavailable("probe", err)
		}
		if inOrder {
			claims, err = s.claimInOrderTx(ctx, tx, destination, 1, lease)
		} else {
			claims, err = s.claimTx(ctx, tx, destination, 1, lease)
		}
		if err != nil || len(claims) == 0 {
			return err
		}
		c := &claims[0]
		if _, err := tx.ExecContext(ctx, `UPDATE deliveries SET probes = probes + 1 WHERE id = ?`, c.Delivery.ID); err != nil {
			return store.Unavailable("probe", err)
		}
		c.Delivery.Probes++
		c.Probe = true
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	return claims, tripped, nil
}

// breakerRow is what a probe reads of a destination.
type breakerRow struct {
	tripped, paused bool
	probeAt         int64
}

// breaker reads destination's breaker from db.
func (s *Store) breaker(ctx context.Context, db querier, destination string) (breakerRow, error) {
	rows, err := query(ctx, db, func(sc scanner) (breakerRow, error) {
		var b breakerRow
		err := sc.Scan(&b.tripped, &b.paused, &b.probeAt)
		return b, err
	}, `SELECT breaker_at IS NOT NULL, paused, coalesce(probe_at, 0) FROM destinations WHERE name = ?`, destination)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return breakerRow{}, store.Unavailable("probe", err)
	}
	if len(rows) == 0 {
		return breakerRow{}, nil
	}
	return rows[0], nil
}
