package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// claimDeliveries leases due pending deliveries of one destination and
// returns them with their events, in one statement. SKIP LOCKED lets the
// workers of every process claim from one queue at once without waiting
// for each other or claiming a row twice; the lease is the database clock
// plus the caller's duration.
var claimDeliveries = claimSQL(dueDeliveries(`AND NOT EXISTS (SELECT 1 FROM destinations WHERE name = $1 AND ` + sqlstore.HeldBack("") + `)`))

// probeDeliveries is claimDeliveries for a probe (Store.ClaimProbe), which
// has checked the destination's row itself.
var probeDeliveries = claimSQL(dueDeliveries(""))

// dueDeliveries selects the ids of destination $1's due pending
// deliveries, at most $2, oldest due first, on condition held.
func dueDeliveries(held string) string {
	return `SELECT id FROM deliveries
		WHERE destination = $1 AND status = 'pending' AND next_attempt_at <= now()
			` + held + `
		ORDER BY next_attempt_at
		LIMIT $2
		FOR UPDATE SKIP LOCKED`
}

// claimSQL is the statement that claims the deliveries ids selects, with
// the lease $3, and returns them with their events.
func claimSQL(ids string) string {
	return `WITH claimed AS (
	UPDATE deliveries
	SET status = 'delivering', attempt_count = attempt_count + 1,
		lease_until = now() + $3::bigint * interval '1 microsecond', updated_at = now(), claimed_at = now()
	WHERE id IN (` + ids + `)
	RETURNING *
)
SELECT ` + sqlstore.DeliveryColumns("c.") + `, ` + sqlstore.EventColumns("e.") + `, coalesce(l.body_pruned, false)
FROM claimed c JOIN events e ON e.id = c.event_id LEFT JOIN ledger_entries l ON l.event_id = c.event_id
ORDER BY c.next_attempt_at, c.id`
}

