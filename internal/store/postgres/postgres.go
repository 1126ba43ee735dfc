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
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
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
}

// defaultConnectTimeout applies when the DSN sets no connect_timeout.
const defaultConnectTimeout = 10 * time.Second

// Store is the PostgreSQL backend of store.Store.
type Store struct {
	pool  *pgxpool.Pool
	newID func() string
}

var _ store.Store = (*Store)(nil)

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
		return nil, fmt.Errorf("%s: %w", where, unavailable("connect", err))
	}
	s := &Store{pool: pool, newID: opt.NewID}
	if s.newID == nil {
		s.newID = store.NewID
	}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return s, nil
}

// Close closes the pool; it waits for connections in use to be returned.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	// A query on the schema, not only a round trip: a database that lost
	// its tables (or is not this store's) answers SELECT 1 too.
	var version int
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&version); err != nil {
		return unavailable("ping", err)
	}
	if version == 0 {
		return unavailable("ping", errors.New("the database has no schema"))
	}
	return nil
}

// tx runs fn in a transaction and commits it. Errors of fn are returned as
// they are; failing to begin or commit is unavailability.
func (s *Store) tx(ctx context.Context, op string, fn func(pgx.Tx) error) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return unavailable(op, err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback(ctx) // a failed rollback closes the connection, which rolls back too
		return err
	}
	return unavailable(op, commit(ctx, tx))
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

// unavailable marks an error of the database itself (not of one item) so
// ingest answers 503 and workers back off. nil stays nil.
func unavailable(op string, err error) error {
	if err == nil || errors.Is(err, anyhook.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%s: %w: %w", op, anyhook.ErrUnavailable, err)
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

// Column lists, each name prefixed by p ("deliveries." for the table
// itself), in the order scanDelivery and scanEvent read them. A delivery's
// status is the shown one (store.StatusExpr): paused for a pending
// delivery of a paused destination.
func deliveryColumns(p string) string { return deliveryColumnsWith(p, store.StatusExpr(p)) }

// storedDeliveryColumns is deliveryColumns with the status as stored: what
// the rescuer reports (pending = reclaimed, whether paused or not).
func storedDeliveryColumns(p string) string { return deliveryColumnsWith(p, p+"status") }

func deliveryColumnsWith(p, status string) string {
	r := strings.NewReplacer("$", p)
	return r.Replace(`$id, $event_id, $destination, `) + status +
		r.Replace(`, $replay, $stale, $attempt_count, $next_attempt_at, $lease_until, $claimed_at, $created_at, $updated_at, $note,
		$resolution, $resolved_at, $resolved_by, $resolution_reason, coalesce($replayed_by, '')`)
}

func eventColumns(p string) string {
	return strings.NewReplacer("$", p).Replace(`$id, $source, coalesce($dedup_key, ''), $received_at, $method, $path, $headers, $body, coalesce($object, ''), coalesce($version, ''), $stale, $duplicates, coalesce($type, '')`)
}

var (
	deliveryCols = deliveryColumns("deliveries.")
	eventCols    = eventColumns("")
)

type scanner interface{ Scan(...any) error }

// deliveryDest returns the scan destinations of a delivery, and a func to
// call after the scan to finish the conversion.
func deliveryDest(d *anyhook.Delivery) ([]any, func()) {
	var status string
	var lease, claimed, resolved pgtype.Timestamptz
	r := &d.Resolution
	dest := []any{&d.ID, &d.EventID, &d.Destination, &status, &d.Replay, &d.Stale, &d.AttemptCount, &d.NextAttemptAt, &lease,
		&claimed, &d.CreatedAt, &d.UpdatedAt, &d.Note, &r.Kind, &resolved, &r.By, &r.Reason, &r.ReplayedBy}
	return dest, func() {
		d.Status = anyhook.DeliveryStatus(status)
		d.LeaseUntil, d.ClaimedAt, r.At = time.Time{}, time.Time{}, time.Time{}
		if lease.Valid {
			d.LeaseUntil = lease.Time
		}
		if claimed.Valid {
			d.ClaimedAt = claimed.Time
		}
		if resolved.Valid {
			r.At = resolved.Time
		}
		d.NextAttemptAt, d.LeaseUntil, d.CreatedAt, d.UpdatedAt = utc(d.NextAttemptAt), utc(d.LeaseUntil), utc(d.CreatedAt), utc(d.UpdatedAt)
		d.ClaimedAt, r.At = utc(d.ClaimedAt), utc(r.At)
	}
}

func scanDelivery(sc scanner) (anyhook.Delivery, error) {
	var d anyhook.Delivery
	dest, done := deliveryDest(&d)
	if err := sc.Scan(dest...); err != nil {
		return d, err
	}
	done()
	return d, nil
}

// eventDest is deliveryDest for an event.
func eventDest(ev *anyhook.Event) ([]any, func() error) {
	var headers []byte
	dest := []any{&ev.ID, &ev.Source, &ev.DedupKey, &ev.ReceivedAt, &ev.Method, &ev.Path, &headers, &ev.Body, &ev.Object, &ev.Version, &ev.Stale, &ev.Duplicates, &ev.Type}
	return dest, func() error {
		ev.ReceivedAt = utc(ev.ReceivedAt)
		if ev.Body == nil {
			ev.Body = []byte{}
		}
		var err error
		ev.Header, err = store.DecodeHeader(headers)
		if err != nil {
			return fmt.Errorf("event %s: headers: %w", ev.ID, err)
		}
		return nil
	}
}

func scanEvent(sc scanner) (anyhook.Event, error) {
	var ev anyhook.Event
	dest, done := eventDest(&ev)
	if err := sc.Scan(dest...); err != nil {
		return ev, err
	}
	return ev, done()
}

// collect scans every row with scan.
func collect[T any](rows pgx.Rows, scan func(scanner) (T, error)) ([]T, error) {
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// micros is a duration as the bigint the queries multiply by
// interval '1 microsecond'.
func micros(d time.Duration) int64 { return d.Microseconds() }

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
