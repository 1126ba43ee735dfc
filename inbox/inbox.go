package inbox

import (
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/anyhook/anyhook/inbox/inboxdriver"
)

// Sentinel errors; test for them with errors.Is.
var (
	// ErrConflict: an event id seen before arrived with a different body.
	// Outcome Conflict carries it. It means a sender reused an id, or the
	// event was tampered with; it needs a person.
	ErrConflict = errors.New("inbox: same event id with a different body")
	// ErrLostClaim: the finish of a claim was refused because the claim is no
	// longer this worker's (it went stale and was reclaimed, held, or resolved).
	ErrLostClaim = errors.New("inbox: claim lost to another owner")
	// ErrClaimLate: Do released its claim unrun because the claim's answer
	// came back too close to its stale time (the database stalled between
	// taking the claim and answering): another owner could take it over
	// while the effect ran. Outcome Released (or InFlight, when another
	// owner already has) carries it; the next delivery runs the effect.
	ErrClaimLate = errors.New("inbox: claim answered too close to its stale time; released unrun")
	// ErrNoPolicy: Do was called without a stale policy (Reclaim or Hold).
	ErrNoPolicy = errors.New("inbox: no stale policy declared")
	// ErrInvalid: a required argument is missing or out of range.
	ErrInvalid = errors.New("inbox: invalid argument")
	// ErrNotHeld: Resolve found no held claim under that key.
	ErrNotHeld = errors.New("inbox: no held claim")
)

// Event identifies one delivery of a webhook event to this receiver.
type Event struct {
	// Source names the sender (an AnyHook source name, "stripe", …). Part of
	// the dedup key; may be empty if the receiver has a single sender.
	Source string
	// ID is the dedup key: the X-AnyHook-Delivery header behind AnyHook, the
	// provider's event id otherwise. Required: valid UTF-8 without a NUL
	// byte, at most MaxEventID bytes (PostgreSQL's text and its primary key
	// index refuse others, which SQLite would keep; ErrInvalid on every
	// database, so that none retries for ever what another accepts).
	ID string
	// Body, when non-nil, is hashed and stored; a later delivery of the same
	// ID with a different body is reported as Conflict. Nil skips the check.
	Body []byte
}

func (ev Event) hash() string {
	if ev.Body == nil {
		return ""
	}
	sum := sha256.Sum256(ev.Body)
	return hex.EncodeToString(sum[:])
}

// Outcome is what happened to an event. The zero Outcome means an error
// prevented inbox from knowing; nothing new is durable in that case.
type Outcome int

// Outcomes.
const (
	// Processed: this call did the work and it is committed.
	Processed Outcome = iota + 1
	// Duplicate: the work was done (or permanently failed) before; nothing ran.
	Duplicate
	// InFlight: another transaction or worker holds this event now; retry later.
	InFlight
	// Conflict: same id, different body (ErrConflict); nothing ran.
	Conflict
	// Held: a stale claim was parked under a Hold policy (or after Reclaim
	// ran out of attempts); a person must Resolve it. The effect did not run.
	Held
	// Released: the effect reported it was provably not applied (NotApplied);
	// the claim was released so the next delivery runs it again.
	Released
	// Failed: the function or effect reported a permanent failure (Permanent);
	// the failure is recorded and the event acknowledged.
	Failed
	// Uncertain: the effect failed in a way that may or may not have applied
	// it; the claim stays, and the stale policy decides on a later delivery.
	Uncertain
)

var outcomeNames = [...]string{"unknown", "processed", "duplicate", "in-flight", "conflict", "held", "released", "failed", "uncertain"}

func (o Outcome) String() string {
	if o < 0 || int(o) >= len(outcomeNames) {
		return "Outcome(" + strconv.Itoa(int(o)) + ")"
	}
	return outcomeNames[o]
}

// Point names a place in Apply and Do where Config.Hook is called. Package
// inboxtest uses them to inject failures, pauses and crashes.
type Point string

// Hook points.
const (
	// ApplyBeforeCommit: Apply's function returned nil; the transaction
	// (processed row + business writes) is not yet committed.
	ApplyBeforeCommit Point = "apply-before-commit"
	// AfterClaim: Do's claim is committed; the effect has not run.
	AfterClaim Point = "after-claim"
	// AfterEffect: the effect returned; its outcome is not yet recorded.
	AfterEffect Point = "after-effect"
	// BeforeFinishCommit: the fenced finish and Effect.Finish writes are
	// done but not committed.
	BeforeFinishCommit Point = "before-finish-commit"
	// AfterFinishCommit: the finish is committed; Do has not returned.
	AfterFinishCommit Point = "after-finish-commit"
)

