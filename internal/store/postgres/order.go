package postgres

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// orderLockClass is the first key of the advisory locks that stand for
// the queue of one (destination, source, object) (see ingestLocks).
const orderLockClass = 0x61686f72 // "ahor"

// orderCandidates selects due pending deliveries of a destination ($1)
// whose object is not blocked (no delivery of it to the destination is
// delivering, held or waiting for a retry), oldest due first, at most $2,
// with each one's source and object ("" when none). The blocked objects
// are read once, from the destination's few deliveries in flight, held or
// waiting, not once per candidate through the object's whole queue. Of
// the candidates with an object it keeps the ones whose queue's advisory
// lock it takes without waiting: another claimer holds the others' (the
// LIMIT subquery is not flattened, so only the candidates are locked).
// The lock is held until the transaction ends, so the queues read after
// it (a later statement, a later snapshot) show every claim committed
// before, and no other claimer claims from them until this one commits.
var orderCandidates = orderCandidatesSQL(`AND NOT EXISTS (SELECT 1 FROM destinations WHERE name = $1 AND ` + sqlstore.HeldBack("") + `)`)

// probeCandidates is orderCandidates for a probe (Store.ClaimProbe), which
// has checked the destination's row itself.
var probeCandidates = orderCandidatesSQL("")

// orderCandidatesSQL is orderCandidates on condition held.
func orderCandidatesSQL(held string) string {
	return `WITH blocked AS MATERIALIZED (
	SELECT DISTINCT be.source, be.object FROM deliveries b JOIN events be ON be.id = b.event_id
	WHERE b.destination = $1 AND be.object IS NOT NULL
		AND (b.status IN ('delivering', 'held') OR (b.status = 'pending' AND b.next_attempt_at > now())))
SELECT c.id, c.source, coalesce(c.object, '') FROM (
	SELECT d.id, d.next_attempt_at, e.source, e.object FROM deliveries d JOIN events e ON e.id = d.event_id
	WHERE d.destination = $1 AND d.status = 'pending' AND d.next_attempt_at <= now()
		` + held + `
		AND (e.object IS NULL OR NOT EXISTS (SELECT 1 FROM blocked k WHERE k.source = e.source AND k.object = e.object))
	ORDER BY d.next_attempt_at LIMIT $2) c
WHERE c.object IS NULL OR pg_try_advisory_xact_lock(` + strconv.Itoa(orderLockClass) + `, hashtext($1 || chr(1) || c.source || chr(1) || c.object))
ORDER BY c.next_attempt_at, c.id`
}

// claimByID claims the deliveries $2 of destination $1 that are still
// pending.
var claimByID = claimSQL(`SELECT id FROM deliveries WHERE destination = $1 AND id = ANY($2::text[]) AND status = 'pending' FOR UPDATE SKIP LOCKED`)

// ClaimInOrder implements store.Store.
func (s *Store) ClaimInOrder(ctx context.Context, destination string, limit int, lease time.Duration) ([]store.Claim, error) {
	if limit <= 0 {
		return nil, nil
	}
	tx, err := s.pool.Begin(ctx) // rolled back unless committed, as Claim's
	if err != nil {
		return nil, store.Unavailable("claim", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	claims, err := claimInOrderTx(ctx, tx, orderCandidates, destination, limit, lease)
	if err != nil || len(claims) == 0 {
		return nil, err
	}
	if err := commit(ctx, tx); err != nil {
		return nil, store.Unavailable("claim", err)
	}
	return claims, nil
}

// claimInOrderTx claims, in tx, up to limit of the deliveries that the
// candidates query cands (orderCandidates, probeCandidates) selects and
// that head their object's queue.
func claimInOrderTx(ctx context.Context, tx pgx.Tx, cands, destination string, limit int, lease time.Duration) ([]store.Claim, error) {
	rows, err := tx.Query(ctx, cands, destination, store.OrderCandidates(limit))
	if err != nil {
		return nil, store.Unavailable("claim", err)
	}
	cs, err := collect(rows, sqlstore.ScanOrderCandidate)
	if err != nil {
		return nil, store.Unavailable("claim", err)
	}
	ids, err := store.ToClaim(cs, limit, func(objects []string) ([]store.Queued, error) {
		rows, err := tx.Query(ctx, sqlstore.QueuedQuery(sqlstore.Postgres, len(objects)), objects)
		if err != nil {
			return nil, err
		}
		return collect(rows, sqlstore.ScanQueued)
	})
	if err != nil {
		return nil, store.Unavailable("claim", err)
	}
	if len(ids) == 0 {
		return nil, nil
	}
	return claimRows(ctx, tx, claimByID, destination, ids, micros(lease))
}

// WaitsBehind implements store.Store.
func (s *Store) WaitsBehind(ctx context.Context, ids []string) (map[string]store.Blocker, error) {
	if len(ids) == 0 {
		return map[string]store.Blocker{}, nil
	}
	rows, err := s.pool.Query(ctx, sqlstore.QueuedQuery(sqlstore.Postgres, len(ids)), ids)
	if err != nil {
		return nil, store.Unavailable("waits behind", err)
	}
	qs, err := collect(rows, sqlstore.ScanQueued)
	if err != nil {
		return nil, store.Unavailable("waits behind", err)
	}
	return store.Behind(qs), nil
}
