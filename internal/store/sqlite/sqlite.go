// Package sqlite is the embedded store: one SQLite file in WAL mode with
// synchronous=FULL, so a commit is durable before ingest answers. All writes
// go through one connection (SQLite has one writer anyway); reads use a
// small pool of their own.
package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the pure-Go driver

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options tune a Store.
type Options struct {
	// Now is the store's clock; default time.Now.
	Now func() time.Time
	// NewID makes event and delivery ids; default store.NewID.
	NewID func() string
}

// Store is the SQLite backend of store.Store.
type Store struct {
	w     *sql.DB // one connection: the single writer
	r     *sql.DB // readers
	now   func() time.Time
	newID func() string
	// prepared holds the hot write statements, prepared once on the
	// writer connection at Open (read-only afterwards); a transaction
	// borrows them with Tx.StmtContext instead of parsing SQL each time.
	prepared map[string]*sql.Stmt
}

var _ store.Store = (*Store)(nil)

// Open opens (creating if needed) the database file at path and applies
// pending migrations. A new file is created with mode 0600 whatever the
// umask, and SQLite gives its -wal and -shm files the database file's
// mode: the store holds every webhook body.
func Open(ctx context.Context, path string, opt Options) (*Store, error) {
	if err := createPrivate(path); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	q := url.Values{}
	// synchronous=FULL stays: a commit is durable before ingest answers.
	// A bigger page cache, mmap_size and a rarer wal_autocheckpoint were
	// measured (anyhook bench, BENCHMARKS.md) and bought no CPU or
	// throughput here, only resident memory, so only temp_store is set.
	for _, p := range []string{"journal_mode(WAL)", "synchronous(FULL)", "busy_timeout(10000)", "foreign_keys(1)", "temp_store(MEMORY)"} {
		q.Add("_pragma", p)
	}
	q.Set("_txlock", "immediate")
	dsn := "file:" + path + "?" + q.Encode()
	w, err := sql.Open("sqlite", dsn)
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
		if r, err = sql.Open("sqlite", dsn); err != nil {
			w.Close()
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		r.SetMaxOpenConns(4)
	}
	s := &Store{w: w, r: r, now: opt.Now, newID: opt.NewID}
	if s.now == nil {
		s.now = time.Now
	}
	if s.newID == nil {
		s.newID = store.NewID
	}
	if err := s.migrate(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	if err := s.prepare(ctx); err != nil {
		s.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	return s, nil
}

// The hot write statements, prepared at Open.
const (
	qSavepoint     = `SAVEPOINT item`
	qRollbackTo    = `ROLLBACK TO item`
	qRelease       = `RELEASE item`
	qCountDup      = `UPDATE events SET duplicates = duplicates + 1 WHERE source = ? AND dedup_key = ? RETURNING id, duplicates`
	qCountContent  = `UPDATE events SET duplicates = duplicates + 1 WHERE source = ? AND content_key = ? RETURNING id, duplicates`
	qVersion       = `SELECT version FROM versions WHERE source = ? AND object = ?`
	qInsertVersion = `INSERT INTO versions (source, object, version) VALUES (?, ?, ?)`
	qRaiseVersion  = `UPDATE versions SET version = ? WHERE source = ? AND object = ?`
	qInsertEvent   = `INSERT INTO events (id, source, dedup_key, received_at, method, path, headers, body, object, version, stale, content_key,
		remote_addr, verify_method, verify_scheme, verify_secret, type, not_routed)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	qInsertDelivery = `INSERT INTO deliveries (id, event_id, destination, status, stale, next_attempt_at, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`
	qPaused = `SELECT paused FROM destinations WHERE name = ?`
	qFinish = `UPDATE deliveries SET status = ?, next_attempt_at = ?, lease_until = NULL, updated_at = ?
				WHERE id = ? AND attempt_count = ? AND status = 'delivering'`
	qInsertAttempt = `INSERT INTO attempts (delivery_id, number, started_at, duration_us, status_code, error, response_body)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (delivery_id, number) DO NOTHING`
)

var claimQuery = `UPDATE deliveries
			SET status = 'delivering', attempt_count = attempt_count + 1, lease_until = ?, updated_at = ?, claimed_at = ?
			WHERE id IN (SELECT id FROM deliveries WHERE destination = ? AND status = 'pending' AND next_attempt_at <= ?
				ORDER BY next_attempt_at LIMIT ?)
			RETURNING ` + deliveryCols

func (s *Store) prepare(ctx context.Context) error {
	s.prepared = map[string]*sql.Stmt{}
	for _, q := range []string{qSavepoint, qRollbackTo, qRelease, qCountDup, qCountContent, qVersion, qInsertVersion, qRaiseVersion,
		qInsertEvent, qInsertDelivery, qPaused, qFinish, qInsertAttempt, claimQuery, qInsertArrival} {
		st, err := s.w.PrepareContext(ctx, q)
		if err != nil {
			return unavailable(fmt.Errorf("prepare %q: %w", q, err))
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

// migrate applies pending migrations in one write transaction (BEGIN
// IMMEDIATE, and SQLite's DDL is transactional): of several processes
// opening a new file at once, one applies them while the others wait for
// the lock, then find nothing to do.
func (s *Store) migrate(ctx context.Context) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	// A migration's version is the number its name starts with (0001_…),
	// strictly increasing, gaps allowed: a database applies every one it
	// has not applied yet, in order.
	versions := make([]int, len(names))
	for i, name := range names {
		num, _, _ := strings.Cut(path.Base(name), "_")
		v, err := strconv.Atoi(num)
		if err != nil || len(num) != 4 || v < 1 || (i > 0 && v <= versions[i-1]) {
			return fmt.Errorf("migration %s: want a name starting with a version of four digits, above the one before", path.Base(name))
		}
		versions[i] = v
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
			return unavailable(err)
		}
		rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
		if err != nil {
			return unavailable(err)
		}
		applied := map[int]bool{}
		top := 0
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				rows.Close()
				return unavailable(err)
			}
			applied[v], top = true, max(top, v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return unavailable(err)
		}
		if known := versions[len(versions)-1]; top > known {
			return fmt.Errorf("database schema version %d is newer than this binary knows (%d): upgrade anyhook", top, known)
		}
		for i, name := range names {
			if applied[versions[i]] {
				continue
			}
			ddl, err := migrations.ReadFile(name)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, string(ddl)); err != nil {
				return fmt.Errorf("migration %s: %w", name, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, versions[i], micros(s.now())); err != nil {
				return unavailable(err)
			}
		}
		return nil
	})
}

// tx runs fn in a write transaction (BEGIN IMMEDIATE) and commits it.
func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return unavailable(err)
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return unavailable(err)
	}
	return nil
}

// Ping checks that the database answers with its schema: a query that
// touches no table (SELECT 1) answers even from a database that has lost
// its tables or is not this store's.
func (s *Store) Ping(ctx context.Context) error {
	var version int
	if err := s.r.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&version); err != nil {
		return unavailable(err)
	}
	if version == 0 {
		return unavailable(errors.New("the database has no schema"))
	}
	return nil
}

// Ingest implements store.Store.
func (s *Store) Ingest(ctx context.Context, evs []store.NewEvent) ([]store.IngestResult, error) {
	res := make([]store.IngestResult, len(evs))
	err := s.tx(ctx, func(tx *sql.Tx) error {
		now := micros(s.now())
		st := s.stmts(ctx, tx)
		for i := range evs {
			if _, err := st.exec(qSavepoint); err != nil {
				return unavailable(err)
			}
			r, err := s.ingestOne(st, &evs[i], now)
			if err != nil {
				if _, rerr := st.exec(qRollbackTo); rerr != nil {
					return unavailable(rerr)
				}
				r = store.IngestResult{Err: err}
			}
			if _, err := st.exec(qRelease); err != nil {
				return unavailable(err)
			}
			res[i] = r
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

func (s *Store) ingestOne(st *stmts, ne *store.NewEvent, now int64) (store.IngestResult, error) {
	ev := &ne.Event
	// A duplicate by the provider's id first, then by the signed content.
	for _, k := range [2]struct{ q, key string }{{qCountDup, ev.DedupKey}, {qCountContent, ne.ContentKey}} {
		if k.key == "" {
			continue
		}
		var id string
		var n int64
		err := st.queryRow(k.q, ev.Source, k.key).Scan(&id, &n)
		if err == nil {
			return store.IngestResult{ID: id, Duplicate: true}, arrive(st, id, n, ev)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return store.IngestResult{}, err
		}
	}
	stale := false
	if ev.Object != "" {
		var mark string
		err := st.queryRow(qVersion, ev.Source, ev.Object).Scan(&mark)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = st.exec(qInsertVersion, ev.Source, ev.Object, ev.Version)
		case err == nil:
			switch c := store.CompareVersions(ev.Version, mark); {
			case c < 0:
				stale = true
			case c > 0:
				_, err = st.exec(qRaiseVersion, ev.Version, ev.Source, ev.Object)
			}
		}
		if err != nil {
			return store.IngestResult{}, err
		}
	}
	headers, err := store.EncodeHeader(ev.Header)
	if err != nil {
		return store.IngestResult{}, err
	}
	vm, vs, vk := store.VerificationArgs(ev.Verification)
	_, err = st.exec(qInsertEvent,
		ev.ID, ev.Source, nullable(ev.DedupKey), micros(ev.ReceivedAt), ev.Method, ev.Path, headers, nonNil(ev.Body),
		nullable(ev.Object), nullable(ev.Version), stale, nullable(ne.ContentKey),
		nullable(ev.RemoteAddr), vm, vs, vk, nullable(ev.Type), store.NotRoutedArg(ev.NotRouted))
	if err != nil {
		return store.IngestResult{}, err
	}
	status := anyhook.StatusPending
	if stale && ne.StaleSkip {
		status = anyhook.StatusSkipped
	}
	for _, dest := range ne.Destinations {
		_, err := st.exec(qInsertDelivery, s.newID(), ev.ID, dest, status, stale && !ne.StaleSkip, now, now, now)
		if err != nil {
			return store.IngestResult{}, err
		}
	}
	return store.IngestResult{ID: ev.ID, Stale: stale}, nil
}

// deliveryColumns lists what scanDelivery reads, each name prefixed by p
// ("deliveries." for the table itself). The status is the shown one
// (store.StatusExpr): paused for a pending delivery of a paused
// destination.
func deliveryColumns(p string) string {
	return strings.NewReplacer("$", p).Replace(`$id, $event_id, $destination, `) + store.StatusExpr(p) +
		strings.NewReplacer("$", p).Replace(`, $replay, $stale, $attempt_count, $next_attempt_at, coalesce($lease_until, 0),
		coalesce($claimed_at, 0), $created_at, $updated_at, $note,
		$resolution, coalesce($resolved_at, 0), $resolved_by, $resolution_reason, coalesce($replayed_by, '')`)
}

var deliveryCols = deliveryColumns("deliveries.")

func scanDelivery(sc interface{ Scan(...any) error }) (anyhook.Delivery, error) {
	var d anyhook.Delivery
	var next, lease, claimed, created, updated, resolved int64
	r := &d.Resolution
	err := sc.Scan(&d.ID, &d.EventID, &d.Destination, &d.Status, &d.Replay, &d.Stale, &d.AttemptCount, &next, &lease,
		&claimed, &created, &updated, &d.Note, &r.Kind, &resolved, &r.By, &r.Reason, &r.ReplayedBy)
	d.NextAttemptAt, d.LeaseUntil, d.CreatedAt, d.UpdatedAt = fromMicros(next), fromMicros(lease), fromMicros(created), fromMicros(updated)
	d.ClaimedAt, r.At = fromMicros(claimed), fromMicros(resolved)
	return d, err
}

// Claim implements store.Store.
func (s *Store) Claim(ctx context.Context, destination string, limit int, lease time.Duration) ([]store.Claim, error) {
	if limit <= 0 {
		return nil, nil // SQLite reads LIMIT -1 as no limit at all
	}
	var claims []store.Claim
	err := s.tx(ctx, func(tx *sql.Tx) error {
		st := s.stmts(ctx, tx)
		var paused bool
		err := st.queryRow(qPaused, destination).Scan(&paused)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return unavailable(err)
		}
		if paused {
			return nil
		}
		now := s.now()
		rows, err := st.get(claimQuery).QueryContext(ctx, micros(now.Add(lease)), micros(now), micros(now), destination, micros(now), limit)
		if err != nil {
			return unavailable(err)
		}
		defer rows.Close()
		for rows.Next() {
			d, err := scanDelivery(rows)
			if err != nil {
				return unavailable(err)
			}
			claims = append(claims, store.Claim{Delivery: d})
		}
		if err := rows.Err(); err != nil {
			return unavailable(err)
		}
		rows.Close()
		return s.attachEvents(ctx, tx, claims)
	})
	if err != nil {
		return nil, err // rolled back: nothing was claimed
	}
	return claims, nil
}

func (s *Store) attachEvents(ctx context.Context, tx *sql.Tx, claims []store.Claim) error {
	if len(claims) == 0 {
		return nil
	}
	ids := make([]any, len(claims))
	for i, c := range claims {
		ids[i] = c.Delivery.EventID
	}
	rows, err := tx.QueryContext(ctx, `SELECT `+eventCols+`, `+prunedCol+` FROM events WHERE id IN (?`+strings.Repeat(",?", len(ids)-1)+`)`, ids...)
	if err != nil {
		return unavailable(err)
	}
	defer rows.Close()
	byID := make(map[string]anyhook.Event, len(ids))
	for rows.Next() {
		var pruned bool
		ev, err := scanEvent(alsoScan{rows, []any{&pruned}})
		if err != nil {
			return unavailable(err)
		}
		ev.BodyPruned = pruned
		byID[ev.ID] = ev
	}
	if err := rows.Err(); err != nil {
		return unavailable(err)
	}
	for i := range claims {
		claims[i].Event = byID[claims[i].Delivery.EventID]
	}
	return nil
}

// Finish implements store.Store.
func (s *Store) Finish(ctx context.Context, outs []store.Outcome) ([]string, error) {
	for _, o := range outs {
		switch o.Status {
		case anyhook.StatusDelivered, anyhook.StatusPending, anyhook.StatusDead:
		default:
			return nil, fmt.Errorf("finish delivery %s: status %q is not delivered, pending or dead: %w", o.DeliveryID, o.Status, anyhook.ErrInvalid)
		}
	}
	var lost []string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		lost = lost[:0]
		now := s.now()
		st := s.stmts(ctx, tx)
		for _, o := range outs {
			next := now
			if o.Status == anyhook.StatusPending {
				next = now.Add(o.RetryIn)
			}
			res, err := st.exec(qFinish,
				o.Status, micros(next), micros(now), o.DeliveryID, o.Attempt)
			if err != nil {
				return unavailable(err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				lost = append(lost, o.DeliveryID)
				continue
			}
			if _, err := st.exec(qInsertAttempt, o.DeliveryID, o.Attempt, micros(o.Result.StartedAt), o.Result.Duration.Microseconds(),
				o.Result.StatusCode, o.Result.Error, o.Result.ResponseBody); err != nil {
				return unavailable(err)
			}
		}
		return nil
	})
	return lost, err
}

func insertAttempt(ctx context.Context, tx *sql.Tx, deliveryID string, number int, a anyhook.Attempt) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO attempts (delivery_id, number, started_at, duration_us, status_code, error, response_body)
		VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (delivery_id, number) DO NOTHING`,
		deliveryID, number, micros(a.StartedAt), a.Duration.Microseconds(), a.StatusCode, a.Error, a.ResponseBody)
	if err != nil {
		return unavailable(err)
	}
	return nil
}

// Rescue implements store.Store.
func (s *Store) Rescue(ctx context.Context, rule func(destination string) (store.StaleRule, bool)) ([]anyhook.Delivery, error) {
	var changed []anyhook.Delivery
	err := s.tx(ctx, func(tx *sql.Tx) error {
		changed = changed[:0]
		now := s.now()
		rows, err := tx.QueryContext(ctx, `SELECT `+deliveryCols+` FROM deliveries WHERE status = 'delivering' AND lease_until < ?`, micros(now))
		if err != nil {
			return unavailable(err)
		}
		var expired []anyhook.Delivery
		for rows.Next() {
			d, err := scanDelivery(rows)
			if err != nil {
				rows.Close()
				return unavailable(err)
			}
			expired = append(expired, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return unavailable(err)
		}
		for _, d := range expired {
			r, ok := rule(d.Destination)
			if !ok {
				continue // not ours to decide
			}
			lost := store.LostAttempt(d) // as the claim left it: started when claimed
			d.Status = store.RescueStatus(d, r)
			d.NextAttemptAt, d.LeaseUntil, d.UpdatedAt = now, time.Time{}, now
			_, err := tx.ExecContext(ctx, `UPDATE deliveries SET status = ?, next_attempt_at = ?, lease_until = NULL, updated_at = ? WHERE id = ?`,
				d.Status, micros(now), micros(now), d.ID)
			if err != nil {
				return unavailable(err)
			}
			if err := insertAttempt(ctx, tx, d.ID, d.AttemptCount, lost); err != nil {
				return err
			}
			changed = append(changed, d)
		}
		return nil
	})
	return changed, err
}

// prunedCol is whether the body of the event in the query's events row
// was pruned by retention.
const prunedCol = `coalesce((SELECT l.body_pruned FROM ledger_entries l WHERE l.event_id = events.id), 0)`

// alsoScan scans more columns after those a scan func reads.
type alsoScan struct {
	sc    interface{ Scan(...any) error }
	extra []any
}

func (a alsoScan) Scan(dest ...any) error { return a.sc.Scan(append(dest, a.extra...)...) }

// sendable checks, inside a write transaction (so that no prune runs
// meanwhile), that event id exists and still has its body.
func sendable(ctx context.Context, tx *sql.Tx, id string) error {
	var pruned bool
	err := tx.QueryRowContext(ctx, `SELECT `+prunedCol+` FROM events WHERE id = ?`, id).Scan(&pruned)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("event %s: %w", id, anyhook.ErrNotFound)
	case err != nil:
		return unavailable(err)
	case pruned:
		return store.PrunedError(id)
	}
	return nil
}

// replayPair creates the replay delivery of event to dest, resolves the
// held and dead deliveries of that pair (the replay takes over their work)
// and records the action, in tx; it returns the new delivery's id.
func (s *Store) replayPair(ctx context.Context, tx *sql.Tx, eventID, dest string, by store.Actor, now time.Time) (string, error) {
	id, at := s.newID(), micros(now)
	if _, err := tx.ExecContext(ctx, `INSERT INTO deliveries (id, event_id, destination, status, replay, next_attempt_at, created_at, updated_at)
		VALUES (?, ?, ?, 'pending', 1, ?, ?, ?)`, id, eventID, dest, at, at, at); err != nil {
		return "", unavailable(err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE deliveries AS d SET status = 'resolved', resolution = ?, resolved_at = ?, resolved_by = ?,
			resolution_reason = ?, replayed_by = ?, note = ?, lease_until = NULL, updated_at = ?
		WHERE d.event_id = ? AND d.destination = ? AND `+store.Resolvable,
		anyhook.ResolvedReplayed, at, store.ActorName(by), by.Reason, id, store.Note("replayed", by, now)+" (replay delivery "+id+")", at,
		eventID, dest); err != nil {
		return "", unavailable(err)
	}
	return id, s.recordAction(ctx, tx, eventID, id, dest, store.ActionReplay, by, now)
}

// recordAction adds one row to the audit trail.
func (s *Store) recordAction(ctx context.Context, tx *sql.Tx, eventID, deliveryID, dest, action string, by store.Actor, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO actions (id, event_id, delivery_id, destination, action, actor, reason, at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, s.newID(), eventID, deliveryID, dest, action, store.ActorName(by), by.Reason, micros(now))
	return unavailable(err)
}

// Replay implements store.Store. SQLite runs one write transaction at a
// time, so the check and the inserts are atomic with PruneBodies.
func (s *Store) Replay(ctx context.Context, eventID string, destinations []string, by store.Actor) ([]anyhook.Delivery, error) {
	var out []anyhook.Delivery
	err := s.tx(ctx, func(tx *sql.Tx) error {
		out = out[:0]
		if err := sendable(ctx, tx, eventID); err != nil {
			return err
		}
		now := s.now()
		for _, dest := range destinations {
			id, err := s.replayPair(ctx, tx, eventID, dest, by, now)
			if err != nil {
				return err
			}
			d, err := scanDelivery(tx.QueryRowContext(ctx, `SELECT `+deliveryCols+` FROM deliveries WHERE id = ?`, id))
			if err != nil {
				return unavailable(err)
			}
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// ReplayDeliveries implements store.Store.
func (s *Store) ReplayDeliveries(ctx context.Context, f store.DeliveryFilter, by store.Actor) (int, error) {
	var n int
	err := s.tx(ctx, func(tx *sql.Tx) error {
		where, args := deliveryWhere(f)
		rows, err := tx.QueryContext(ctx, `SELECT DISTINCT d.event_id, d.destination, coalesce(l.body_pruned, 0)
			FROM deliveries d JOIN events e ON e.id = d.event_id LEFT JOIN ledger_entries l ON l.event_id = d.event_id`+where+`
			ORDER BY d.event_id, d.destination`, args...)
		if err != nil {
			return unavailable(err)
		}
		var pairs [][2]string
		pruned := map[string]bool{}
		firstPruned := ""
		for rows.Next() {
			var p [2]string
			var gone bool
			if err := rows.Scan(&p[0], &p[1], &gone); err != nil {
				rows.Close()
				return unavailable(err)
			}
			if gone {
				pruned[p[0]] = true
				firstPruned = cmp.Or(firstPruned, p[0])
			}
			pairs = append(pairs, p)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return unavailable(err)
		}
		if len(pruned) > 0 {
			return store.PrunedManyError(len(pruned), firstPruned)
		}
		now := s.now()
		for _, p := range pairs {
			if _, err := s.replayPair(ctx, tx, p[0], p[1], by, now); err != nil {
				return err
			}
		}
		n = len(pairs)
		return nil
	})
	return n, err
}

// Resolve implements store.Store.
func (s *Store) Resolve(ctx context.Context, deliveryID, action string, by store.Actor) (anyhook.Delivery, error) {
	var d anyhook.Delivery
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		d, err = scanDelivery(tx.QueryRowContext(ctx, `SELECT `+deliveryCols+` FROM deliveries WHERE id = ?`, deliveryID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("delivery %s: %w", deliveryID, anyhook.ErrNotFound)
		}
		if err != nil {
			return unavailable(err)
		}
		now := s.now()
		if d, err = store.Resolved(d, action, by, now); err != nil {
			return err
		}
		if d.Status == anyhook.StatusPending { // a resend
			if err := sendable(ctx, tx, d.EventID); err != nil {
				return err
			}
		}
		r := d.Resolution
		_, err = tx.ExecContext(ctx, `UPDATE deliveries SET status = ?, note = ?, next_attempt_at = ?, lease_until = NULL, updated_at = ?,
				resolution = ?, resolved_at = ?, resolved_by = ?, resolution_reason = ?
			WHERE id = ?`,
			d.Status, d.Note, micros(now), micros(now), r.Kind, nullMicros(r.At), r.By, r.Reason, deliveryID)
		if err != nil {
			return unavailable(err)
		}
		if err := s.recordAction(ctx, tx, d.EventID, d.ID, d.Destination, action, by, now); err != nil {
			return err
		}
		// As every read shows it: a resend to a paused destination waits.
		d, err = scanDelivery(tx.QueryRowContext(ctx, `SELECT `+deliveryCols+` FROM deliveries WHERE id = ?`, deliveryID))
		return unavailable(err)
	})
	return d, err
}

// SetPaused implements store.Store.
func (s *Store) SetPaused(ctx context.Context, destination string, paused bool) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO destinations (name, paused) VALUES (?, ?)
			ON CONFLICT (name) DO UPDATE SET paused = excluded.paused`, destination, paused)
		return unavailable(err)
	})
}

// Paused implements store.Store.
func (s *Store) Paused(ctx context.Context) (map[string]bool, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT name FROM destinations WHERE paused`)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	m := map[string]bool{}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			return nil, unavailable(err)
		}
		m[name] = true
	}
	return m, unavailable(rows.Err())
}

// eventColumns lists what scanEvent reads, each name prefixed by p.
func eventColumns(p string) string {
	return strings.NewReplacer("$", p).Replace(`$id, $source, coalesce($dedup_key, ''), $received_at, $method, $path, $headers, $body, coalesce($object, ''), coalesce($version, ''), $stale, $duplicates, coalesce($type, '')`)
}

var eventCols = eventColumns("")

func scanEvent(sc interface{ Scan(...any) error }) (anyhook.Event, error) {
	var ev anyhook.Event
	var received int64
	var headers []byte
	err := sc.Scan(&ev.ID, &ev.Source, &ev.DedupKey, &received, &ev.Method, &ev.Path, &headers, &ev.Body, &ev.Object, &ev.Version, &ev.Stale, &ev.Duplicates, &ev.Type)
	if err != nil {
		return ev, err
	}
	ev.ReceivedAt = fromMicros(received)
	ev.Header, err = store.DecodeHeader(headers)
	return ev, err
}

// Event implements store.Store.
func (s *Store) Event(ctx context.Context, id string) (anyhook.Event, error) {
	var pruned bool
	var info anyhook.Event
	ev, err := scanEvent(alsoScan{s.r.QueryRowContext(ctx, `SELECT `+eventCols+`, `+prunedCol+`, `+store.InfoColumns("")+` FROM events WHERE id = ?`, id),
		append([]any{&pruned}, store.InfoDest(&info)...)})
	ev.BodyPruned = pruned
	setInfo(&ev, &info)
	if errors.Is(err, sql.ErrNoRows) {
		return ev, fmt.Errorf("event %s: %w", id, anyhook.ErrNotFound)
	}
	if err != nil {
		return ev, unavailable(err)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+deliveryCols+` FROM deliveries WHERE event_id = ? ORDER BY id`, id)
	if err != nil {
		return ev, unavailable(err)
	}
	defer rows.Close()
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return ev, unavailable(err)
		}
		ev.Deliveries = append(ev.Deliveries, d)
	}
	if err := rows.Err(); err != nil {
		return ev, unavailable(err)
	}
	if ev.Actions, err = s.actions(ctx, id); err != nil {
		return ev, err
	}
	if ev.Arrivals, err = s.arrivals(ctx, id); err != nil {
		return ev, err
	}
	for i := range ev.Deliveries {
		d := &ev.Deliveries[i]
		rows, err := s.r.QueryContext(ctx, `SELECT number, started_at, duration_us, status_code, error, coalesce(response_body, x'')
			FROM attempts WHERE delivery_id = ? ORDER BY number`, d.ID)
		if err != nil {
			return ev, unavailable(err)
		}
		for rows.Next() {
			var a anyhook.Attempt
			var started, dur int64
			if err := rows.Scan(&a.Number, &started, &dur, &a.StatusCode, &a.Error, &a.ResponseBody); err != nil {
				rows.Close()
				return ev, unavailable(err)
			}
			a.StartedAt, a.Duration = fromMicros(started), time.Duration(dur)*time.Microsecond
			d.Attempts = append(d.Attempts, a)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return ev, unavailable(err)
		}
	}
	return ev, nil
}

// actions reads the audit trail of event id, oldest first.
func (s *Store) actions(ctx context.Context, id string) ([]anyhook.Action, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, event_id, action, delivery_id, destination, actor, reason, at
		FROM actions WHERE event_id = ? ORDER BY id`, id)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []anyhook.Action
	for rows.Next() {
		var a anyhook.Action
		var at int64
		if err := rows.Scan(&a.ID, &a.EventID, &a.Kind, &a.DeliveryID, &a.Destination, &a.Actor, &a.Reason, &at); err != nil {
			return nil, unavailable(err)
		}
		a.At = fromMicros(at)
		out = append(out, a)
	}
	return out, unavailable(rows.Err())
}

