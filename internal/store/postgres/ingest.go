package postgres

import (
	"cmp"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// insertEvent inserts an event and, only if it was new, its deliveries: one
// statement, one round trip. A delivery with a lease ($24, in microseconds;
// 0: none) is created claimed (store.NewEvent.Lease) unless its
// destination is paused or the event skipped as stale; the statement
// returns the ids of those and when it claimed them: the clock at the
// statement (t), not the transaction's start, which may lie a lock wait or
// a batch's items earlier (the lease would start partly spent). With $25
// it also sets the version mark of (source, object) to the event's
// version, if the event was new (the pipelined ingest decided that it
// raises the mark). The unique indexes on (source, dedup_key) and
// (source, content_key) make a concurrent insert with either key wait for
// the first one's transaction and then do nothing (ON CONFLICT without a
// target covers both), so it returns no row and the caller counts a
// duplicate.
const insertEvent = `WITH t AS (SELECT clock_timestamp() AS at), ev AS (
	INSERT INTO events (id, source, dedup_key, received_at, method, path, headers, body, object, version, stale, content_key,
		remote_addr, verify_method, verify_scheme, verify_secret, type, not_routed, origin)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $16, $17, $18, $19, $20, $21, $22, $23)
	ON CONFLICT DO NOTHING
	RETURNING id
), dl AS (
	INSERT INTO deliveries (id, event_id, source, type, destination, status, stale, next_attempt_at, created_at, updated_at,
		attempt_count, lease_until, claimed_at)
	SELECT d.id, ev.id, $2, $21, d.destination, CASE WHEN c.claim THEN 'delivering' ELSE $14 END, $15, now(), now(), now(),
		CASE WHEN c.claim THEN 1 ELSE 0 END,
		CASE WHEN c.claim THEN t.at + d.lease * interval '1 microsecond' END,
		CASE WHEN c.claim THEN t.at END
	FROM ev CROSS JOIN t CROSS JOIN unnest($12::text[], $13::text[], $24::bigint[]) AS d (id, destination, lease)
	CROSS JOIN LATERAL (SELECT d.lease <> 0 AND $14 = 'pending'
		AND NOT EXISTS (SELECT 1 FROM destinations p WHERE p.name = d.destination AND (p.paused OR p.breaker_at IS NOT NULL)) AS claim) AS c
	RETURNING id, status
), vm AS (
	INSERT INTO versions (source, object, version) SELECT $2, $9, $10 FROM ev WHERE $25
	ON CONFLICT (source, object) DO UPDATE SET version = EXCLUDED.version
)
SELECT id, coalesce((SELECT array_agg(dl.id) FROM dl WHERE dl.status = 'delivering'), '{}'), (SELECT at FROM t) FROM ev`

// findOriginal is the event that holds a duplicate's dedup key or, failing
// that, its content key (either may be NULL), other than the events $4
// (those its batch inserted after it, which its insert cannot have met).
// No row means the insert conflicted on neither (the event id itself): an
// error of the item. It takes no lock: the ingest transaction locks no
// event row, so that it cannot wait for another ingest transaction while
// holding one (below).
const findOriginal = `SELECT id FROM (
	SELECT id, 0 AS rank FROM events WHERE source = $1 AND dedup_key = $2 AND id <> ALL($4::text[])
	UNION ALL
	SELECT id, 1 FROM events WHERE source = $1 AND content_key = $3 AND id <> ALL($4::text[])
) AS k ORDER BY rank LIMIT 1`

// countDuplicates raises the duplicate counter of one event by the number
// of its duplicates an ingest found, and records their arrivals (time,
// address, headers) numbered after the counter's old value, as long as the
// number is at most store.MaxArrivals. It runs after the ingest
// transaction committed, one event at a time in id order, so that counters
// never hold one row while waiting for another held by someone waiting for
// them; the arrival's key (event_id, seq) comes from the counter read
// under that row's lock.
//
// A duplicate whose body's SHA-256 ($6) is not that of its event's body
// keeps its hash (a conflict: the same id, another payload); the event's
// is computed once, in the database, unless retention pruned the body.
var countDuplicates = `WITH d AS (
	UPDATE events SET duplicates = duplicates + cardinality($2::timestamptz[]) WHERE id = $1
	RETURNING id, duplicates - cardinality($2::timestamptz[]) AS before,
		CASE WHEN coalesce((SELECT l.body_pruned FROM ledger_entries l WHERE l.event_id = events.id), false) THEN NULL
		ELSE sha256(body) END AS original
)
INSERT INTO arrivals (event_id, seq, received_at, remote_addr, headers, headers_cut, body_sha256)
SELECT d.id, d.before + a.n, a.received_at, a.remote_addr, a.headers, a.cut,
	CASE WHEN d.original IS NULL OR d.original = a.body THEN NULL ELSE encode(a.body, 'hex') END
FROM d, unnest($2::timestamptz[], $3::text[], $4::bytea[], $5::boolean[], $6::bytea[]) WITH ORDINALITY AS a (received_at, remote_addr, headers, cut, body, n)
WHERE d.before + a.n <= ` + strconv.Itoa(store.MaxArrivals)

// ingestTx is one Ingest transaction on one connection. Statements that need
// no answer of their own (BEGIN, releasing the previous item's savepoint)
// ride in the next batch, so a batch of one new event without ordering
// rules costs two round trips: [BEGIN, SAVEPOINT, insert] and [COMMIT].
type ingestTx struct {
	conn    *pgxpool.Conn
	pending []stmt // statements to send ahead of the next batch
	begun   bool   // BEGIN was sent
	done    bool   // committed or rolled back
	dups    []dupArrival
}

// dupArrival is a duplicate's arrival, counted on its original after the
// commit.
type dupArrival struct {
	eventID string
	at      time.Time
	remote  string
	headers []byte
	cut     bool
	body    [sha256.Size]byte // the SHA-256 of the duplicate's body
}

// stmt is a statement that needs no answer of its own.
type stmt struct {
	sql  string
	args []any
}

func (t *ingestTx) batch() *pgx.Batch {
	b := &pgx.Batch{}
	for _, q := range t.pending {
		b.Queue(q.sql, q.args...)
	}
	t.pending = t.pending[:0]
	return b
}

func (t *ingestTx) send(ctx context.Context, b *pgx.Batch) error {
	return t.conn.SendBatch(ctx, b).Close()
}

// genericPlans makes the ingest transaction's statements run on their
// generic plans. insertEvent's many parameters and unnested arrays make
// PostgreSQL's plan cache judge a custom plan cheaper, so it planned the
// statement anew for every event, which about doubled its CPU per event
// (BENCHMARKS.md, stop 24). SET LOCAL ends with the
// transaction: the pool's other statements keep the default. PostgreSQL
// 12 or later.
const genericPlans = `SET LOCAL plan_cache_mode = force_generic_plan`

// rollbackTimeout bounds the rollback of a failed ingest, which runs even
// when the caller's context is done.
const rollbackTimeout = 5 * time.Second

// Ingest implements store.Store: one transaction per batch, pipelined
// (ingestPipelined) unless an item fails or two share an object; then a
// savepoint per item, so one failing item does not fail its batch-mates.
// An item whose fields no store can keep (store.CheckEvent) fails before
// any of this.
func (s *Store) Ingest(ctx context.Context, evs []store.NewEvent) ([]store.IngestResult, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	return store.IngestValid(evs, func(evs []store.NewEvent) ([]store.IngestResult, error) {
		if res, ok, err := s.ingestPipelined(ctx, evs); ok {
			return res, err
		}
		return s.ingestItems(ctx, evs)
	})
}

// ingestItems records evs in one transaction, each item under a savepoint.
func (s *Store) ingestItems(ctx context.Context, evs []store.NewEvent) ([]store.IngestResult, error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, store.Unavailable("ingest", err)
	}
	t := &ingestTx{conn: conn, pending: append([]stmt{{sql: "BEGIN"}, {sql: genericPlans}}, ingestLocks(evs)...)}
	defer func() {
		if t.begun && !t.done {
			// If this fails the connection is left in a transaction and
			// the pool destroys it on Release, which rolls back.
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			conn.Exec(rctx, "ROLLBACK")
			cancel()
		}
		conn.Release()
	}()
	res := make([]store.IngestResult, len(evs))
	// In the batch's order, as the pipelined path inserts: of two events
	// with one key the first is the event, whichever way the batch went
	// (the advisory locks, taken first, already order concurrent
	// transactions).
	for i := range evs {
		r, err := s.ingestItem(ctx, t, &evs[i])
		if err != nil {
			return nil, err
		}
		res[i] = r
	}
	b := t.batch()
	if !t.begun {
		return res, nil // nothing to ingest
	}
	b.Queue("COMMIT")
	if err := t.send(ctx, b); err != nil {
		return nil, store.Unavailable("ingest: commit", err)
	}
	t.done = true
	countDups(ctx, conn, t.dups)
	return res, nil
}