// Config tunes an Inbox. The zero Config is ready to use.
type Config struct {
	// InFlightWait bounds how long Apply and Do wait, on PostgreSQL, for
	// another transaction that holds the same event before reporting
	// InFlight. Default 2s.
	//
	// It does not apply to SQLite, where a writing transaction locks the
	// whole database, so a wait cannot tell the same event from an
	// unrelated one: there Apply and Do wait for the database as the
	// connection's busy_timeout says (set it in the DSN, e.g.
	// _pragma=busy_timeout(5000)); running out of it is an error (the zero
	// Outcome, answered 503), never InFlight. On SQLite, InFlight only ever
	// means that Do holds a claim on the same event.
	InFlightWait time.Duration
	// Retries is how many times a transaction that failed with a
	// serialization failure or deadlock is run again. Default 5; negative
	// disables retries.
	Retries int
	// Hook, when set, is called at each Point. A non-nil error abandons the
	// operation right there, as a crash would (a claim stays claimed, an
	// open transaction rolls back), and is returned. For tests; see
	// package inboxtest.
	Hook func(ctx context.Context, p Point) error
	// OnStale, when set, is called once for each stale claim the policy
	// was applied to, by Sweep or by a Do that met it, after the change
	// committed: count them, alert a person for StaleHeld, send a
	// redelivery for StaleReleased. It runs in the sweeping or delivering
	// goroutine; keep it short.
	OnStale func(ctx context.Context, c StaleClaim)
	// Logger receives inbox's warnings: each stale claim (see Sweep), a
	// failed sweep, a SQLite connection without busy_timeout. Default
	// slog.Default().
	Logger *slog.Logger
}

// Inbox records processed events, claims, and object versions in one
// database. TTx is the adapter's transaction type (*sql.Tx, pgx.Tx). An Inbox
// is safe for concurrent use.
type Inbox[TTx any] struct {
	drv     inboxdriver.Driver[TTx]
	dialect inboxdriver.Dialect
	cfg     Config
	log     *slog.Logger
}

