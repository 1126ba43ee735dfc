package postgres

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// alertTx is a transaction as sqlstore's outbox logic uses it.
type alertTx struct {
	ctx context.Context
	tx  pgx.Tx
}

func (t alertTx) Query(q string, args []any, row func(sqlstore.Scanner) error) error {
	rows, err := t.tx.Query(t.ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	_, err = sqlstore.Collect(rows, func(sc sqlstore.Scanner) (struct{}, error) { return struct{}{}, row(sc) })
	return err
}

func (t alertTx) Exec(q string, args []any) (int64, error) {
	tag, err := t.tx.Exec(t.ctx, q, args...)
	return tag.RowsAffected(), err
}

// RaiseAlerts implements store.AlertOutbox: each fold's row is locked by
// the upsert that reads it, in (fold, destination) order, so that raises
// of several processes queue each window's first message once.
func (s *Store) RaiseAlerts(ctx context.Context, as []store.RaisedAlert, channels []string, window time.Duration) error {
	if len(as) == 0 {
		return nil
	}
	return s.tx(ctx, "raise alerts", func(tx pgx.Tx) error {
		return store.Unavailable("raise alerts", sqlstore.RaiseAlerts(sqlstore.Postgres, alertTx{ctx, tx}, time.Time{}, as, channels, window))
	})
}

// FlushAlerts implements store.AlertOutbox.
func (s *Store) FlushAlerts(ctx context.Context, channels []string, window time.Duration) (int, error) {
	var n int
	err := s.tx(ctx, "flush alerts", func(tx pgx.Tx) error {
		var err error
		n, err = sqlstore.FlushAlerts(sqlstore.Postgres, alertTx{ctx, tx}, time.Time{}, channels, window)
		return store.Unavailable("flush alerts", err)
	})
	return n, err
}

// ClaimAlerts implements store.AlertOutbox: one statement, whose rows are
// locked SKIP LOCKED, as deliveries are claimed.
func (s *Store) ClaimAlerts(ctx context.Context, channels []string, limit int, lease time.Duration) ([]store.AlertMessage, error) {
	if len(channels) == 0 || limit <= 0 {
		return nil, nil
	}
	q, args := sqlstore.ClaimAlerts(sqlstore.Postgres, time.Time{}, channels, limit, lease)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, store.Unavailable("claim alerts", err)
	}
	ms, err := collect(rows, sqlstore.ScanAlert)
	if err != nil {
		return nil, store.Unavailable("claim alerts", err)
	}
	slices.SortFunc(ms, func(a, b store.AlertMessage) int { return cmp.Compare(a.ID, b.ID) })
	return ms, nil
}

// FinishAlert implements store.AlertOutbox.
func (s *Store) FinishAlert(ctx context.Context, o store.AlertOutcome) (bool, error) {
	q, args := sqlstore.FinishAlert(sqlstore.Postgres, time.Time{}, o)
	tag, err := s.pool.Exec(ctx, q, args...)
	if err != nil {
		return false, store.Unavailable("finish alert", err)
	}
	return tag.RowsAffected() == 1, nil
}

// PruneAlerts implements store.AlertOutbox.
func (s *Store) PruneAlerts(ctx context.Context, giveUp, keep time.Duration) ([]store.AlertMessage, error) {
	q, args := sqlstore.GiveUpAlerts(sqlstore.Postgres, time.Time{}, giveUp)
	rows, err := s.pool.Query(ctx, q, args...)
	if err != nil {
		return nil, store.Unavailable("prune alerts", err)
	}
	gaveUp, err := collect(rows, sqlstore.ScanAlert)
	if err != nil {
		return nil, store.Unavailable("prune alerts", err)
	}
	q, args = sqlstore.DeleteAlerts(sqlstore.Postgres, time.Time{}, keep)
	if _, err := s.pool.Exec(ctx, q, args...); err != nil {
		return gaveUp, store.Unavailable("prune alerts", err)
	}
	return gaveUp, nil
}
