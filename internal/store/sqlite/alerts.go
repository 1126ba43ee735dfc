package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// alertTx is a write transaction as sqlstore's outbox logic uses it.
type alertTx struct {
	ctx context.Context
	tx  *sql.Tx
}

func (t alertTx) Query(q string, args []any, row func(sqlstore.Scanner) error) error {
	rows, err := t.tx.QueryContext(t.ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	_, err = sqlstore.Collect(rows, func(sc sqlstore.Scanner) (struct{}, error) { return struct{}{}, row(sc) })
	return err
}

func (t alertTx) Exec(q string, args []any) (int64, error) {
	res, err := t.tx.ExecContext(t.ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// RaiseAlerts implements store.AlertOutbox.
func (s *Store) RaiseAlerts(ctx context.Context, as []store.RaisedAlert, channels []string, window time.Duration) error {
	if len(as) == 0 {
		return nil
	}
	return s.tx(ctx, "raise alerts", func(tx *sql.Tx) error {
		return store.Unavailable("raise alerts", sqlstore.RaiseAlerts(sqlstore.SQLite, alertTx{ctx, tx}, s.now(), as, channels, window))
	})
}

// FlushAlerts implements store.AlertOutbox.
func (s *Store) FlushAlerts(ctx context.Context, channels []string, window time.Duration) (int, error) {
	var n int
	err := s.tx(ctx, "flush alerts", func(tx *sql.Tx) error {
		var err error
		n, err = sqlstore.FlushAlerts(sqlstore.SQLite, alertTx{ctx, tx}, s.now(), channels, window)
		return store.Unavailable("flush alerts", err)
	})
	return n, err
}

// ClaimAlerts implements store.AlertOutbox.
func (s *Store) ClaimAlerts(ctx context.Context, channels []string, limit int, lease time.Duration) ([]store.AlertMessage, error) {
	if len(channels) == 0 || limit <= 0 {
		return nil, nil
	}
	var ms []store.AlertMessage
	err := s.tx(ctx, "claim alerts", func(tx *sql.Tx) error {
		q, args := sqlstore.ClaimAlerts(sqlstore.SQLite, s.now(), channels, limit, lease)
		var err error
		ms, err = query(ctx, tx, sqlstore.ScanAlert, q, args...)
		return store.Unavailable("claim alerts", err)
	})
	slices.SortFunc(ms, func(a, b store.AlertMessage) int { return cmp.Compare(a.ID, b.ID) })
	return ms, err
}

// FinishAlert implements store.AlertOutbox.
func (s *Store) FinishAlert(ctx context.Context, o store.AlertOutcome) (bool, error) {
	var held bool
	err := s.tx(ctx, "finish alert", func(tx *sql.Tx) error {
		q, args := sqlstore.FinishAlert(sqlstore.SQLite, s.now(), o)
		n, err := alertTx{ctx, tx}.Exec(q, args)
		held = n == 1
		return store.Unavailable("finish alert", err)
	})
	return held, err
}

// PruneAlerts implements store.AlertOutbox.
func (s *Store) PruneAlerts(ctx context.Context, giveUp, keep time.Duration) ([]store.AlertMessage, error) {
	var gaveUp []store.AlertMessage
	err := s.tx(ctx, "prune alerts", func(tx *sql.Tx) error {
		now := s.now()
		q, args := sqlstore.GiveUpAlerts(sqlstore.SQLite, now, giveUp)
		var err error
		if gaveUp, err = query(ctx, tx, sqlstore.ScanAlert, q, args...); err != nil {
			return store.Unavailable("prune alerts", err)
		}
		q, args = sqlstore.DeleteAlerts(sqlstore.SQLite, now, keep)
		_, err = tx.ExecContext(ctx, q, args...)
		return store.Unavailable("prune alerts", err)
	})
	return gaveUp, err
}