// countDups raises the duplicate counters of the events the ingest found
// duplicated, and records the duplicates' arrivals, after the ingest
// committed: one statement per event, in id order, each its own
// transaction. Counters and arrivals are a record of what came, not the
// event: when this fails the ingest stands and the record stays short.
func countDups(ctx context.Context, conn *pgxpool.Conn, dups []dupArrival) {
	byEvent := map[string][]dupArrival{}
	for _, d := range dups {
		byEvent[d.eventID] = append(byEvent[d.eventID], d)
	}
	for _, id := range slices.Sorted(maps.Keys(byEvent)) {
		ds := byEvent[id]
		at, remote, headers, cut, body := make([]time.Time, len(ds)), make([]string, len(ds)), make([][]byte, len(ds)), make([]bool, len(ds)), make([][]byte, len(ds))
		for i, d := range ds {
			at[i], remote[i], headers[i], cut[i], body[i] = d.at, d.remote, d.headers, d.cut, d.body[:]
		}
		if _, err := conn.Exec(ctx, countDuplicates, id, at, remote, headers, cut, body); err != nil {
			return
		}
	}
}

// markLockClass and keyLockClass are the first keys of the advisory locks
// that stand for version marks and for dedup and content keys (the
// two-key form keeps them apart from the one-key locks of migrations and
// the log).
const (
	markLockClass = 0x61687672 // "ahvr"
	keyLockClass  = 0x61686b79 // "ahky"
)

