// Package sqlite is the embedded store: one SQLite file in WAL mode with
// synchronous=FULL, so a commit is durable before ingest answers. All writes
// go through one connection (SQLite has one writer anyway); reads use a
// small pool of their own.
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	sqlitedriver "modernc.org/sqlite"
	sqlitelib "modernc.org/sqlite/lib"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// Options tune a Store.
type Options struct {
	// Now is the store's clock; default time.Now.
	Now func() time.Time
	// Elapsed is the monotonic clock leases are measured on: the time
	// since any fixed start. Default: since Open, by Go's monotonic
	// clock (time.Since), which a step of the wall clock does not move;
	// when Now is set, Now's time since Open (a test's clock).
	Elapsed func() time.Duration
	// NewID makes event and delivery ids; default store.NewID.
	NewID func() string
	// Driver is the database/sql driver name; default "sqlite"
	// (modernc.org/sqlite). A test registers a wrapper of that driver
	// under another name to count the statements the store runs.
	Driver string
	// Logger is told of the migrations Open applies; nil: nothing.
	Logger *slog.Logger
	// NoUpgrade refuses a database whose schema lacks migrations this
	// binary has (sqlstore.ErrUpgradeRefused), rather than apply them,
	// and a path without one (sqlstore.ErrNoStore), rather than create
	// it: for a command that only reads, which must not upgrade a store
	// for good under the older gateway that serves it, nor report on an
	// empty store it made at a mistyped path.
	NoUpgrade bool
}

