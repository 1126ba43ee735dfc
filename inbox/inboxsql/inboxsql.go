// Package inboxsql adapts a database/sql handle to package inbox, for SQLite
// (modernc.org/sqlite, driver name "sqlite") and PostgreSQL (pgx's stdlib
// driver, name "pgx"). It imports no database driver itself: register the
// one you use with a blank import in your main package.
//
//	db, _ := sql.Open("sqlite", "file:app.db?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
//	db.SetMaxOpenConns(8)
//	db.SetMaxIdleConns(8)
//	ib, _ := inbox.New(inboxsql.New(db, inboxsql.SQLite), inbox.Config{})
//
// The dialect must match the database; inbox.Inbox.Migrate checks it.
//
// For SQLite use WAL mode and a busy timeout; inbox takes the write lock with
// its first statement in every transaction, so writers queue for as long as
// busy_timeout says instead of failing. inbox never changes busy_timeout.
//
// Bound the pool: database/sql's default opens one connection per
// concurrent request and keeps only 2 idle. docs/inbox.md ("Pool sizing")
// has measurements.
package inboxsql

import (
	"context"
	"database/sql"
	"errors"

	"github.com/anyhook/anyhook/inbox/inboxdriver"
)

// The dialects a *sql.DB can speak.
const (
	SQLite   = inboxdriver.SQLite
	Postgres = inboxdriver.Postgres
)

// Driver is the database/sql adapter. User callbacks receive *sql.Tx.
type Driver struct {
	db      *sql.DB
	dialect inboxdriver.Dialect
}

// New returns a driver over db speaking the given dialect.
func New(db *sql.DB, dialect inboxdriver.Dialect) *Driver {
	return &Driver{db: db, dialect: dialect}
}

var _ inboxdriver.Driver[*sql.Tx] = (*Driver)(nil)

// Dialect implements inboxdriver.Driver.
func (d *Driver) Dialect() inboxdriver.Dialect { return d.dialect }

// Exec implements inboxdriver.Executor.
func (d *Driver) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return exec(ctx, d.db, query, args)
}

// QueryRow implements inboxdriver.Executor.
func (d *Driver) QueryRow(ctx context.Context, query string, args ...any) inboxdriver.Row {
	return row{d.db.QueryRowContext(ctx, query, args...)}
}

// Begin implements inboxdriver.Driver.
func (d *Driver) Begin(ctx context.Context) (inboxdriver.Tx[*sql.Tx], error) {
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return txn{tx}, nil
}

// WrapTx implements inboxdriver.Driver.
func (d *Driver) WrapTx(tx *sql.Tx) inboxdriver.Executor { return txn{tx} }

type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func exec(ctx context.Context, e execer, query string, args []any) (int64, error) {
	res, err := e.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

type row struct{ r *sql.Row }

func (r row) Scan(dest ...any) error {
	err := r.r.Scan(dest...)
	if errors.Is(err, sql.ErrNoRows) {
		return inboxdriver.ErrNoRows
	}
	return err
}

type txn struct{ tx *sql.Tx }

func (t txn) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	return exec(ctx, t.tx, query, args)
}

func (t txn) QueryRow(ctx context.Context, query string, args ...any) inboxdriver.Row {
	return row{t.tx.QueryRowContext(ctx, query, args...)}
}

func (t txn) Commit(context.Context) error   { return t.tx.Commit() }
func (t txn) Rollback(context.Context) error { return t.tx.Rollback() }
func (t txn) Unwrap() *sql.Tx                { return t.tx }