// lockStmt takes transaction-level advisory locks, one per element of
// the two arrays (class, key), one after the other in the arrays' order:
// the subquery's ORDER BY comes below the call, which runs once per row
// as the rows come up.
const lockStmt = `SELECT count(pg_advisory_xact_lock(l.class, l.key)) FROM (
	SELECT class, key FROM unnest($1::int4[], $2::int4[]) WITH ORDINALITY AS u (class, key, n) ORDER BY n
) AS l`

// ingestLocks is the statement that locks, before anything else, every
// version mark (source, object), dedup key and content key of evs: one
// transaction-level advisory lock each, all in one order (by class, then
// key), kept until the transaction ends (a savepoint's rollback does not
// release them). So no ingest transaction waits for another while holding
// anything the other waits for: an insert only waits on a unique index
// entry of a transaction that shares its key, and that one took the key's
// lock first, as it took every mark. Without them, identical requests on
// several processes deadlocked on "mark, then key" against "key, then mark",
// and one event reaching a source under two dedup keys with
// one content key (a GitHub repository and organization hook) deadlocked
// on the two keys taken crosswise. Two keys whose hashes collide only share
// a lock.
func ingestLocks(evs []store.NewEvent) []stmt {
	type lock struct{ class, key int32 }
	// hash joins parts with NUL bytes (a mark's key is the one earlier
	// versions took, so that processes of both agree during an upgrade).
	hash := func(parts ...string) int32 {
		h := fnv.New32a()
		for i, p := range parts {
			if i > 0 {
				h.Write([]byte{0})
			}
			h.Write([]byte(p))
		}
		return int32(h.Sum32())
	}
	var locks []lock
	for i := range evs {
		ev := &evs[i].Event
		if ev.Object != "" {
			locks = append(locks, lock{markLockClass, hash(ev.Source, ev.Object)})
		}
		if ev.DedupKey != "" {
			locks = append(locks, lock{keyLockClass, hash(ev.Source, "d", ev.DedupKey)})
		}
		if c := evs[i].ContentKey; c != "" {
			locks = append(locks, lock{keyLockClass, hash(ev.Source, "c", c)})
		}
	}
	slices.SortFunc(locks, func(a, b lock) int { return cmp.Or(cmp.Compare(a.class, b.class), cmp.Compare(a.key, b.key)) })
	locks = slices.Compact(locks)
	if len(locks) == 0 {
		return nil
	}
	classes, keys := make([]int32, len(locks)), make([]int32, len(locks))
	for i, l := range locks {
		classes[i], keys[i] = l.class, l.key
	}
	return []stmt{{lockStmt, []any{classes, keys}}}
}