// Claim implements store.Store.
func (s *Store) Claim(ctx context.Context, destination string, limit int, lease time.Duration) ([]store.Claim, error) {
	if limit <= 0 {
		return nil, nil
	}
	// In an explicit transaction, so that claims the caller never got (the
	// read failed, the context ended) are rolled back rather than left to
	// expire (and, under hold, be held although nothing was sent).
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return nil, store.Unavailable("claim", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	claims, err := claimRows(ctx, tx, claimDeliveries, destination, limit, micros(lease))
	if err != nil {
		return nil, err
	}
	if err := commit(ctx, tx); err != nil {
		return nil, store.Unavailable("claim", err)
	}
	return claims, nil
}

// claimRows runs a claimSQL statement and reads its claims.
func claimRows(ctx context.Context, tx pgx.Tx, q string, args ...any) ([]store.Claim, error) {
	rows, err := tx.Query(ctx, q, args...)
	if err != nil {
		return nil, store.Unavailable("claim", err)
	}
	claims, err := collect(rows, func(sc scanner) (store.Claim, error) {
		var c store.Claim
		dd, ddone := sqlstore.DeliveryDest(&c.Delivery)
		ed, edone := sqlstore.EventDest(&c.Event)
		if err := sc.Scan(append(append(dd, ed...), &c.Event.BodyPruned)...); err != nil {
			return c, err
		}
		ddone()
		return c, edone()
	})
	if err != nil {
		return nil, store.Unavailable("claim", err)
	}
	return claims, nil
}

// finishDeliveries records a batch of outcomes in one statement: each
// outcome whose attempt still holds its claim moves its delivery and adds
// its attempt row; the others change nothing. It answers the ids it
// recorded. The outcomes come as parallel arrays, one element each, and
// no delivery twice (Finish sees to it).
const finishDeliveries = `WITH o AS (
	SELECT * FROM unnest($1::text[], $2::integer[], $3::text[], $4::bigint[], $5::timestamptz[], $6::bigint[],
		$7::integer[], $8::text[], $9::bytea[], $10::text[])
		AS o (id, attempt, status, retry_us, started_at, duration_us, status_code, error, response_body, outcome)
), u AS (
	UPDATE deliveries d
	SET status = o.status, next_attempt_at = now() + o.retry_us * interval '1 microsecond', lease_until = NULL, updated_at = now()
	FROM o
	WHERE d.id = o.id AND d.attempt_count = o.attempt AND d.status = 'delivering'
	RETURNING d.id, o.attempt, o.started_at, o.duration_us, o.status_code, o.error, o.response_body, o.outcome
), a AS (
	INSERT INTO attempts (delivery_id, number, started_at, duration_us, status_code, error, response_body, outcome)
	SELECT id, attempt, started_at, duration_us, status_code, error, response_body, outcome FROM u
	ON CONFLICT (delivery_id, number) DO NOTHING
)
SELECT id FROM u`

// Finish implements store.Store: one statement for the whole batch, so
// PostgreSQL plans and starts one update and one insert however many
// outcomes there are. The outcomes go in id order; of two for
// one delivery, the second is lost, as it would be a statement later.
func (s *Store) Finish(ctx context.Context, outs []store.Outcome) ([]string, error) {
	if len(outs) == 0 {
		return nil, nil
	}
	if err := store.CheckOutcomes(outs); err != nil {
		return nil, err
	}
	outs = slices.SortedStableFunc(slices.Values(outs), func(a, b store.Outcome) int { return strings.Compare(a.DeliveryID, b.DeliveryID) })
	n := len(outs)
	var (
		ids, statuses, errs = make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
		attempts, codes     = make([]int32, 0, n), make([]int32, 0, n)
		retries, durations  = make([]int64, 0, n), make([]int64, 0, n)
		started             = make([]time.Time, 0, n)
		bodies              = make([][]byte, 0, n)
		kinds               = make([]string, 0, n)
		lost                []string
	)
	for i, o := range outs {
		if i > 0 && o.DeliveryID == outs[i-1].DeliveryID {
			// A second outcome for one delivery finds the claim
			// already answered, as it would one statement later.
			lost = append(lost, o.DeliveryID)
			continue
		}
		var retryIn time.Duration
		if o.Status == anyhook.StatusPending {
			retryIn = o.RetryIn
		}
		r := o.Result
		ids, attempts, statuses = append(ids, o.DeliveryID), append(attempts, int32(o.Attempt)), append(statuses, string(o.Status))
		retries, started, durations = append(retries, micros(retryIn)), append(started, r.StartedAt), append(durations, r.Duration.Microseconds())
		codes, errs, bodies = append(codes, int32(r.StatusCode)), append(errs, text(r.Error)), append(bodies, r.ResponseBody)
		kinds = append(kinds, store.OutcomeOf(r))
	}
	rows, err := s.pool.Query(ctx, finishDeliveries, ids, attempts, statuses, retries, started, durations, codes, errs, bodies, kinds)
	if err != nil {
		return nil, store.Unavailable("finish", err)
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, store.Unavailable("finish", err)
	}
	slices.Sort(done)
	for _, id := range ids {
		if _, ok := slices.BinarySearch(done, id); !ok {
			lost = append(lost, id)
		}
	}
	return lost, nil
}

// releaseDeliveries gives claims back (store.Store's Release) in one
// statement: $1 the delivery ids, $2 their attempts. The SET expressions
// read the row as it was, so the claim time is that of the attempt
// before this one.
const releaseDeliveries = `UPDATE deliveries d
SET status = 'pending', attempt_count = d.attempt_count - 1, lease_until = NULL, updated_at = now(),
	probes = d.probes - CASE WHEN r.probe AND d.probes > 0 THEN 1 ELSE 0 END,
	claimed_at = (SELECT a.started_at FROM attempts a WHERE a.delivery_id = d.id AND a.number = d.attempt_count - 1)
FROM unnest($1::text[], $2::integer[], $3::boolean[]) AS r (id, attempt, probe)
WHERE d.id = r.id AND d.attempt_count = r.attempt AND d.status = 'delivering'
RETURNING d.id`

// Release implements store.Store. A rescue that holds a claim's row
// makes the release wait for it and then find the claim gone; a release
// that holds it makes the rescue skip it (SKIP LOCKED) and then find it
// pending.
func (s *Store) Release(ctx context.Context, rs []store.Release) ([]string, error) {
	probes := make([]bool, len(rs))
	for i, r := range rs {
		probes[i] = r.Probe
	}
	return s.fenced(ctx, "release", releaseDeliveries, rs, probes)
}

// fenced runs q, one of the statements that act on claims fenced by
// (delivery, attempt), with $1 the ids and $2 the attempts of rs, then
// more, and returns the ids it acted on.
func (s *Store) fenced(ctx context.Context, op, q string, rs []store.Release, more ...any) ([]string, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	ids, attempts := make([]string, len(rs)), make([]int32, len(rs))
	for i, r := range rs {
		ids[i], attempts[i] = r.DeliveryID, int32(r.Attempt)
	}
	rows, err := s.pool.Query(ctx, q, append([]any{ids, attempts}, more...)...)
	if err != nil {
		return nil, store.Unavailable(op, err)
	}
	done, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, store.Unavailable(op, err)
	}
	return done, nil
}

