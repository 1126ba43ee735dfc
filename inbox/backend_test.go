package inbox_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook/inbox"
	"github.com/anyhook/anyhook/inbox/inboxdriver"
	"github.com/anyhook/anyhook/inbox/inboxpgx"
	"github.com/anyhook/anyhook/inbox/inboxsql"
	"github.com/anyhook/anyhook/inbox/inboxtest"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "modernc.org/sqlite"
)

// envDSN carries the database of a crash test's parent to its child.
const envDSN = "INBOX_TEST_DSN"

// envProvider carries the URL of a crash test's fake provider to its child.
const envProvider = "INBOX_TEST_PROVIDER"

// maxConns is the connection pool size of every backend.
const maxConns = 8

// backend is one (adapter, database) combination the suite runs on.
type backend[TTx any] struct {
	// newDSN creates a fresh empty database for t.
	newDSN func(t *testing.T) string
	// open connects to dsn.
	open func(t *testing.T, dsn string) inboxdriver.Driver[TTx]
}

var sqliteBackend = backend[*sql.Tx]{
	newDSN: func(t *testing.T) string {
		return "file:" + filepath.Join(t.TempDir(), "inbox.db") +
			"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(20000)&_pragma=synchronous(NORMAL)"
	},
	open: func(t *testing.T, dsn string) inboxdriver.Driver[*sql.Tx] {
		return inboxsql.New(openSQL(t, "sqlite", dsn), inboxsql.SQLite)
	},
}

var postgresSQLBackend = backend[*sql.Tx]{
	newDSN: pgDSN,
	open: func(t *testing.T, dsn string) inboxdriver.Driver[*sql.Tx] {
		return inboxsql.New(openSQL(t, "pgx", dsn), inboxsql.Postgres)
	},
}

var postgresPgxBackend = backend[pgx.Tx]{
	newDSN: pgDSN,
	open: func(t *testing.T, dsn string) inboxdriver.Driver[pgx.Tx] {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.MaxConns = maxConns
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(pool.Close)
		return inboxpgx.New(pool)
	},
}

func pgDSN(t *testing.T) string { return pgtest.DSN(t) }

func openSQL(t *testing.T, driver, dsn string) *sql.DB {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(maxConns)
	t.Cleanup(func() { db.Close() })
	return db
}

// suite holds the tests that run on every backend, one method a test (in
// apply_test.go, claim_test.go, stale_test.go, version_test.go and
// http_test.go). A method takes t and either e, a fresh migrated database,
// or b, to make its own databases. TestInbox runs each method as the
// subtest TestInbox/<Method>/<backend>.
type suite[TTx any] struct{}

// TestInbox runs every method of suite on every backend.
func TestInbox(t *testing.T) {
	t.Parallel()
	tests := reflect.TypeFor[suite[*sql.Tx]]()
	for i := range tests.NumMethod() {
		name := tests.Method(i).Name
		t.Run(name, func(t *testing.T) {
			run(t, func(t *testing.T, b backend[*sql.Tx]) { callTest(t, suite[*sql.Tx]{}, name, b) },
				func(t *testing.T, b backend[pgx.Tx]) { callTest(t, suite[pgx.Tx]{}, name, b) })
		})
	}
}

// callTest calls s's method name with t and, as its second parameter asks,
// b itself or a database set up on b.
func callTest[TTx any](t *testing.T, s suite[TTx], name string, b backend[TTx]) {
	m := reflect.ValueOf(s).MethodByName(name)
	arg := reflect.ValueOf(b)
	if m.Type().In(1) != arg.Type() {
		arg = reflect.ValueOf(setup(t, b))
	}
	m.Call([]reflect.Value{reflect.ValueOf(t), arg})
}

// run runs a generic test as parallel subtests on every backend:
// "sqlite" and "postgres-sql" (database/sql) and "postgres-pgx" (pgx).
func run(t *testing.T, onSQL func(*testing.T, backend[*sql.Tx]), onPgx func(*testing.T, backend[pgx.Tx])) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) { t.Parallel(); onSQL(t, sqliteBackend) })
	t.Run("postgres-sql", func(t *testing.T) { t.Parallel(); onSQL(t, postgresSQLBackend) })
	t.Run("postgres-pgx", func(t *testing.T) { t.Parallel(); onPgx(t, postgresPgxBackend) })
}

// env is one test's database with inbox migrated and the business tables
// of the tests created.
type env[TTx any] struct {
	t   *testing.T
	b   backend[TTx]
	dsn string
	drv inboxdriver.Driver[TTx]
	ib  *inbox.Inbox[TTx]
}

