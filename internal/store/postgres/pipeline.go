package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// readMarks reads the version marks of the (source, object) pairs given as
// two parallel arrays.
const readMarks = `SELECT v.source, v.object, v.version FROM versions v
	JOIN unnest($1::text[], $2::text[]) AS k (source, object) ON v.source = k.source AND v.object = k.object`

// sameOriginal finds the event that holds an item's dedup key or content
// key, as findOriginal, in a statement of its own (so with a snapshot
// taken after the insert before it waited for a concurrent inserter of
// the same key to commit). For a new event it finds the event itself.
const sameOriginal = findOriginal

// insertEvents is insertEvent for a whole batch in one statement (issue
// 15): PostgreSQL plans and starts one insert per table however many
// events there are. The events come as parallel arrays, one element each
// ($1–$22, in the batch's order, which is the order they are inserted in:
// of two with one dedup key the first is the event), their deliveries as
// four more, one element per delivery ($23–$26: its event's id, its id,
// destination and lease). It returns a row per event it inserted: the
// event's id, the ids of its deliveries created claimed, and when.
const insertEvents = `WITH t AS (SELECT clock_timestamp() AS at), i AS (
	SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::text[], $6::text[], $7::bytea[], $8::bytea[],
		$9::text[], $10::text[], $11::boolean[], $12::text[], $13::text[], $14::text[], $15::text[], $16::integer[],
		$17::text[], $18::text[], $19::text[], $20::text[], $21::boolean[], $22::boolean[])
	WITH ORDINALITY AS i (id, source, dedup_key, received_at, method, path, headers, body, object, version, stale, content_key,
		remote_addr, verify_method, verify_scheme, verify_secret, type, not_routed, origin, status, delivery_stale, raise, n)
), ev AS (
	INSERT INTO events (id, source, dedup_key, received_at, method, path, headers, body, object, version, stale, content_key,
		remote_addr, verify_method, verify_scheme, verify_secret, type, not_routed, origin)
	SELECT id, source, dedup_key, received_at, method, path, headers, body, object, version, stale, content_key,
		remote_addr, verify_method, verify_scheme, verify_secret, type, not_routed, origin
	FROM i ORDER BY n
	ON CONFLICT DO NOTHING
	RETURNING id
), dl AS (
	INSERT INTO deliveries (id, event_id, source, type, destination, status, stale, next_attempt_at, created_at, updated_at,
		attempt_count, lease_until, claimed_at)
	SELECT d.id, ev.id, i.source, i.type, d.destination, CASE WHEN c.claim THEN 'delivering' ELSE i.status END, i.delivery_stale, now(), now(), now(),
		CASE WHEN c.claim THEN 1 ELSE 0 END,
		CASE WHEN c.claim THEN t.at + d.lease * interval '1 microsecond' END,
		CASE WHEN c.claim THEN t.at END
	FROM unnest($23::text[], $24::text[], $25::text[], $26::bigint[]) AS d (event_id, id, destination, lease)
	JOIN ev ON ev.id = d.event_id JOIN i ON i.id = d.event_id CROSS JOIN t
	CROSS JOIN LATERAL (SELECT d.lease <> 0 AND i.status = 'pending'
		AND NOT EXISTS (SELECT 1 FROM destinations p WHERE p.name = d.destination AND (p.paused OR p.breaker_at IS NOT NULL)) AS claim) AS c
	RETURNING id, event_id, status
), vm AS (
	INSERT INTO versions (source, object, version) SELECT i.source, i.object, i.version FROM ev JOIN i ON i.id = ev.id WHERE i.raise
	ON CONFLICT (source, object) DO UPDATE SET version = EXCLUDED.version
)
SELECT ev.id, coalesce(c.ids, '{}'), (SELECT at FROM t) FROM ev
LEFT JOIN (SELECT event_id, array_agg(id) AS ids FROM dl WHERE status = 'delivering' GROUP BY event_id) AS c ON c.event_id = ev.id`

