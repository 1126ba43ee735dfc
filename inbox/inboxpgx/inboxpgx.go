// Package inboxpgx adapts pgx v5 (a *pgxpool.Pool, or anything with the same
// Begin/Exec/QueryRow methods) to package inbox. User callbacks receive
// pgx.Tx. Programs on database/sql use package inboxsql instead and do not
// link pgx through inbox.
package inboxpgx

import (
	"context"
	"errors"

	"github.com/anyhook/anyhook/inbox/inboxdriver"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// DB is what the adapter needs from pgx: *pgxpool.Pool satisfies it, and so
// does *pgx.Conn for single-goroutine programs.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Driver is the pgx adapter.
type Driver struct{ db DB }

// New returns a driver over db.
func New(db DB) *Driver { return &Driver{db: db} }

var _ inboxdriver.Driver[pgx.Tx] = (*Driver)(nil)

// Dialect implements inboxdriver.Driver; pgx always speaks PostgreSQL.
func (d *Driver) Dialect() inboxdriver.Dialect { return inboxdriver.Postgres }

// Exec implements inboxdriver.Executor.
func (d *Driver) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := d.db.Exec(ctx, query, args...)
	return tag.RowsAffected(), err
}

// QueryRow implements inboxdriver.Executor.
func (d *Driver) QueryRow(ctx context.Context, query string, args ...any) inboxdriver.Row {
	return row{d.db.QueryRow(ctx, query, args...)}
}

// Begin implements inboxdriver.Driver.
func (d *Driver) Begin(ctx context.Context) (inboxdriver.Tx[pgx.Tx], error) {
	tx, err := d.db.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return txn{tx}, nil
}

// WrapTx implements inboxdriver.Driver.
func (d *Driver) WrapTx(tx pgx.Tx) inboxdriver.Executor { return txn{tx} }

type row struct{ r pgx.Row }

func (r row) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, pgx.ErrNoRows) {
		return inboxdriver.ErrNoRows
	}
	return err
}

type txn struct{ tx pgx.Tx }

func (t txn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := t.tx.Exec(ctx, query, args...)
	return tag.RowsAffected(), err
}

func (t txn) QueryRow(ctx context.Context, query string, args ...any) inboxdriver.Row {
	return row{t.tx.QueryRow(ctx, query, args...)}
}

func (t txn) Commit(ctx context.Context) error   { return t.tx.Commit(ctx) }
func (t txn) Rollback(ctx context.Context) error { return t.tx.Rollback(ctx) }
func (t txn) Unwrap() pgx.Tx                     { return t.tx }