// renewDeliveries starts claims' leases over (store.Store's Renew):
// $1 the delivery ids, $2 their attempts, $3 the lease.
const renewDeliveries = `UPDATE deliveries d
SET lease_until = now() + $3::bigint * interval '1 microsecond', updated_at = now()
FROM unnest($1::text[], $2::integer[]) AS r (id, attempt)
WHERE d.id = r.id AND d.attempt_count = r.attempt AND d.status = 'delivering'
RETURNING d.id`

// Renew implements store.Store; it meets a rescue as Release does.
func (s *Store) Renew(ctx context.Context, rs []store.Release, lease time.Duration) ([]string, error) {
	return s.fenced(ctx, "renew", renewDeliveries, rs, micros(lease))
}

// rescueDelivery moves one expired claim to its new status and records
// the attempt whose outcome nobody knows.
var rescueDelivery = `WITH u AS (
	UPDATE deliveries SET status = $2, next_attempt_at = now(), lease_until = NULL, updated_at = now()
	WHERE id = $1 AND status = 'delivering'
	RETURNING *
), a AS (
	INSERT INTO attempts (delivery_id, number, started_at, duration_us, status_code, error)
	SELECT id, $3, $4, 0, 0, $5 FROM u
	ON CONFLICT (delivery_id, number) DO NOTHING
)
SELECT ` + sqlstore.StoredDeliveryColumns("u.") + ` FROM u`

// Rescue implements store.Store. The expired claims are locked with SKIP
// LOCKED, so rescuers of several processes split them instead of handling
// one twice, and a Finish racing with the rescue waits for it and then
// finds its claim lost. Only the claims of destinations rule knows are
// locked: a claim this rescuer leaves alone, locked all the same, would be
// skipped by a rescuer that knows its destination (a rolling config
// change), and nobody would rescue it that round.
func (s *Store) Rescue(ctx context.Context, rule func(destination string) (store.StaleRule, bool)) ([]anyhook.Delivery, error) {
	var changed []anyhook.Delivery
	err := s.tx(ctx, "rescue", func(tx pgx.Tx) error {
		changed = nil
		rows, err := tx.Query(ctx, `SELECT DISTINCT destination FROM deliveries WHERE status = 'delivering' AND lease_until < now()`)
		if err != nil {
			return store.Unavailable("rescue", err)
		}
		dests, err := collect(rows, func(sc scanner) (string, error) {
			var dest string
			return dest, sc.Scan(&dest)
		})
		if err != nil {
			return store.Unavailable("rescue", err)
		}
		rules := make(map[string]store.StaleRule, len(dests))
		known := make([]string, 0, len(dests))
		for _, dest := range dests {
			if r, ok := rule(dest); ok {
				rules[dest] = r
				known = append(known, dest)
			} // else not ours to decide
		}
		if len(known) == 0 {
			return nil
		}
		// now() is the transaction's: the same instant as above.
		rows, err = tx.Query(ctx, `SELECT `+sqlstore.StoredDeliveryColumns("deliveries.")+` FROM deliveries
			WHERE status = 'delivering' AND lease_until < now() AND destination = ANY($1)
			ORDER BY lease_until FOR UPDATE SKIP LOCKED`, known)
		if err != nil {
			return store.Unavailable("rescue", err)
		}
		expired, err := collect(rows, sqlstore.ScanDelivery)
		if err != nil {
			return store.Unavailable("rescue", err)
		}
		if len(expired) == 0 {
			return nil
		}
		b := &pgx.Batch{}
		for _, d := range expired {
			a := store.LostAttempt(d)
			b.Queue(rescueDelivery, d.ID, string(store.RescueStatus(d, rules[d.Destination])), a.Number, a.StartedAt, a.Error).
				QueryRow(func(row pgx.Row) error {
					nd, err := sqlstore.ScanDelivery(row)
					if err != nil {
						return err
					}
					changed = append(changed, nd)
					return nil
				})
		}
		return store.Unavailable("rescue", tx.SendBatch(ctx, b).Close())
	})
	if err != nil {
		return nil, err
	}
	return changed, nil
}