// statementBytes is how many bytes of bodies and headers one insertEvents
// carries at most, unless one event alone has more. PostgreSQL and pgx
// take at most 1 GiB in one message, and a group commit of 256 events at
// the default max_body of 10 MiB would carry 2.5 GiB.
const statementBytes = 64 << 20

// eventColumns are insertEvents' arguments, a slice per parameter.
type eventColumns struct {
	ids, sources, methods, paths, statuses                  []string
	dedupKeys, objects, versions, contentKeys, remoteAddrs  []*string
	verifyMethods, verifySchemes, types, notRouted, origins []*string
	receivedAt                                              []time.Time
	headers, bodies                                         [][]byte
	stale, deliveryStale, raise                             []bool
	verifySecrets                                           []*int32
	deliveryEvents, deliveryIDs, deliveryDests              []string
	leases                                                  []int64
}

// add appends ne, its encoded headers, its staleness, whether it raises its
// mark and its deliveries' ids and leases.
func (c *eventColumns) add(ne *store.NewEvent, headers []byte, stale, raise bool, ids []string, leases []int64) {
	ev := &ne.Event
	status := createdStatus(ne, stale)
	var secret *int32
	if ev.Verification.Method != "" && ev.Verification.Secret >= 0 {
		secret = new(int32(ev.Verification.Secret))
	}
	var method, scheme *string
	if ev.Verification.Method != "" {
		method, scheme = new(ev.Verification.Method), new(ev.Verification.Scheme)
	}
	var notRouted *string
	if len(ev.NotRouted) > 0 {
		notRouted = new(strings.Join(ev.NotRouted, ","))
	}
	var origin *string
	if store.OriginArg(ev.Origin) != nil {
		origin = new(ev.Origin)
	}
	c.ids, c.sources, c.methods, c.paths, c.statuses = append(c.ids, ev.ID), append(c.sources, ev.Source), append(c.methods, ev.Method), append(c.paths, ev.Path), append(c.statuses, string(status))
	c.dedupKeys, c.objects, c.versions = append(c.dedupKeys, nullable(ev.DedupKey)), append(c.objects, nullable(ev.Object)), append(c.versions, nullable(ev.Version))
	c.contentKeys, c.remoteAddrs, c.types = append(c.contentKeys, nullable(ne.ContentKey)), append(c.remoteAddrs, nullable(ev.RemoteAddr)), append(c.types, nullable(ev.Type))
	c.verifyMethods, c.verifySchemes, c.verifySecrets = append(c.verifyMethods, method), append(c.verifySchemes, scheme), append(c.verifySecrets, secret)
	c.notRouted, c.origins = append(c.notRouted, notRouted), append(c.origins, origin)
	c.receivedAt, c.headers, c.bodies = append(c.receivedAt, ev.ReceivedAt), append(c.headers, headers), append(c.bodies, sqlstore.NonNil(ev.Body))
	c.stale, c.deliveryStale, c.raise = append(c.stale, stale), append(c.deliveryStale, stale && !ne.StaleSkip), append(c.raise, raise)
	for j, id := range ids {
		c.deliveryEvents, c.deliveryIDs = append(c.deliveryEvents, ev.ID), append(c.deliveryIDs, id)
		c.deliveryDests, c.leases = append(c.deliveryDests, ne.Destinations[j]), append(c.leases, leases[j])
	}
}

func (c *eventColumns) args() []any {
	return []any{c.ids, c.sources, c.dedupKeys, c.receivedAt, c.methods, c.paths, c.headers, c.bodies,
		c.objects, c.versions, c.stale, c.contentKeys, c.remoteAddrs, c.verifyMethods, c.verifySchemes, c.verifySecrets,
		c.types, c.notRouted, c.origins, c.statuses, c.deliveryStale, c.raise,
		c.deliveryEvents, c.deliveryIDs, c.deliveryDests, c.leases}
}