// ListEvents implements store.Store.
func (s *Store) ListEvents(ctx context.Context, f store.EventFilter) ([]anyhook.Event, string, error) {
	var conds []string
	var args []any
	add := func(cond string, arg any) { conds = append(conds, cond); args = append(args, arg) }
	from, order := ` FROM events`, ` ORDER BY events.id DESC`
	if f.Status != "" {
		// Walk the deliveries in that status newest first (index
		// deliveries_status_event): a rare status such as held must not
		// make the query read every event to find none.
		from = ` FROM deliveries d CROSS JOIN events ON events.id = d.event_id`
		order = ` GROUP BY d.event_id ORDER BY d.event_id DESC`
		stored, extra := store.StatusCond("d.", f.Status)
		add("d.status = ?", stored)
		if extra != "" {
			conds = append(conds, extra)
		}
		if f.Cursor != "" {
			add("d.event_id < ?", f.Cursor)
		}
	} else if f.Cursor != "" {
		add("events.id < ?", f.Cursor)
	}
	if f.Source != "" {
		add("events.source = ?", f.Source)
	}
	if f.Q != "" {
		add("events.dedup_key = ?", f.Q)
	}
	if f.Type != "" {
		add(`coalesce(events.type, '') LIKE ? ESCAPE '\'`, store.TypePattern(f.Type))
	}
	if !f.Since.IsZero() {
		add("events.received_at >= ?", micros(f.Since))
	}
	if !f.Until.IsZero() {
		add("events.received_at < ?", micros(f.Until))
	}
	limit := store.PageLimit(f.Limit)
	q := `SELECT ` + eventColumns("events.") + `, ` + store.InfoColumns("events.") + from + where(conds) + order + ` LIMIT ` + strconv.Itoa(limit+1)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", unavailable(err)
	}
	defer rows.Close()
	var evs []anyhook.Event
	for rows.Next() {
		var info anyhook.Event
		ev, err := scanEvent(alsoScan{rows, store.InfoDest(&info)})
		if err != nil {
			return nil, "", unavailable(err)
		}
		setInfo(&ev, &info)
		evs = append(evs, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, "", unavailable(err)
	}
	evs, next := store.Page(evs, limit, func(ev anyhook.Event) string { return ev.ID })
	return evs, next, nil
}