// ExpirePending implements store.Store. SKIP LOCKED: a delivery another
// transaction is claiming is not pending for long, and is left to it.
func (s *Store) ExpirePending(ctx context.Context, destination string, before time.Time, limit int, why string) ([]anyhook.Delivery, error) {
	if limit <= 0 {
		return nil, nil
	}
	var out []anyhook.Delivery
	err := s.tx(ctx, "expire pending", func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE deliveries SET status = 'dead', note = $1, lease_until = NULL, updated_at = now()
			WHERE id IN (SELECT id FROM deliveries WHERE destination = $2 AND status = 'pending' AND created_at < $3
				ORDER BY created_at LIMIT $4 FOR UPDATE SKIP LOCKED)
			RETURNING `+sqlstore.StoredDeliveryColumns("deliveries."), why, destination, before, limit)
		if err != nil {
			return store.Unavailable("expire pending", err)
		}
		if out, err = collect(rows, sqlstore.ScanDelivery); err != nil {
			return store.Unavailable("expire pending", err)
		}
		return nil
	})
	return out, err
}

// sendable checks in tx that the events ids exist and still have their
// bodies, atomically with PruneBodies: it first takes a KEY SHARE lock on
// each event row, which PruneBodies (FOR UPDATE SKIP LOCKED) skips while it
// is held, and only then reads body_pruned, in a statement whose snapshot
// is taken after any prune that held the row committed. The caller's new
// deliveries, inserted while the locks are held, are seen by a later
// PruneBodies. It returns the ids that do not exist.
func sendable(ctx context.Context, tx pgx.Tx, ids []string) (missing []string, err error) {
	rows, err := tx.Query(ctx, `SELECT id FROM events WHERE id = ANY($1) ORDER BY id FOR KEY SHARE`, ids)
	if err != nil {
		return nil, store.Unavailable("lock events", err)
	}
	found, err := collect(rows, func(sc scanner) (string, error) {
		var id string
		return id, sc.Scan(&id)
	})
	if err != nil {
		return nil, store.Unavailable("lock events", err)
	}
	if len(found) < len(ids) {
		have := make(map[string]bool, len(found))
		for _, id := range found {
			have[id] = true
		}
		for _, id := range ids {
			if !have[id] {
				missing = append(missing, id)
			}
		}
	}
	var n int
	var first string
	if err := tx.QueryRow(ctx, `SELECT count(*), coalesce(min(event_id), '') FROM ledger_entries WHERE event_id = ANY($1) AND body_pruned`, ids).
		Scan(&n, &first); err != nil {
		return nil, store.Unavailable("pruned", err)
	}
	switch {
	case n == 1 && len(ids) == 1:
		return missing, store.PrunedError(first)
	case n > 0:
		return missing, store.PrunedManyError(n, first)
	}
	return missing, nil
}

// replayPairs creates, in tx, the replay delivery ids[i] of events[i] to
// dests[i] for each i, resolves the held and dead deliveries of each pair
// (the replay takes over their work), and records the actions.
func replayPairs(ctx context.Context, tx pgx.Tx, ids, events, dests []string, by store.Actor) error {
	var now time.Time
	if err := tx.QueryRow(ctx, `SELECT now()`).Scan(&now); err != nil {
		return store.Unavailable("replay", err)
	}
	actions := make([]string, len(ids))
	for i := range actions {
		actions[i] = store.NewID()
	}
	actor, reason := text(store.ActorName(by)), text(by.Reason)
	b := &pgx.Batch{}
	b.Queue(`INSERT INTO deliveries (id, event_id, source, type, destination, status, replay, next_attempt_at, created_at, updated_at)
		SELECT r.id, r.event_id, e.source, e.type, r.destination, 'pending', true, now(), now(), now()
		FROM unnest($1::text[], $2::text[], $3::text[]) AS r (id, event_id, destination) JOIN events e ON e.id = r.event_id`, ids, events, dests)
	b.Queue(`UPDATE deliveries d SET status = 'resolved', resolution = $4, resolved_at = now(), resolved_by = $5,
			resolution_reason = $6, replayed_by = r.id, note = $7 || ' (replay delivery ' || r.id || ')', lease_until = NULL, updated_at = now()
		FROM unnest($1::text[], $2::text[], $3::text[]) AS r (id, event_id, destination)
		WHERE d.event_id = r.event_id AND d.destination = r.destination AND `+sqlstore.Resolvable,
		ids, events, dests, anyhook.ResolvedReplayed, actor, reason, text(store.Note("replayed", by, now)))
	b.Queue(`INSERT INTO actions (id, event_id, delivery_id, destination, action, actor, reason, at)
		SELECT r.action, r.event_id, r.id, r.destination, $5, $6, $7, now()
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS r (action, id, event_id, destination)`,
		actions, ids, events, dests, store.ActionReplay, actor, reason)
	return store.Unavailable("replay", tx.SendBatch(ctx, b).Close())
}

// Replay implements store.Store.
func (s *Store) Replay(ctx context.Context, eventID string, destinations []string, by store.Actor) ([]anyhook.Delivery, error) {
	ids := make([]string, len(destinations))
	events := make([]string, len(destinations))
	for i := range ids {
		ids[i], events[i] = s.newID(), eventID
	}
	var made []anyhook.Delivery
	err := s.tx(ctx, "replay", func(tx pgx.Tx) error {
		missing, err := sendable(ctx, tx, []string{eventID})
		if err != nil {
			return err
		}
		if len(missing) > 0 {
			return fmt.Errorf("event %s: %w", eventID, anyhook.ErrNotFound)
		}
		if err := replayPairs(ctx, tx, ids, events, destinations, by); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT `+deliveryCols+` FROM deliveries WHERE id = ANY($1)`, ids)
		if err != nil {
			return store.Unavailable("replay", err)
		}
		made, err = collect(rows, sqlstore.ScanDelivery)
		return store.Unavailable("replay", err)
	})
	if err != nil {
		return nil, err
	}
	// In the order of destinations.
	byID := make(map[string]anyhook.Delivery, len(made))
	for _, d := range made {
		byID[d.ID] = d
	}
	out := make([]anyhook.Delivery, 0, len(ids))
	for _, id := range ids {
		out = append(out, byID[id])
	}
	return out, nil
}