// nullable is s as a nullable text: nil when empty.
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// objectKey is a version mark's key.
type objectKey struct{ source, object string }

// ingestPipelined records evs in two round trips: [BEGIN, the advisory
// locks, one insert of every item (insertEvents, which also raises the
// marks and claims at ingest)], then
// [the search for the original of each item that inserted nothing,
// COMMIT]; three when an event has an object (the version marks are read
// first, after the locks). Without savepoints: it answers ok false, having
// changed nothing, when an item fails, when two items share an object
// (the second's staleness depends on whether the first was new) or an
// event id (the second is an error of its own) — Ingest
// then records the batch item by item. (Looking for every item's original
// in the first round trip would save the second but cost PostgreSQL a
// statement per new event, and its CPU is what bounds it: measured.)
func (s *Store) ingestPipelined(ctx context.Context, evs []store.NewEvent) (res []store.IngestResult, ok bool, err error) {
	var keys []objectKey
	seen := map[objectKey]bool{}
	ids := make(map[string]bool, len(evs))
	headers := make([][]byte, len(evs))
	for i := range evs {
		ev := &evs[i].Event
		if ids[ev.ID] {
			return nil, false, nil // the second clashes on its id: the item-by-item path reports it
		}
		ids[ev.ID] = true
		if ev.Object != "" {
			k := objectKey{ev.Source, ev.Object}
			if seen[k] {
				return nil, false, nil
			}
			seen[k] = true
			keys = append(keys, k)
		}
		if headers[i], err = store.EncodeHeader(ev.Header); err != nil {
			return nil, false, nil // the item-by-item path reports it
		}
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, true, store.Unavailable("ingest", err)
	}
	begun, done := false, false
	defer func() {
		if begun && !done {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
			conn.Exec(rctx, "ROLLBACK")
			cancel()
		}
		conn.Release()
	}()
	// fail ends the attempt: an item's error makes the caller go item by
	// item, anything else fails the batch.
	fail := func(err error) ([]store.IngestResult, bool, error) {
		if itemLevel(err) {
			return nil, false, nil
		}
		return nil, true, store.Unavailable("ingest", err)
	}

	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(genericPlans)
	for _, l := range ingestLocks(evs) {
		b.Queue(l.sql, l.args...)
	}
	begun = true
	marks := map[objectKey]string{}
	if len(keys) > 0 {
		sources, objects := make([]string, len(keys)), make([]string, len(keys))
		for i, k := range keys {
			sources[i], objects[i] = k.source, k.object
		}
		b.Queue(readMarks, sources, objects).Query(func(rows pgx.Rows) error {
			type mark struct {
				key     objectKey
				version string
			}
			ms, err := collect(rows, func(sc scanner) (mark, error) {
				var m mark
				return m, sc.Scan(&m.key.source, &m.key.object, &m.version)
			})
			for _, m := range ms {
				marks[m.key] = m.version
			}
			return err
		})
		if err := conn.SendBatch(ctx, b).Close(); err != nil {
			return fail(err)
		}
		b = &pgx.Batch{}
	}

	type item struct {
		stale        bool
		ids, claimed []string
		isNew        bool
		original     string
		now          time.Time
	}
	items := make([]item, len(evs))
	inserted := make(map[string]*item, len(evs))
	type insertedRow struct {
		id      string
		claimed []string
		now     time.Time
	}
	scan := func(rows pgx.Rows) error {
		rs, err := collect(rows, func(sc scanner) (insertedRow, error) {
			var r insertedRow
			return r, sc.Scan(&r.id, &r.claimed, &r.now)
		})
		if err != nil {
			return err
		}
		for _, r := range rs {
			it := inserted[r.id]
			if it == nil {
				return fmt.Errorf("ingest: the insert returned an event not in the batch: %s", r.id)
			}
			it.isNew, it.claimed, it.now = true, r.claimed, r.now
		}
		return nil
	}
	// One statement per s.statementBytes of bodies and headers (at least
	// one event each), in the batch's order: PostgreSQL takes a message
	// of at most 1 GiB, and a later statement of the transaction sees the
	// earlier ones' rows, so the first of two events with one key is
	// still the event.
	var cols eventColumns
	size := 0
	for i := range evs {
		ne, it := &evs[i], &items[i]
		ev := &ne.Event
		inserted[ev.ID] = it
		raise := false
		if ev.Object != "" {
			mark, ok := marks[objectKey{ev.Source, ev.Object}]
			switch c := store.CompareVersions(ev.Version, mark); {
			case !ok || c > 0:
				raise = true
			case c < 0:
				it.stale = true
			}
		}
		n := len(ev.Body) + len(headers[i])
		if len(cols.ids) > 0 && size+n > cmp.Or(s.statementBytes, statementBytes) {
			b.Queue(insertEvents, cols.args()...).Query(scan)
			cols, size = eventColumns{}, 0
		}
		var leases []int64
		it.ids, leases = s.deliveryArgs(ne)
		cols.add(ne, headers[i], it.stale, raise, it.ids, leases)
		size += n
	}
	b.Queue(insertEvents, cols.args()...).Query(scan)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return fail(err)
	}
	// The originals of the items that inserted nothing, in statements of
	// their own, then COMMIT. An item's insert met only the events stored
	// before the batch and those the batch inserted before it: a new
	// event later in the batch with one of its keys is not its original
	// (A and B share a content key, B and C a dedup key: B is A's
	// duplicate, and C is new because B was not).
	type keyOf struct{ source, kind, key string }
	newAt := map[keyOf][]int{} // the positions of the new events with a key
	keysOf := func(ne *store.NewEvent) []keyOf {
		var ks []keyOf
		if ne.Event.DedupKey != "" {
			ks = append(ks, keyOf{ne.Event.Source, "d", ne.Event.DedupKey})
		}
		if ne.ContentKey != "" {
			ks = append(ks, keyOf{ne.Event.Source, "c", ne.ContentKey})
		}
		return ks
	}
	for i := range evs {
		if items[i].isNew {
			for _, k := range keysOf(&evs[i]) {
				newAt[k] = append(newAt[k], i)
			}
		}
	}
	b = &pgx.Batch{}
	for i := range evs {
		ne, it := &evs[i], &items[i]
		if it.isNew || (ne.Event.DedupKey == "" && ne.ContentKey == "") {
			continue
		}
		later := []string{}
		for _, k := range keysOf(ne) {
			for _, j := range newAt[k] {
				if j > i {
					later = append(later, evs[j].Event.ID)
				}
			}
		}
		b.Queue(sameOriginal, ne.Event.Source, sqlstore.Nullable(ne.Event.DedupKey), sqlstore.Nullable(ne.ContentKey), later).QueryRow(func(row pgx.Row) error {
			err := row.Scan(&it.original)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return err
		})
	}
	b.Queue("COMMIT")
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return fail(err)
	}
	done = true

	res = make([]store.IngestResult, len(evs))
	var dups []dupArrival
	for i := range evs {
		ne, it := &evs[i], &items[i]
		switch {
		case it.isNew:
			res[i] = newResult(ne, it.stale, it.ids, it.claimed, it.now)
		case it.original != "":
			res[i] = store.IngestResult{ID: it.original, Duplicate: true}
			dups = arrived(dups, ne, it.original, headers[i])
		default:
			// Nothing was written for it: its insert met a clash on
			// neither dedup key, so on the event id itself.
			res[i] = store.IngestResult{Err: itemError(ne.Event.ID, fmt.Errorf("it clashes with a stored event on neither dedup key"))}
		}
	}
	countDups(ctx, conn, dups)
	return res, true, nil
}