func deliveryWhere(f store.DeliveryFilter) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, arg any) { conds = append(conds, cond); args = append(args, arg) }
	if f.Status != "" {
		stored, extra := store.StatusCond("d.", f.Status)
		add("d.status = ?", stored)
		if extra != "" {
			conds = append(conds, extra)
		}
	}
	if f.Destination != "" {
		add("d.destination = ?", f.Destination)
	}
	if f.Source != "" {
		add("e.source = ?", f.Source)
	}
	if !f.Since.IsZero() {
		add("d.created_at >= ?", micros(f.Since))
	}
	if !f.Until.IsZero() {
		add("d.created_at < ?", micros(f.Until))
	}
	if f.Cursor != "" {
		add("d.id < ?", f.Cursor)
	}
	return where(conds), args
}

// ListDeliveries implements store.Store.
func (s *Store) ListDeliveries(ctx context.Context, f store.DeliveryFilter) ([]anyhook.Delivery, string, error) {
	w, args := deliveryWhere(f)
	limit := store.PageLimit(f.Limit)
	q := `SELECT ` + deliveryColumns("d.") + ` FROM deliveries d JOIN events e ON e.id = d.event_id` + w + ` ORDER BY d.id DESC LIMIT ` + strconv.Itoa(limit+1)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", unavailable(err)
	}
	defer rows.Close()
	var ds []anyhook.Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, "", unavailable(err)
		}
		ds = append(ds, d)
	}
	if err := rows.Err(); err != nil {
		return nil, "", unavailable(err)
	}
	ds, next := store.Page(ds, limit, func(d anyhook.Delivery) string { return d.ID })
	return ds, next, nil
}

// Counts implements store.Store.
func (s *Store) Counts(ctx context.Context) (map[anyhook.DeliveryStatus]int, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+store.StatusExpr("deliveries.")+`, count(*) FROM deliveries GROUP BY 1`)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	m := map[anyhook.DeliveryStatus]int{}
	for rows.Next() {
		var st anyhook.DeliveryStatus
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, unavailable(err)
		}
		m[st] = n
	}
	return m, unavailable(rows.Err())
}

func where(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

// unavailable marks an error of the database itself (not of one item) so
// ingest answers 503. nil stays nil.
func unavailable(err error) error {
	if err == nil || errors.Is(err, anyhook.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", anyhook.ErrUnavailable, err)
}

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