// ingestItem records one item under the savepoint "item". An error of the
// item is rolled back to the savepoint and reported in its result; an error
// of the connection or the server fails the batch.
func (s *Store) ingestItem(ctx context.Context, t *ingestTx, ne *store.NewEvent) (store.IngestResult, error) {
	headers, err := store.EncodeHeader(ne.Event.Header)
	if err != nil {
		return store.IngestResult{Err: fmt.Errorf("event %s: headers: %w: %w", ne.Event.ID, anyhook.ErrInvalid, err)}, nil
	}
	r, err := s.ingestOne(ctx, t, ne, headers)
	if err == nil {
		return r, nil
	}
	if !itemLevel(err) {
		return store.IngestResult{}, store.Unavailable("ingest", err)
	}
	if _, rerr := t.conn.Exec(ctx, "ROLLBACK TO SAVEPOINT item"); rerr != nil {
		return store.IngestResult{}, store.Unavailable("ingest", errors.Join(err, rerr))
	}
	return store.IngestResult{Err: itemError(ne.Event.ID, err)}, nil
}

// itemError classifies the failure of one item: bad data (a NUL byte or
// invalid UTF-8 in a text field) or data past a limit (an index row over
// the btree's maximum) is invalid, as retrying cannot change it; a
// deadlock or lock timeout is transient, so ingest answers 503 and the
// provider retries. store.CheckEvent keeps the fields a request controls
// from reaching either of the first two.
func itemError(id string, err error) error {
	switch state := sqlState(err); {
	case len(state) >= 2 && (state[:2] == "22" || state[:2] == "54"):
		return fmt.Errorf("event %s: %w: %w", id, anyhook.ErrInvalid, err)
	case len(state) >= 2 && (state[:2] == "40" || state[:2] == "55"):
		return fmt.Errorf("event %s: %w: %w", id, anyhook.ErrUnavailable, err)
	}
	return fmt.Errorf("event %s: %w", id, err)
}

func (s *Store) ingestOne(ctx context.Context, t *ingestTx, ne *store.NewEvent, headers []byte) (store.IngestResult, error) {
	ev := &ne.Event
	b := t.batch()
	if t.begun {
		// The previous item's savepoint, whatever its fate, is done with.
		b.Queue("RELEASE SAVEPOINT item")
	}
	t.begun = true
	b.Queue("SAVEPOINT item")

	stale := false
	if ev.Object != "" {
		// The high-water mark of (source, object): make sure its row
		// exists, then read it. The mark's advisory lock, taken at the
		// start of the transaction (ingestLocks), makes concurrent events
		// of one object take turns, so the mark only grows.
		var inserted bool
		var mark string
		b.Queue(`INSERT INTO versions (source, object, version) VALUES ($1, $2, $3) ON CONFLICT (source, object) DO NOTHING`,
			ev.Source, ev.Object, ev.Version).Exec(func(ct pgconn.CommandTag) error {
			inserted = ct.RowsAffected() == 1
			return nil
		})
		b.Queue(`SELECT version FROM versions WHERE source = $1 AND object = $2`, ev.Source, ev.Object).
			QueryRow(func(row pgx.Row) error { return row.Scan(&mark) })
		if err := t.send(ctx, b); err != nil {
			return store.IngestResult{}, err
		}
		b = &pgx.Batch{}
		if !inserted {
			switch c := store.CompareVersions(ev.Version, mark); {
			case c < 0:
				stale = true
			case c > 0:
				b.Queue(`UPDATE versions SET version = $3 WHERE source = $1 AND object = $2`, ev.Source, ev.Object, ev.Version)
			}
		}
	}

	ids, leases := s.deliveryArgs(ne)
	isNew := false
	var claimed []string
	var now time.Time
	b.Queue(insertEvent, insertArgs(ne, headers, stale, ids, leases, false)...).QueryRow(func(row pgx.Row) error {
		var id string
		err := row.Scan(&id, &claimed, &now)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil
		}
		isNew = err == nil
		return err
	})
	if err := t.send(ctx, b); err != nil {
		return store.IngestResult{}, err
	}
	if isNew {
		return newResult(ne, stale, ids, claimed, now), nil
	}

	// A duplicate: undo the version mark this item may have moved, and
	// find the original (Ingest counts it, and records its arrival, there
	// after the commit).
	var id string
	b = &pgx.Batch{}
	b.Queue("ROLLBACK TO SAVEPOINT item")
	b.Queue(findOriginal, ev.Source, sqlstore.Nullable(ev.DedupKey), sqlstore.Nullable(ne.ContentKey), []string{}).QueryRow(func(row pgx.Row) error {
		err := row.Scan(&id)
		if errors.Is(err, pgx.ErrNoRows) {
			err = fmt.Errorf("it clashes with a stored event on neither dedup key: %w", err)
		}
		return err
	})
	if err := t.send(ctx, b); err != nil {
		return store.IngestResult{}, err
	}
	t.dups = arrived(t.dups, ne, id, headers)
	return store.IngestResult{ID: id, Duplicate: true}, nil
}