// ReplayDeliveries implements store.Store.
func (s *Store) ReplayDeliveries(ctx context.Context, f store.DeliveryFilter, by store.Actor) (store.BulkReplay, error) {
	var out store.BulkReplay
	err := s.tx(ctx, "replay", func(tx pgx.Tx) error {
		out = store.BulkReplay{}
		shown, _, err := shownIn(ctx, tx, f.Status, f.Destination)
		if err != nil {
			return store.Unavailable("replay", err)
		}
		where, args := replayWhere(f, shown)
		rows, err := tx.Query(ctx, `SELECT DISTINCT d.event_id, d.destination FROM deliveries d`+where+` ORDER BY d.event_id, d.destination`, args...)
		if err != nil {
			return store.Unavailable("replay", err)
		}
		pairs, err := collect(rows, sqlstore.ScanPair)
		if err != nil {
			return store.Unavailable("replay", err)
		}
		var events, dests []string
		for _, p := range pairs {
			events, dests = append(events, p[0]), append(dests, p[1])
		}
		if len(events) == 0 {
			return nil
		}
		pruned, err := prunedAmong(ctx, tx, slices.Compact(slices.Sorted(slices.Values(events))))
		if err != nil {
			return err
		}
		var ids, keepEvents, keepDests []string
		for i, ev := range events {
			if _, gone := slices.BinarySearch(pruned, ev); gone {
				continue
			}
			ids, keepEvents, keepDests = append(ids, s.newID()), append(keepEvents, ev), append(keepDests, dests[i])
		}
		out = store.BulkReplay{Count: len(ids), Pruned: pruned}
		if len(ids) == 0 {
			return nil
		}
		return replayPairs(ctx, tx, ids, keepEvents, keepDests, by)
	})
	if err != nil {
		return store.BulkReplay{}, err
	}
	return out, nil
}

// replayWhere is sqlstore.DeliveryWhere for a bulk replay: never a
// resolved delivery.
func replayWhere(f store.DeliveryFilter, dests []string) (string, []any) {
	where, args := sqlstore.DeliveryWhere(sqlstore.Postgres, f, dests)
	if where == "" {
		return " WHERE " + sqlstore.NotResolved, args
	}
	return where + " AND " + sqlstore.NotResolved, args
}

