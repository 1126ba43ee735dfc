// Package inboxdriver is the small contract between package inbox and a
// database access library. Two implementations ship with AnyHook:
// inboxsql (database/sql, for SQLite and PostgreSQL) and inboxpgx (pgx v5
// natively). Users pick one and hand it to inbox.New; they never call these
// methods themselves.
//
// The package imports only the standard library, so that neither adapter
// drags the other's dependencies into a program.
package inboxdriver

import (
	"context"
	"errors"
)

// Dialect names the SQL dialect a driver speaks.
type Dialect int

// The supported dialects.
const (
	SQLite Dialect = iota + 1
	Postgres
)

func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "sqlite"
	case Postgres:
		return "postgres"
	}
	return "unknown"
}

// ErrNoRows is returned by Row.Scan when the query selected no row.
// Drivers translate their own "no rows" error into it.
var ErrNoRows = errors.New("inboxdriver: no rows")

// Row is the result of QueryRow.
type Row interface {
	// Scan copies the row's columns into dest; it returns ErrNoRows (possibly
	// wrapped) when there is no row.
	Scan(dest ...any) error
}

// Executor runs statements. Queries use PostgreSQL placeholders ($1, $2, …)
// for both dialects; package inbox rewrites them for SQLite before calling.
type Executor interface {
	// Exec runs a statement and reports the number of rows it affected.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// QueryRow runs a query expected to return at most one row.
	QueryRow(ctx context.Context, query string, args ...any) Row
}

// Tx is a transaction begun by a Driver. Unwrap returns the native
// transaction handed to user callbacks (*sql.Tx, pgx.Tx).
type Tx[TTx any] interface {
	Executor
	Commit(ctx context.Context) error
	Rollback(ctx context.Context) error
	Unwrap() TTx
}

// Driver connects package inbox to a database.
type Driver[TTx any] interface {
	// Executor runs statements outside any transaction (autocommit).
	Executor
	// Dialect reports the SQL dialect.
	Dialect() Dialect
	// Begin starts a transaction with the database's default isolation.
	Begin(ctx context.Context) (Tx[TTx], error)
	// WrapTx lets package inbox run statements inside a caller's own
	// transaction.
	WrapTx(tx TTx) Executor
}

// Class is the category of a database error that package inbox branches on.
type Class int

// Error classes.
const (
	// Other is any error inbox does not treat specially.
	Other Class = iota
	// Retryable errors (serialization failure, deadlock, stale SQLite
	// snapshot) succeed if the whole transaction is run again.
	Retryable
	// Busy errors mean a lock held by another transaction was not released
	// in time (PostgreSQL lock_timeout, SQLite SQLITE_BUSY/SQLITE_LOCKED).
	Busy
)

// Classify sorts err into a Class. It recognizes PostgreSQL errors by the
// SQLState() string method (pgconn.PgError has it) and SQLite errors by the
// Code() int method (modernc.org/sqlite's *Error has it), so it needs
// neither driver.
func Classify(err error) Class {
	if err == nil {
		return Other
	}
	var pg interface{ SQLState() string }
	if errors.As(err, &pg) {
		switch pg.SQLState() {
		case "40001", "40P01": // serialization_failure, deadlock_detected
			return Retryable
		case "55P03": // lock_not_available (lock_timeout)
			return Busy
		}
		return Other
	}
	var lite interface{ Code() int }
	if errors.As(err, &lite) {
		code := lite.Code()
		switch {
		case code == 517: // SQLITE_BUSY_SNAPSHOT: retry the transaction
			return Retryable
		case code&0xff == 5, code&0xff == 6: // SQLITE_BUSY, SQLITE_LOCKED
			return Busy
		}
	}
	return Other
}