// New returns an Inbox over drv.
func New[TTx any](drv inboxdriver.Driver[TTx], cfg Config) (*Inbox[TTx], error) {
	if drv == nil {
		return nil, fmt.Errorf("%w: nil driver", ErrInvalid)
	}
	d := drv.Dialect()
	if d != inboxdriver.SQLite && d != inboxdriver.Postgres {
		return nil, fmt.Errorf("%w: unsupported dialect %v", ErrInvalid, d)
	}
	if cfg.InFlightWait < 0 {
		return nil, fmt.Errorf("%w: InFlightWait must not be negative", ErrInvalid)
	}
	if cfg.InFlightWait == 0 {
		cfg.InFlightWait = 2 * time.Second
	}
	if cfg.Retries == 0 {
		cfg.Retries = 5
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Inbox[TTx]{drv: drv, dialect: d, cfg: cfg, log: cfg.Logger}, nil
}

// Driver returns the driver the Inbox was built with.
func (ib *Inbox[TTx]) Driver() inboxdriver.Driver[TTx] { return ib.drv }

// addedColumns are the inbox_events columns added after its first version,
// added by Migrate to tables created before: the stale policy a claim was
// taken under ('hold' or 'reclaim'; ” for Apply's rows and older claims),
// its duration in microseconds, and Reclaim's bound on claims.
var addedColumns = []struct{ name, def string }{
	{"policy", `TEXT NOT NULL DEFAULT ''`},
	{"stale_after", `BIGINT NOT NULL DEFAULT 0`},
	{"max_claims", `INTEGER NOT NULL DEFAULT 0`},
}

var schema = []string{
	`CREATE TABLE IF NOT EXISTS inbox_events (
	source      TEXT    NOT NULL,
	handler     TEXT    NOT NULL,
	event_id    TEXT    NOT NULL,
	body_hash   TEXT    NOT NULL DEFAULT '',
	status      TEXT    NOT NULL,
	token       TEXT    NOT NULL DEFAULT '',
	attempts    INTEGER NOT NULL DEFAULT 0,
	claimed_at  BIGINT  NOT NULL DEFAULT 0,
	updated_at  BIGINT  NOT NULL,
	error       TEXT    NOT NULL DEFAULT '',
	policy      TEXT    NOT NULL DEFAULT '',
	stale_after BIGINT  NOT NULL DEFAULT 0,
	max_claims  INTEGER NOT NULL DEFAULT 0,
	PRIMARY KEY (source, handler, event_id)
)`,
	`CREATE INDEX IF NOT EXISTS inbox_events_held ON inbox_events (updated_at) WHERE status = 'held'`,
	`CREATE INDEX IF NOT EXISTS inbox_events_released ON inbox_events (updated_at) WHERE status = 'released'`,
	`CREATE INDEX IF NOT EXISTS inbox_events_claimed ON inbox_events (claimed_at) WHERE status = 'claimed'`,
	`CREATE TABLE IF NOT EXISTS inbox_versions (
	entity     TEXT   NOT NULL,
	id         TEXT   NOT NULL,
	version    BIGINT NOT NULL,
	updated_at BIGINT NOT NULL,
	PRIMARY KEY (entity, id)
)`,
}

// Migrate creates inbox's tables if they do not exist. It is idempotent and
// safe to run from several processes at once.
//
// It first checks that the database speaks the driver's dialect: a
// PostgreSQL handle given inboxsql.SQLite, or the reverse, is ErrInvalid
// here rather than a confusing failure on the first event. On SQLite it
// warns (Config.Logger) when the connection has no busy_timeout: writers
// would then fail at once instead of queueing.
func (ib *Inbox[TTx]) Migrate(ctx context.Context) error {
	if err := ib.checkDialect(ctx); err != nil {
		return fmt.Errorf("inbox: migrate: %w", err)
	}
	_, err := ib.retry(ctx, func() (Outcome, error) { return 0, ib.migrate(ctx) })
	if err != nil {
		return fmt.Errorf("inbox: migrate: %w", err)
	}
	return nil
}

func (ib *Inbox[TTx]) migrate(ctx context.Context) error {
	return ib.inTx(ctx, func(tx inboxdriver.Tx[TTx]) error {
		if ib.dialect == inboxdriver.Postgres {
			// Concurrent CREATE TABLE IF NOT EXISTS can collide in the catalog.
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(7370207461)`); err != nil {
				return err
			}
		}
		// The table first, then the columns later versions added, then the
		// indexes, which may use them.
		if _, err := tx.Exec(ctx, schema[0]); err != nil {
			return err
		}
		for _, c := range addedColumns {
			if ib.dialect == inboxdriver.Postgres {
				if _, err := tx.Exec(ctx, `ALTER TABLE inbox_events ADD COLUMN IF NOT EXISTS `+c.name+` `+c.def); err != nil {
					return err
				}
				continue
			}
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM pragma_table_info('inbox_events') WHERE name = ?`, c.name).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				if _, err := tx.Exec(ctx, `ALTER TABLE inbox_events ADD COLUMN `+c.name+` `+c.def); err != nil {
					return err
				}
			}
		}
		for _, stmt := range schema[1:] {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return err
			}
		}
		return nil
	})
}

// dialectProbes are queries that succeed only on their dialect.
var dialectProbes = map[inboxdriver.Dialect]string{
	inboxdriver.SQLite:   `SELECT sqlite_version()`,
	inboxdriver.Postgres: `SELECT current_setting('server_version')`,
}

// checkDialect fails with ErrInvalid when the database answers as the other
// dialect than the driver's.
func (ib *Inbox[TTx]) checkDialect(ctx context.Context) error {
	var version string
	err := ib.drv.QueryRow(ctx, dialectProbes[ib.dialect]).Scan(&version)
	if err != nil {
		for d, probe := range dialectProbes {
			if d != ib.dialect && ib.drv.QueryRow(ctx, probe).Scan(&version) == nil {
				return fmt.Errorf("%w: the driver says %v but the database is %v (version %s): give the adapter the right dialect (inboxsql.New(db, inboxsql.%s))",
					ErrInvalid, ib.dialect, d, version, map[inboxdriver.Dialect]string{inboxdriver.SQLite: "SQLite", inboxdriver.Postgres: "Postgres"}[d])
			}
		}
		return fmt.Errorf("check %v dialect: %w", ib.dialect, err)
	}
	if ib.dialect == inboxdriver.SQLite {
		var ms int64
		if err := ib.drv.QueryRow(ctx, `PRAGMA busy_timeout`).Scan(&ms); err == nil && ms == 0 {
			ib.log.WarnContext(ctx, "inbox: SQLite connection has no busy_timeout: concurrent writers fail with SQLITE_BUSY instead of waiting; add _pragma=busy_timeout(5000) to the DSN")
		}
	}
	return nil
}

// inTx runs fn in a transaction, committing if it returns nil.
func (ib *Inbox[TTx]) inTx(ctx context.Context, fn func(tx inboxdriver.Tx[TTx]) error) error {
	tx, err := ib.drv.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return err
	}
	return tx.Commit(ctx)
}