// prunedAmong locks the events ids (sorted) against pruning, as sendable
// does, and returns, sorted, those whose bodies were already pruned.
func prunedAmong(ctx context.Context, tx pgx.Tx, ids []string) ([]string, error) {
	if _, err := tx.Exec(ctx, `SELECT 1 FROM events WHERE id = ANY($1) ORDER BY id FOR KEY SHARE`, ids); err != nil {
		return nil, store.Unavailable("lock events", err)
	}
	rows, err := tx.Query(ctx, `SELECT event_id FROM ledger_entries WHERE event_id = ANY($1) AND body_pruned ORDER BY event_id`, ids)
	if err != nil {
		return nil, store.Unavailable("pruned", err)
	}
	pruned, err := collect(rows, func(sc scanner) (string, error) {
		var id string
		return id, sc.Scan(&id)
	})
	if err != nil {
		return nil, store.Unavailable("pruned", err)
	}
	slices.Sort(pruned) // byte order, as the callers search it
	return pruned, nil
}

// Resolve implements store.Store.
func (s *Store) Resolve(ctx context.Context, deliveryID, action string, by store.Actor) (anyhook.Delivery, error) {
	var d anyhook.Delivery
	by = store.Actor{Name: text(store.ActorName(by)), Reason: text(by.Reason)}
	err := s.tx(ctx, "resolve", func(tx pgx.Tx) error {
		var now time.Time
		dest, done := sqlstore.DeliveryDest(&d)
		err := tx.QueryRow(ctx, `SELECT `+sqlstore.StoredDeliveryColumns("deliveries.")+`, now() FROM deliveries WHERE id = $1 FOR UPDATE`, deliveryID).Scan(append(dest, &now)...)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("delivery %s: %w", deliveryID, anyhook.ErrNotFound)
		}
		if err != nil {
			return store.Unavailable("resolve", err)
		}
		done()
		if d, err = store.Resolved(d, action, by, now); err != nil {
			return err
		}
		if d.Status == anyhook.StatusPending { // a resend
			if _, err := sendable(ctx, tx, []string{d.EventID}); err != nil {
				return err
			}
		}
		r := d.Resolution
		var resolvedAt *time.Time
		if !r.At.IsZero() {
			resolvedAt = &r.At
		}
		b := &pgx.Batch{}
		b.Queue(`UPDATE deliveries
			SET status = $2, note = $3, next_attempt_at = now(), lease_until = NULL, updated_at = now(),
				resolution = $4, resolved_at = $5, resolved_by = $6, resolution_reason = $7
			WHERE id = $1`, deliveryID, string(d.Status), d.Note, r.Kind, resolvedAt, r.By, r.Reason)
		b.Queue(`INSERT INTO actions (id, event_id, delivery_id, destination, action, actor, reason, at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, now())`, store.NewID(), d.EventID, d.ID, d.Destination, action, by.Name, by.Reason)
		// As every read shows it: a resend to a paused destination waits.
		b.Queue(`SELECT `+deliveryCols+` FROM deliveries WHERE id = $1`, deliveryID).QueryRow(func(row pgx.Row) error {
			var err error
			d, err = sqlstore.ScanDelivery(row)
			return err
		})
		return store.Unavailable("resolve", tx.SendBatch(ctx, b).Close())
	})
	return d, err
}

// SetPaused implements store.Store.
func (s *Store) SetPaused(ctx context.Context, destination string, paused bool) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO destinations (name, paused) VALUES ($1, $2)
		ON CONFLICT (name) DO UPDATE SET paused = excluded.paused`, destination, paused)
	if err == nil {
		s.analyzeDestinations(ctx)
	}
	return store.Unavailable("pause", err)
}

// analyzeDestinations refreshes the planner's statistics of the
// destinations table after a pause, a resume or a breaker's trip. The
// table holds a row per destination ever paused or tripped, so autovacuum
// (50 changes) may never analyze it; without statistics the planner takes
// its page for hundreds of rows, all held back, and plans a list of
// pending or retrying deliveries (not held back) as if it kept none: the
// events list then read every retrying delivery (TestPlansHeldBackDestinations).
// A few rows: a millisecond. Its error is not the pause's: a role that
// may not analyze gets a warning, not an error, and the pause is stored.
func (s *Store) analyzeDestinations(ctx context.Context) {
	_, _ = s.pool.Exec(ctx, `ANALYZE destinations`)
}

// Paused implements store.Store.
func (s *Store) Paused(ctx context.Context) (map[string]bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT name FROM destinations WHERE paused`)
	if err != nil {
		return nil, store.Unavailable("paused", err)
	}
	names, err := collect(rows, func(sc scanner) (string, error) {
		var name string
		return name, sc.Scan(&name)
	})
	if err != nil {
		return nil, store.Unavailable("paused", err)
	}
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m, nil
}

// text is store.Text: an attempt's error message must never fail the
// batch that records it.
func text(s string) string { return store.Text(s) }
