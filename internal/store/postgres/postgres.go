// Package postgres is the scale-out store: any number of gateway processes
// share one PostgreSQL database through a pgx connection pool.
//
// Everything the store decides by time (leases, due retries, creation and
// update times) is judged by the database clock, now(), so processes with
// skewed clocks still agree; callers pass durations only. Claims use
// FOR UPDATE SKIP LOCKED, so workers of many processes share a destination's
// queue without blocking each other, and an attempt's outcome is fenced by
// (delivery, attempt number, status delivering). Deduplication rests on a
// unique index, so concurrent identical requests in any number of processes
// yield one event. See the "PostgreSQL backend" section of docs/design.md.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// Options tune a Store.
type Options struct {
	// MaxConns caps the connection pool of this process. Default: the DSN's
	// pool_max_conns if set, else pgxpool's default (the larger of 4 and
	// the number of CPUs).
	MaxConns int32
	// NewID makes event and delivery ids; default store.NewID.
	NewID func() string
	// Tracer, when set, is told of every statement (pgx's tracing hook:
	// for tracing, and for tests that act at a chosen statement).
	Tracer pgx.QueryTracer
	// Logger is told of the migrations Open applies (nil: nothing) and
	// when the upgrade waits for a table's lock and tries again (nil:
	// slog.Default()).
	Logger *slog.Logger
	// NoUpgrade refuses a database whose schema lacks migrations this
	// binary has (sqlstore.ErrUpgradeRefused), rather than apply them,
	// and one without a schema (sqlstore.ErrNoStore), rather than create
	// it: for a command that only reads, which must not upgrade a store
	// for good under the older gateways that serve it, nor report on an
	// empty store it made in a mistyped database.
	NoUpgrade bool

	migrateLockTimeout time.Duration // default migrateLockTimeout; tests make it small
}

// defaultConnectTimeout applies when the DSN sets no connect_timeout.
const defaultConnectTimeout = 10 * time.Second

// Store is the PostgreSQL backend of store.Store.
type Store struct {
	pool  *pgxpool.Pool
	newID func() string
	// sweepChunk is how many event ids one round of the log's sweep
	// reads (Sequence); default sweepChunk. Tests make it small.
	sweepChunk int
	// statementBytes caps the bodies and headers one ingest statement
	// carries (insertEvents); default statementBytes. Tests make it small.
	statementBytes int
	// fewShown overrides defaultFewShown when not 0 (-1: never few).
	// Tests set it.
	fewShown           int
	migrateLockTimeout time.Duration // Options.migrateLockTimeout
	log                *slog.Logger
	migrateLog         *slog.Logger // the migrations applied at Open: Options.Logger, nil for none
	noUpgrade          bool         // Options.NoUpgrade
}

var _ store.Store = (*Store)(nil)

// sessionDefaults are the settings of the store's connections unless the
// DSN sets them (BENCHMARKS.md, "Ten million events on both stores").
//   - jit: PostgreSQL compiles a query it estimates costly; on the lists'
//     rare filters at ten million events that took 8 to 104 ms a
//     request, more than the query itself.
//   - max_parallel_workers_per_gather: a list's page is a LIMIT over an
//     ordered index walk; in parallel (Gather Merge) every worker walked
//     its share until it had rows: retrying events until 17 days back at
//     ten million, 18,619 probes in 191 ms against 4,005 in 26 ms alone.
var sessionDefaults = map[string]string{"jit": "off", "max_parallel_workers_per_gather": "0"}

// Open connects to the database named by dsn (a postgres:// URL or a
// key=value string), checks that it answers and applies pending
// migrations. An unreachable database is an error wrapping
// anyhook.ErrUnavailable.
func Open(ctx context.Context, dsn string, opt Options) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		// pgconn redacts the password from its message.
		return nil, fmt.Errorf("postgres: %w: %w", anyhook.ErrInvalid, err)
	}
	if opt.MaxConns > 0 {
		cfg.MaxConns = opt.MaxConns
	}
	for k, v := range sessionDefaults {
		if _, set := cfg.ConnConfig.RuntimeParams[k]; !set {
			cfg.ConnConfig.RuntimeParams[k] = v
		}
	}
	if opt.Tracer != nil {
		cfg.ConnConfig.Tracer = opt.Tracer
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// An unreachable host fails the start (or the call) instead of
		// hanging on a silent network.
		cfg.ConnConfig.ConnectTimeout = defaultConnectTimeout
	}
	where := fmt.Sprintf("postgres %s:%d/%s", cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%s: %w", where, store.Unavailable("connect", err))
	}
	s := &Store{pool: pool, newID: opt.NewID, log: opt.Logger, migrateLog: opt.Logger, migrateLockTimeout: opt.migrateLockTimeout, noUpgrade: opt.NoUpgrade}
	if s.newID == nil {
		s.newID = store.NewID
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	// A store paused before SetPaused analyzed the table may have had
	// none since (analyzeDestinations).
	s.analyzeDestinations(ctx)
	return s, nil
}

// Close closes the pool; it waits for connections in use to be returned.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	return sqlstore.CheckSchema(s.pool.QueryRow(ctx, sqlstore.SchemaVersionQuery))
}

// tx runs fn in a transaction and commits it. Errors of fn are returned as
// they are; failing to begin or commit is unavailability.
func (s *Store) tx(ctx context.Context, op string, fn func(pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return store.Unavailable(op, err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback(ctx) // a failed rollback closes the connection, which rolls back too
		return err
	}
	return store.Unavailable(op, commit(ctx, tx))
}

// commitTimeout bounds a COMMIT that its caller can no longer cancel.
const commitTimeout = 10 * time.Second

// commit commits tx under a context that the caller's cancellation does not
// reach (bounded by commitTimeout). A COMMIT cancelled in flight may still
// land in the database while the caller is told it failed: a claim would
// then be held, and a rescue would change deliveries nobody is told of.
// Once the work is done, its commit is seen through, shutdown or not.
func commit(ctx context.Context, tx pgx.Tx) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), commitTimeout)
	defer cancel()
	return tx.Commit(ctx)
}

// itemLevel reports whether err is the server refusing one statement (a
// constraint, bad data, a deadlock) rather than the connection or the
// server failing; after it the transaction can go on past a savepoint.
func itemLevel(err error) bool {
	if errors.Is(err, pgx.ErrNoRows) {
		return true // a row this item needed was not there
	}
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || len(pe.Code) < 2 {
		return false
	}
	switch pe.Code[:2] {
	case "08", // connection exception
		"53", // insufficient resources
		"57", // operator intervention: shutdown, cancel, statement timeout
		"58", // system error
		"XX": // internal error
		return false
	}
	return true
}

// sqlState returns the SQLSTATE of err, or "".
func sqlState(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// The column lists and scan helpers are sqlstore's, shared with SQLite.
var (
	deliveryCols = sqlstore.DeliveryColumns("deliveries.")
	eventCols    = sqlstore.EventColumns("")
)

type scanner = sqlstore.Scanner

// collect scans every row with scan and closes rows.
func collect[T any](rows pgx.Rows, scan func(scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	return sqlstore.Collect(rows, scan)
}

// micros is a duration as the bigint the queries multiply by
// interval '1 microsecond'.
func micros(d time.Duration) int64 { return d.Microseconds() }