// setup gives t a fresh database, or in a crash child the parent's.
func setup[TTx any](t *testing.T, b backend[TTx]) *env[TTx] {
	t.Helper()
	dsn := os.Getenv(envDSN)
	_, child := inboxtest.CrashPoint()
	if !child || dsn == "" {
		dsn = b.newDSN(t)
	}
	e := &env[TTx]{t: t, b: b, dsn: dsn, drv: b.open(t, dsn)}
	e.ib = e.inbox(inbox.Config{})
	ctx := context.Background()
	if err := e.ib.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS effects (event_id TEXT NOT NULL, note TEXT NOT NULL DEFAULT '')`,
		`CREATE TABLE IF NOT EXISTS subscriptions (id TEXT PRIMARY KEY, status TEXT NOT NULL, version BIGINT NOT NULL)`,
	} {
		if _, err := e.drv.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

// inbox returns another Inbox over the same database.
func (e *env[TTx]) inbox(cfg inbox.Config) *inbox.Inbox[TTx] {
	e.t.Helper()
	if cfg.Logger == nil {
		cfg.Logger = testLogger(e.t)
	}
	ib, err := inbox.New(e.drv, cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return ib
}

// bothPolicies runs f as the parallel subtests "reclaim" and "hold", each on
// a fresh database set up on b, with the policy Reclaim(stale, 3) or
// Hold(stale).
func bothPolicies[TTx any](t *testing.T, b backend[TTx], stale time.Duration, f func(t *testing.T, e *env[TTx], policy inbox.Policy, hold bool)) {
	for _, hold := range []bool{false, true} {
		name, policy := "reclaim", inbox.Reclaim(stale, 3)
		if hold {
			name, policy = "hold", inbox.Hold(stale)
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f(t, setup(t, b), policy, hold)
		})
	}
}

// applyLater runs ib.Apply of ev for the handler "h" in a goroutine and
// sends its outcome on the returned channel; an error fails t.
func applyLater[TTx any](t *testing.T, ib *inbox.Inbox[TTx], ev inbox.Event, fn func(context.Context, TTx) error) <-chan inbox.Outcome {
	outcome := make(chan inbox.Outcome, 1)
	go func() {
		out, err := ib.Apply(context.Background(), "h", ev, fn)
		if err != nil {
			t.Error(err)
		}
		outcome <- out
	}()
	return outcome
}

// pausedBeforeCommit returns another Inbox over the same database whose
// Apply stops before its commit: pause is reached there, and the commit
// waits until pause is released.
func (e *env[TTx]) pausedBeforeCommit() (*inbox.Inbox[TTx], *inboxtest.Pause) {
	e.t.Helper()
	var faults inboxtest.Faults
	pause := faults.PauseAt(inbox.ApplyBeforeCommit)
	return e.inbox(inbox.Config{Hook: faults.Hook}), pause
}

// reopen connects to the same database with a new pool.
func (e *env[TTx]) reopen() *env[TTx] {
	e2 := &env[TTx]{t: e.t, b: e.b, dsn: e.dsn, drv: e.b.open(e.t, e.dsn)}
	e2.ib = e2.inbox(inbox.Config{})
	return e2
}

func (e *env[TTx]) sql(q string) string {
	if e.drv.Dialect() == inboxdriver.SQLite {
		return strings.ReplaceAll(q, "$", "?")
	}
	return q
}

// write records a business effect of eventID in tx.
func (e *env[TTx]) write(ctx context.Context, tx TTx, eventID, note string) error {
	_, err := e.drv.WrapTx(tx).Exec(ctx, e.sql(`INSERT INTO effects (event_id, note) VALUES ($1, $2)`), eventID, note)
	return err
}

// effects counts the committed business effects of eventID.
func (e *env[TTx]) effects(eventID string) int {
	e.t.Helper()
	var n int
	if err := e.drv.QueryRow(context.Background(), e.sql(`SELECT count(*) FROM effects WHERE event_id = $1`), eventID).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}

func (e *env[TTx]) notes(eventID string) []string {
	e.t.Helper()
	q := `SELECT COALESCE(string_agg(note, ',' ORDER BY note), '') FROM effects WHERE event_id = $1`
	var s string
	if err := e.drv.QueryRow(context.Background(), e.sql(q), eventID).Scan(&s); err != nil {
		e.t.Fatal(err)
	}
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// row returns the inbox_events status, token and attempts of an event.
func (e *env[TTx]) row(source, handler, id string) (status, token string, attempts int) {
	e.t.Helper()
	err := e.drv.QueryRow(context.Background(), e.sql(`SELECT status, token, attempts FROM inbox_events
		WHERE source = $1 AND handler = $2 AND event_id = $3`), source, handler, id).Scan(&status, &token, &attempts)
	if err != nil {
		e.t.Fatalf("inbox_events row %s/%s/%s: %v", source, handler, id, err)
	}
	return status, token, attempts
}

func (e *env[TTx]) countRows(table string) int {
	e.t.Helper()
	var n int
	if err := e.drv.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&n); err != nil {
		e.t.Fatal(err)
	}
	return n
}
