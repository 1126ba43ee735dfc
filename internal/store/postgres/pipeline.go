package postgres

import (
	"context"
	"errors"
	"fmt"
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

// objectKey is a version mark's key.
type objectKey struct{ source, object string }

// ingestPipelined records evs in two round trips (issue 15, "PostgreSQL
// round trips"): [BEGIN, the advisory locks, every item's insert
// (insertEvent, which also raises the marks and claims at ingest)], then
// [the search for the original of each item that inserted nothing,
// COMMIT]; three when an event has an object (the version marks are read
// first, after the locks). Without savepoints: it answers ok false, having
// changed nothing, when an item fails or when two items share an object
// (the second's staleness depends on whether the first was new) — Ingest
// then records the batch item by item. (Looking for every item's original
// in the first round trip would save the second but cost PostgreSQL a
// statement per new event, and its CPU is what bounds it: measured.)
func (s *Store) ingestPipelined(ctx context.Context, evs []store.NewEvent) (res []store.IngestResult, ok bool, err error) {
	var keys []objectKey
	seen := map[objectKey]bool{}
	headers := make([][]byte, len(evs))
	for i := range evs {
		ev := &evs[i].Event
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
			for rows.Next() {
				var k objectKey
				var v string
				if err := rows.Scan(&k.source, &k.object, &v); err != nil {
					return err
				}
				marks[k] = v
			}
			return rows.Err()
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
	for i := range evs {
		ne, it := &evs[i], &items[i]
		ev := &ne.Event
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
		var leases []int64
		it.ids, leases = s.deliveryArgs(ne)
		b.Queue(insertEvent, insertArgs(ne, headers[i], it.stale, it.ids, leases, raise)...).QueryRow(func(row pgx.Row) error {
			var id string
			err := row.Scan(&id, &it.claimed, &it.now)
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			it.isNew = err == nil
			return err
		})
	}
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		return fail(err)
	}
	// The originals of the items that inserted nothing, in statements of
	// their own, then COMMIT.
	b = &pgx.Batch{}
	for i := range evs {
		ne, it := &evs[i], &items[i]
		if it.isNew || (ne.Event.DedupKey == "" && ne.ContentKey == "") {
			continue
		}
		b.Queue(sameOriginal, ne.Event.Source, sqlstore.Nullable(ne.Event.DedupKey), sqlstore.Nullable(ne.ContentKey)).QueryRow(func(row pgx.Row) error {
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