// q adapts a query written for PostgreSQL ($n placeholders) with {now}
// standing for the database clock in microseconds since the Unix epoch.
func (ib *Inbox[TTx]) q(query string) string {
	if ib.dialect == inboxdriver.SQLite {
		query = strings.ReplaceAll(query, "{now}", `CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)`)
		query = strings.ReplaceAll(query, " FOR UPDATE", "")
		return strings.ReplaceAll(query, "$", "?")
	}
	return strings.ReplaceAll(query, "{now}", `(extract(epoch from clock_timestamp()) * 1000000)::bigint`)
}

// waitLimit bounds, for the rest of tx, how long a statement waits for a
// row lock held by another transaction (PostgreSQL's lock_timeout): inbox's
// first statements lock only the event's own row, so running out of time
// there means another transaction holds the same event (InFlight). The
// returned restore puts the caller's lock_timeout back for the statements
// that follow in tx; it is idempotent.
//
// On SQLite it does nothing: a write transaction locks the whole database,
// so a wait there says nothing about the event. inbox's first statement in
// every transaction is a write, which waits for the database lock as the
// connection's busy_timeout says (the user's setting, never changed), and
// a timeout is an error, not InFlight.
func (ib *Inbox[TTx]) waitLimit(ctx context.Context, tx inboxdriver.Executor) (restore func(), err error) {
	if ib.dialect == inboxdriver.SQLite {
		return func() {}, nil
	}
	ms := max(ib.cfg.InFlightWait.Milliseconds(), 1)
	var old, set string
	if err := tx.QueryRow(ctx, `SELECT current_setting('lock_timeout'), set_config('lock_timeout', $1, true)`,
		strconv.FormatInt(ms, 10)+"ms").Scan(&old, &set); err != nil {
		return nil, err
	}
	// SET LOCAL ends with the transaction; restoring matters only for the
	// statements that follow in it (the caller's), so it is done only on
	// the success path, where the transaction is still healthy.
	var once sync.Once
	return func() {
		once.Do(func() {
			var s string
			_ = tx.QueryRow(ctx, `SELECT set_config('lock_timeout', $1, true)`, old).Scan(&s)
		})
	}, nil
}

// inFlight reports whether err, from one of inbox's own statements on the
// event's row, means another transaction holds that event. Only
// PostgreSQL's locks are per row; on SQLite a busy database is just busy.
func (ib *Inbox[TTx]) inFlight(err error) bool {
	return ib.dialect == inboxdriver.Postgres && inboxdriver.Classify(err) == inboxdriver.Busy
}

// retry runs once until it returns an error the driver classifies other than
// Retryable, or the retries are spent.
func (ib *Inbox[TTx]) retry(ctx context.Context, once func() (Outcome, error)) (Outcome, error) {
	for attempt := 0; ; attempt++ {
		out, err := once()
		if err == nil || attempt >= ib.cfg.Retries || inboxdriver.Classify(err) != inboxdriver.Retryable {
			return out, err
		}
		// Capped exponential backoff with full jitter: 5ms, 10ms, … 200ms.
		d := time.Duration(mrand.Int64N(int64(min(5*time.Millisecond<<attempt, 200*time.Millisecond)) + 1))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
}

func (ib *Inbox[TTx]) hook(ctx context.Context, p Point) error {
	if ib.cfg.Hook == nil {
		return nil
	}
	if err := ib.cfg.Hook(ctx, p); err != nil {
		return fmt.Errorf("inbox: hook at %s: %w", p, err)
	}
	return nil
}

// MaxEventID bounds Event.ID in bytes: the id is indexed with the source
// and the handler name, and a PostgreSQL btree row holds at most 2,704.
const MaxEventID = 1024

func validKey(handler string, ev Event) error {
	if handler == "" {
		return fmt.Errorf("%w: empty handler name", ErrInvalid)
	}
	if p := idProblem(ev.ID); p != "" {
		return fmt.Errorf("%w: event id %s", ErrInvalid, p)
	}
	return nil
}

// idProblem says what keeps id from being an event id every database
// keeps alike, or "".
func idProblem(id string) string {
	switch {
	case id == "":
		return "empty"
	case len(id) > MaxEventID:
		return "of " + strconv.Itoa(len(id)) + " bytes, at most " + strconv.Itoa(MaxEventID)
	case !utf8.ValidString(id):
		return "not valid UTF-8"
	case strings.IndexByte(id, 0) >= 0:
		return "with a NUL byte"
	}
	return ""
}

func newToken() string {
	return crand.Text()
}