// newResult is the result of ne recorded as a new event: ids are its
// deliveries' ids (in ne.Destinations' order), claimed those of them
// created claimed, at now (when the statement claimed them).
func newResult(ne *store.NewEvent, stale bool, ids, claimed []string, now time.Time) store.IngestResult {
	ev := &ne.Event
	r := store.IngestResult{ID: ev.ID, Stale: stale}
	for i, id := range ids {
		if !slices.Contains(claimed, id) {
			continue
		}
		c := store.Claim{Event: *ev}
		c.Event.Stale = stale
		c.Delivery = anyhook.Delivery{ID: id, EventID: ev.ID, Destination: ne.Destinations[i], Status: anyhook.StatusDelivering,
			Stale: stale && !ne.StaleSkip, AttemptCount: 1, NextAttemptAt: now, LeaseUntil: now.Add(ne.Lease[i]),
			ClaimedAt: now, CreatedAt: now, UpdatedAt: now}
		r.Claims = append(r.Claims, c)
	}
	return r
}

// deliveryArgs are the ids of ne's deliveries and their leases (0: not
// claimed at ingest), in microseconds, for insertEvent.
func (s *Store) deliveryArgs(ne *store.NewEvent) (ids []string, leases []int64) {
	ids = make([]string, len(ne.Destinations))
	leases = make([]int64, len(ne.Destinations))
	for i := range ids {
		ids[i] = s.newID()
		if i < len(ne.Lease) {
			leases[i] = micros(ne.Lease[i])
		}
	}
	return ids, leases
}

// createdStatus is the status ne's deliveries are created in, unless
// claimed at ingest: skipped for a stale event its source skips, else
// pending.
func createdStatus(ne *store.NewEvent, stale bool) anyhook.DeliveryStatus {
	if stale && ne.StaleSkip {
		return anyhook.StatusSkipped
	}
	return anyhook.StatusPending
}

// insertArgs are insertEvent's arguments for ne; raise sets the version
// mark to its version if it is new.
func insertArgs(ne *store.NewEvent, headers []byte, stale bool, ids []string, leases []int64, raise bool) []any {
	ev := &ne.Event
	status := createdStatus(ne, stale)
	vm, vs, vk := store.VerificationArgs(ev.Verification)
	return []any{
		ev.ID, ev.Source, sqlstore.Nullable(ev.DedupKey), ev.ReceivedAt, ev.Method, ev.Path, headers, sqlstore.NonNil(ev.Body),
		sqlstore.Nullable(ev.Object), sqlstore.Nullable(ev.Version), stale,
		ids, ne.Destinations, string(status), stale && !ne.StaleSkip, sqlstore.Nullable(ne.ContentKey),
		sqlstore.Nullable(ev.RemoteAddr), vm, vs, vk, sqlstore.Nullable(ev.Type), store.NotRoutedArg(ev.NotRouted), store.OriginArg(ev.Origin),
		leases, raise,
	}
}

// arrived adds the arrival of ne, a duplicate of event id, to dups, for
// Ingest to count after the commit. The headers are those already encoded
// for the insert, unless they must be cut. A backfilled copy is not an
// arrival: the provider did not send it again.
func arrived(dups []dupArrival, ne *store.NewEvent, id string, headers []byte) []dupArrival {
	ev := &ne.Event
	if store.OriginArg(ev.Origin) != nil {
		return dups
	}
	arrival, cut := headers, false
	if len(arrival) > store.MaxArrivalHeader {
		arrival, cut = store.ArrivalHeader(ev.Header)
	}
	return append(dups, dupArrival{eventID: id, at: ev.ReceivedAt, remote: ev.RemoteAddr, headers: arrival, cut: cut, body: sha256.Sum256(ev.Body)})
}