// Store is the SQLite backend of store.Store.
type Store struct {
	w     *sql.DB // one connection: the single writer
	r     *sql.DB // readers
	now   func() time.Time
	newID func() string
	// The lease clock (leaseNow): Now at Open, moved on by Elapsed.
	anchor   time.Time
	elapsed  func() time.Duration
	elapsed0 time.Duration
	// prepared holds the hot write statements, prepared once on the
	// writer connection at Open (read-only afterwards); a transaction
	// borrows them with Tx.StmtContext instead of parsing SQL each time.
	prepared map[string]*sql.Stmt
	gate     writeGate  // the write transactions' turns, ingest first
	rides    rides      // outcomes waiting for the writer (rides.go)
	wal      *walCopier // nil for an in-memory database
	log      *slog.Logger
	// noUpgrade: Options.NoUpgrade, for migrate.
	noUpgrade bool
	// fewRows: a filter selecting fewer rows than this is answered by
	// reading them and sorting (defaultFewRows; tests move it).
	fewRows int
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database file at path and applies
// pending migrations. A new file is created with mode 0600 whatever the
// umask, and SQLite gives its -wal and -shm files the database file's
// mode: the store holds every webhook body.
func Open(ctx context.Context, path string, opt Options) (*Store, error) {
	if opt.NoUpgrade && path != ":memory:" && !strings.HasPrefix(path, "file:") {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("open %s: %w", path, sqlstore.ErrNoStore)
		}
	}
	if err := createPrivate(path); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	q := url.Values{}
	// synchronous=FULL stays: a commit is durable before ingest answers.
	// A bigger page cache, mmap_size and a rarer wal_autocheckpoint were
	// measured (anyhook bench, BENCHMARKS.md) and bought no CPU or
	// throughput here, only resident memory, so only temp_store is set.
	// wal_autocheckpoint is raised: the WAL is copied in the background
	// (walcopy.go), not in the commit that crossed 1,000 pages.
	for _, p := range []string{"journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(10000)", "foreign_keys(1)", "temp_store(MEMORY)",
		fmt.Sprintf("wal_autocheckpoint(%d)", autoCopyPages)} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	dsn := "file:" + path + "?" + q.Encode()
	driverName := cmp.Or(opt.Driver, "sqlite")
	w, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetConnMaxIdleTime(0)
	var r *sql.DB
	if path == ":memory:" {
		// An in-memory database lives in its connection: every other
		// connection would open an empty one of its own. Reads share the
		// writer's one connection, which is kept open for good.
		w.SetMaxIdleConns(1)
		w.SetConnMaxLifetime(0)
		r = w
	} else {
		if r, err = sql.Open(driverName, dsn); err != nil {
			w.Close()
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		r.SetMaxOpenConns(4)
	}
	s := &Store{w: w, r: r, now: opt.Now, newID: opt.NewID, fewRows: defaultFewRows, log: opt.Logger, noUpgrade: opt.NoUpgrade}
	if s.now == nil {
		s.now = time.Now
	} else if opt.Elapsed == nil {
		opt.Elapsed = func() time.Duration { return s.now().Sub(s.anchor) }
	}
	if s.newID == nil {
		s.newID = store.NewID
	}
	s.startLeaseClock(opt.Elapsed)
	if err := s.connect(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := s.restartLeases(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := s.prepare(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if s.r != s.w {
		s.startWALCopier()
	}
	return s, nil
}

// connect opens the writer's connection, which switches a new file to
// WAL. Processes opening a new file at once race for that switch, and
// SQLite answers the losers SQLITE_BUSY at once, without waiting on the
// busy handler (two connections upgrading read locks would deadlock), so
// connect tries again, as the busy timeout would, for up to 10 s.
func (s *Store) connect(ctx context.Context) error {
	deadline := time.Now().Add(10 * time.Second)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		err := s.w.PingContext(ctx)
		var e *sqlitedriver.Error
		if err == nil || !errors.As(err, &e) || e.Code()&0xff != sqlitelib.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
}

// The hot write statements, prepared at Open.
const (
	qSavepoint    = `SAVEPOINT item`
	qRollbackTo   = `ROLLBACK TO item`
	qRelease      = `RELEASE item`
	qCountDup     = `UPDATE events SET duplicates = duplicates + 1 WHERE source = ? AND dedup_key = ? RETURNING id, duplicates`
	qCountContent = `UPDATE events SET duplicates = duplicates + 1 WHERE source = ? AND content_key = ? RETURNING id, duplicates`
	// A backfilled copy of a recorded event is not an arrival (the
	// provider did not send it again): found, not counted.
	qFindDup       = `SELECT id, 0 FROM events WHERE source = ? AND dedup_key = ?`
	qFindContent   = `SELECT id, 0 FROM events WHERE source = ? AND content_key = ?`
	qVersion       = `SELECT version FROM versions WHERE source = ? AND object = ?`
	qInsertVersion = `INSERT INTO versions (source, object, version) VALUES (?, ?, ?)`
	qRaiseVersion  = `UPDATE versions SET version = ? WHERE source = ? AND object = ?`
	// A new event is inserted not stale (qMarkStale marks it after the
	// version check); a uniqueness conflict inserts nothing: a duplicate.
	qInsertEvent = `INSERT INTO events (id, source, dedup_key, received_at, method, path, headers, body, object, version, stale, content_key,
		remote_addr, verify_method, verify_scheme, verify_secret, type, not_routed, origin)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING`
	qMarkStale = `UPDATE events SET stale = 1 WHERE id = ?`
	qPaused    = `SELECT paused OR breaker_at IS NOT NULL FROM destinations WHERE name = ?`
	// Ingest's, the sequencer's and Finish's, each in multiRows.
	qInsertDelivery    = `INSERT INTO deliveries (id, event_id, source, type, destination, status, stale, next_attempt_at, created_at, updated_at, attempt_count, lease_until, claimed_at) VALUES `
	qInsertLedgerEntry = `INSERT INTO ledger_entries (idx, event_id, header_hash, body_hash, leaf_hash, sequenced_at, late) VALUES `
	qInsertLedgerHash  = `INSERT INTO ledger_hashes (idx, hash) VALUES `
	// qFinish writes outcomes fenced by (delivery, attempt, delivering) and
	// returns the deliveries it wrote; its rows are (id, status,
	// next_attempt_at, attempt), named column1… by SQLite. The unary + keeps
	// the planner off the status indexes: each row of v is looked up by id
	// (with no statistics it would scan every delivering row per batch).
	qFinish = `UPDATE deliveries SET status = v.column2, next_attempt_at = v.column3, lease_until = NULL, updated_at = ?
		FROM (VALUES `
	qFinishTail = `) AS v
		WHERE deliveries.id = v.column1 AND deliveries.attempt_count = v.column4 AND +deliveries.status = 'delivering'
		RETURNING deliveries.id`
	qInsertAttempt     = `INSERT INTO attempts (delivery_id, number, started_at, duration_us, status_code, error, response_body, outcome) VALUES `
	qInsertAttemptTail = ` ON CONFLICT (delivery_id, number) DO NOTHING`
)

var (
	deliveryInserts = multiRows(qInsertDelivery, `(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, "")
	entryInserts    = multiRows(qInsertLedgerEntry, `(?, ?, ?, ?, ?, ?, ?)`, "")
	hashInserts     = multiRows(qInsertLedgerHash, `(?, ?)`, "")
	finishes        = multiRows(qFinish, `(?, ?, ?, ?)`, qFinishTail)
	attemptInserts  = multiRows(qInsertAttempt, `(?, ?, ?, ?, ?, ?, ?, ?)`, qInsertAttemptTail)
)

// claimQuery's LIMIT is ?+0, not ?: SQLite (built with STAT4) plans with
// a bare parameter's value there, so each new limit (a destination's free
// slots, which change from claim to claim) compiled the kept statement
// again: a claim that found nothing took 242 µs against 111
// (BenchmarkClaimLimits).
var claimQuery = `UPDATE deliveries
			SET status = 'delivering', attempt_count = attempt_count + 1, lease_until = ?, updated_at = ?, claimed_at = ?
			WHERE id IN (SELECT id FROM deliveries WHERE destination = ? AND status = 'pending' AND next_attempt_at <= ?
				ORDER BY next_attempt_at LIMIT ?+0)
			RETURNING ` + deliveryCols

func (s *Store) prepare(ctx context.Context) error {
	s.prepared = map[string]*sql.Stmt{}
	qs := []string{qSavepoint, qRollbackTo, qRelease, qCountDup, qCountContent, qFindDup, qFindContent, qVersion, qInsertVersion, qRaiseVersion,
		qInsertEvent, qMarkStale, qPaused, claimQuery, qInsertArrival}
	for _, m := range []*multiRow{&deliveryInserts, &entryInserts, &hashInserts, &finishes, &attemptInserts} {
		qs = append(qs, m[:]...)
	}
	for _, q := range qs {
		st, err := s.w.PrepareContext(ctx, q)
		if err != nil {
			return store.Unavailable("prepare", fmt.Errorf("prepare %q: %w", q, err))
		}
		s.prepared[q] = st
	}
	return nil
}

// stmts lends one transaction the statements prepared at Open, each
// borrowed once per transaction.
type stmts struct {
	s   *Store
	tx  *sql.Tx
	ctx context.Context
	m   map[string]*sql.Stmt
}

func (s *Store) stmts(ctx context.Context, tx *sql.Tx) *stmts {
	return &stmts{s: s, tx: tx, ctx: ctx}
}

func (t *stmts) get(q string) *sql.Stmt {
	if st, ok := t.m[q]; ok {
		return st
	}
	if t.m == nil {
		t.m = make(map[string]*sql.Stmt, 8)
	}
	st := t.tx.StmtContext(t.ctx, t.s.prepared[q])
	t.m[q] = st
	return st
}

func (t *stmts) exec(q string, args ...any) (sql.Result, error) {
	return t.get(q).ExecContext(t.ctx, args...)
}

func (t *stmts) queryRow(q string, args ...any) *sql.Row {
	return t.get(q).QueryRowContext(t.ctx, args...)
}

// Close closes the database.
func (s *Store) Close() error {
	s.wal.close()
	var errs []error
	for _, st := range s.prepared {
		errs = append(errs, st.Close())
	}
	errs = append(errs, s.w.Close())
	if s.r != s.w {
		errs = append(errs, s.r.Close())
	}
	return errors.Join(errs...)
}

// tx runs fn in a write transaction (BEGIN IMMEDIATE) and commits it.
// Errors of fn are returned as they are; failing to begin or commit is
// unavailability.
//
// An ingest transaction also takes along the outcomes that wait for the
// writer (rides.go); fn must bear running twice, as it then may. At a low
// rate every event would otherwise pay for two transactions of its own,
// its ingest and its outcome.
func (s *Store) tx(ctx context.Context, op string, fn func(*sql.Tx) error) error {
	if err := s.gate.enter(ctx, op == opIngest); err != nil {
		return store.Unavailable(op, err)
	}
	defer s.gate.leave()
	if op != opIngest {
		return s.txHeld(ctx, op, fn)
	}
	var rode *rideResult
	settled := false
	defer func() {
		if !settled { // a panic: what rode is queued again, under the gate
			s.rides.settle(rode, errRideFailed)
		}
	}()
	err := s.txHeld(ctx, op, func(tx *sql.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		var err error
		rode, err = s.rideAlong(ctx, tx)
		return err
	})
	// Under the gate still: a Finish that gets the next turn finds its
	// outcomes answered or queued again, never in between.
	s.rides.settle(rode, err)
	settled = true
	if errors.Is(err, errRideFailed) {
		return s.txHeld(ctx, op, fn) // fn runs again, without them
	}
	return err
}

// txHeld is tx for a caller that holds the writer's turn.
func (s *Store) txHeld(ctx context.Context, op string, fn func(*sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return store.Unavailable(op, err)
	}
	return s.commit(op, tx, fn)
}

// opIngest names ingest's transactions, which go first (writeGate).
const opIngest = "ingest"

// txUnsyncedHeld is txHeld for a transaction whose commit need not wait
// for fsync (Finish says why that is safe for outcomes): the writer
// connection runs it with synchronous=NORMAL and is set back to FULL at
// once, or dropped from the pool if that fails, so that no other
// transaction ever commits unsynced. (synchronous cannot change inside a
// transaction.) An in-memory database has nothing to sync.
func (s *Store) txUnsyncedHeld(ctx context.Context, op string, fn func(*sql.Tx) error) error {
	if s.r == s.w {
		return s.txHeld(ctx, op, fn)
	}
	c, err := s.w.Conn(ctx)
	if err != nil {
		return store.Unavailable(op, err)
	}
	defer c.Close()
	// Set back whatever the PRAGMA below reports: it can take effect and
	// still fail (ctx ends just as it finishes, and the driver answers
	// ctx.Err()), and the connection must not go back to the pool unsynced.
	defer func() {
		if _, err := c.ExecContext(context.WithoutCancel(ctx), `PRAGMA synchronous = FULL`); err != nil {
			c.Raw(func(any) error { return driver.ErrBadConn }) // the pool closes it
		}
	}()
	if _, err := c.ExecContext(ctx, `PRAGMA synchronous = NORMAL`); err != nil {
		return store.Unavailable(op, err)
	}
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return store.Unavailable(op, err)
	}
	return s.commit(op, tx, fn)
}

// commit runs fn in tx and commits it. Should fn panic, tx is rolled back
// on the way out: txUnsyncedHeld's restore of the sync level (which cannot
// run inside a transaction) then succeeds, rather than dropping the
// connection, which would wait for tx's context to end first.
func (s *Store) commit(op string, tx *sql.Tx, fn func(*sql.Tx) error) error {
	ended := false
	defer func() {
		if !ended {
			tx.Rollback()
		}
	}()
	err := fn(tx)
	ended = true
	if err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return store.Unavailable(op, err)
	}
	s.wal.committed()
	return nil
}

// Ping checks that the database answers with its schema: a query that
// touches no table (SELECT 1) answers even from a database that has lost
// its tables or is not this store's.
func (s *Store) Ping(ctx context.Context) error {
	return sqlstore.CheckSchema(s.r.QueryRowContext(ctx, sqlstore.SchemaVersionQuery))
}

// The column lists and scan helpers are sqlstore's, shared with
// PostgreSQL.
var (
	deliveryCols = sqlstore.DeliveryColumns("deliveries.")
	eventCols    = sqlstore.EventColumns("")
)

type scanner = sqlstore.Scanner

// querier is *sql.DB or *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// query runs q on db and scans every row with scan.
func query[T any](ctx context.Context, db querier, scan func(scanner) (T, error), q string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return sqlstore.Collect(rows, scan)
}

// scanPrunedEvent scans the event columns and prunedCol.
func scanPrunedEvent(sc scanner) (anyhook.Event, error) {
	var ev anyhook.Event
	dest, done := sqlstore.EventDest(&ev)
	if err := sc.Scan(append(dest, &ev.BodyPruned)...); err != nil {
		return ev, err
	}
	return ev, done()
}

// prunedCol is whether the body of the event in the query's events row
// was pruned by retention.
const prunedCol = `coalesce((SELECT l.body_pruned FROM ledger_entries l WHERE l.event_id = events.id), 0)`

func micros(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

// nullMicros is t for a nullable time column: NULL when zero.
func nullMicros(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixMicro()
}

func fromMicros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us).UTC()
}
