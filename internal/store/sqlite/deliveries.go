package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// Claim implements store.Store.
func (s *Store) Claim(ctx context.Context, destination string, limit int, lease time.Duration) ([]store.Claim, error) {
	if limit <= 0 {
		return nil, nil // SQLite reads LIMIT -1 as no limit at all
	}
	var claims []store.Claim
	err := s.tx(ctx, "claim", func(tx *sql.Tx) error {
		if paused, err := s.paused(ctx, tx, destination); paused || err != nil {
			return err
		}
		var err error
		claims, err = s.claimTx(ctx, tx, destination, limit, lease)
		return err
	})
	if err != nil {
		return nil, err // rolled back: nothing was claimed
	}
	return claims, nil
}

// claimTx claims, in tx, up to limit due pending deliveries of
// destination, oldest due first.
func (s *Store) claimTx(ctx context.Context, tx *sql.Tx, destination string, limit int, lease time.Duration) ([]store.Claim, error) {
	st := s.stmts(ctx, tx)
	now, lnow := s.now(), s.leaseNow()
	rows, err := st.get(claimQuery).QueryContext(ctx, micros(lnow.Add(lease)), micros(now), micros(lnow), destination, micros(now), limit)
	if err != nil {
		return nil, store.Unavailable("claim", err)
	}
	ds, err := sqlstore.Collect(rows, sqlstore.ScanDelivery)
	rows.Close()
	if err != nil {
		return nil, store.Unavailable("claim", err)
	}
	return s.withEvents(ctx, tx, ds)
}

// withEvents makes the claimed deliveries ds claims, with their events.
func (s *Store) withEvents(ctx context.Context, tx *sql.Tx, ds []anyhook.Delivery) ([]store.Claim, error) {
	claims := make([]store.Claim, len(ds))
	for i, d := range ds {
		claims[i].Delivery = d
	}
	return claims, s.attachEvents(ctx, tx, claims)
}

func (s *Store) attachEvents(ctx context.Context, tx *sql.Tx, claims []store.Claim) error {
	if len(claims) == 0 {
		return nil
	}
	ids := make([]any, len(claims))
	for i, c := range claims {
		ids[i] = c.Delivery.EventID
	}
	evs, err := query(ctx, tx, scanPrunedEvent, `SELECT `+eventCols+`, `+prunedCol+` FROM events WHERE id IN (?`+strings.Repeat(",?", len(ids)-1)+`)`, ids...)
	if err != nil {
		return store.Unavailable("claim", err)
	}
	byID := make(map[string]anyhook.Event, len(evs))
	for _, ev := range evs {
		byID[ev.ID] = ev
	}
	for i := range claims {
		claims[i].Event = byID[claims[i].Delivery.EventID]
	}
	return nil
}

// Finish implements store.Store: the outcomes' fenced updates in
// multi-row statements (chunks), then the attempts of those that held
// their claim likewise.
//
// Its commit does not wait for fsync (txUnsyncedHeld): it is in the WAL at
// once, so a killed process loses nothing, and it is durable as soon as
// any later commit syncs the WAL (an ingest, a claim: the WAL is synced
// whole, in order) or the background WAL copy runs, normally within
// walCopyEvery. Only a power loss or an operating-system crash in
// between can undo an outcome, and its delivery is then what a crash
// between the send and the outcome leaves: delivering, rescued at its
// lease's end as its destination's on_stale_claim says (reclaim: sent again
// under the same X-AnyHook-Delivery; hold: held for a person). Nothing
// that follows an outcome can be durable without it: the next delivery
// of an object in order, a retry's claim or a replay commits synced, and
// syncs the outcome first. The fsync of an outcome's commit held the one
// writer for ~0.4 ms of the ~1.5 ms a batch took, and ingest waited
// behind it (BENCHMARKS.md).
//
// An ingest transaction that begins while a Finish waits for the writer
// takes its outcomes along (rides.go).
func (s *Store) Finish(ctx context.Context, outs []store.Outcome) ([]string, error) {
	if err := store.CheckOutcomes(outs); err != nil {
		return nil, err
	}
	x := s.rides.add(outs)
	switch err := s.gate.enterUnless(ctx, false, x.done); {
	case errors.Is(err, errNoTurnNeeded):
		return x.lost, nil
	case err != nil:
		err = store.Unavailable("finish", err)
		if s.rides.remove(x, true) {
			return nil, err
		}
		<-x.done // an ingest transaction took them: its end answers
		if x.failed {
			return nil, err
		}
		return x.lost, nil
	}
	defer s.gate.leave()
	// Under the writer's turn x is either answered or queued (settle).
	if !s.rides.remove(x, false) {
		<-x.done
		return x.lost, nil
	}
	// Its own outcomes alone: another Finish's never fail for this one's
	// context.
	var lost []bool
	err := s.txUnsyncedHeld(ctx, "finish", func(tx *sql.Tx) error {
		var err error
		lost, err = s.finishIn(s.stmts(ctx, tx), outs)
		return store.Unavailable("finish", err)
	})
	if err != nil {
		return nil, err
	}
	return lostIDs(outs, lost), nil
}

// finishIn writes outs in st's transaction and tells, for each, whether
// its claim was lost. When it fails, the caller rolls back what it wrote.
func (s *Store) finishIn(st *stmts, outs []store.Outcome) ([]bool, error) {
	now := s.now()
	// A second outcome of one delivery finds it no longer delivering
	// (the first wrote it): lost, as when each ran on its own.
	first := make(map[string]int, len(outs))
	uniq := make([]*store.Outcome, 0, len(outs))
	for i := range outs {
		if _, ok := first[outs[i].DeliveryID]; !ok {
			first[outs[i].DeliveryID] = i
			uniq = append(uniq, &outs[i])
		}
	}
	held := make(map[string]bool, len(uniq))
	args := []any{}
	err := chunks(len(uniq), func(k, i, size int) error {
		args = append(args[:0], micros(now))
		for _, o := range uniq[i : i+size] {
			next := now
			if o.Status == anyhook.StatusPending {
				next = now.Add(o.RetryIn)
			}
			args = append(args, o.DeliveryID, o.Status, micros(next), o.Attempt)
		}
		rows, err := st.get(finishes[k]).QueryContext(st.ctx, args...)
		if err != nil {
			return err
		}
		ids, err := sqlstore.Collect(rows, sqlstore.ScanString)
		rows.Close()
		for _, id := range ids {
			held[id] = true
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	lost := make([]bool, len(outs))
	kept := make([]*store.Outcome, 0, len(outs))
	for i := range outs {
		if id := outs[i].DeliveryID; held[id] && first[id] == i {
			kept = append(kept, &outs[i])
		} else {
			lost[i] = true
		}
	}
	err = insertRows(st, &attemptInserts, len(kept), func(i int, args []any) []any {
		o := kept[i]
		return append(args, o.DeliveryID, o.Attempt, micros(o.Result.StartedAt), o.Result.Duration.Microseconds(),
			o.Result.StatusCode, store.Text(o.Result.Error), o.Result.ResponseBody, store.OutcomeOf(o.Result))
	})
	if err != nil {
		return nil, err
	}
	return lost, nil
}

// qReleaseClaim gives one claim back (store.Store's Release): the SET
// expressions read the row as it was, so the claim time is that of the
// attempt before this one.
const qReleaseClaim = `UPDATE deliveries SET status = 'pending', attempt_count = attempt_count - 1, lease_until = NULL, updated_at = ?,
		probes = probes - CASE WHEN ? AND probes > 0 THEN 1 ELSE 0 END,
		claimed_at = (SELECT a.started_at FROM attempts a WHERE a.delivery_id = deliveries.id AND a.number = deliveries.attempt_count - 1)
	WHERE id = ? AND attempt_count = ? AND status = 'delivering'
	RETURNING id`

// Release implements store.Store. Releases are rare (a stalled claim),
// so one statement per claim, in one transaction.
func (s *Store) Release(ctx context.Context, rs []store.Release) ([]string, error) {
	return s.fenced(ctx, "release", rs, func(r store.Release, now time.Time) []any {
		return []any{qReleaseClaim, micros(now), r.Probe, r.DeliveryID, r.Attempt}
	})
}

// fenced runs, in one transaction, one statement per claim of rs, fenced
// by (delivery, attempt): stmt gives its query and arguments, at now by
// the store's clock. It returns the ids the statements acted on.
func (s *Store) fenced(ctx context.Context, op string, rs []store.Release, stmt func(r store.Release, now time.Time) []any) ([]string, error) {
	if len(rs) == 0 {
		return nil, nil
	}
	var done []string
	err := s.tx(ctx, op, func(tx *sql.Tx) error {
		done = done[:0]
		now := s.now()
		for _, r := range rs {
			q := stmt(r, now)
			ids, err := query(ctx, tx, sqlstore.ScanString, q[0].(string), q[1:]...)
			if err != nil {
				return store.Unavailable(op, err)
			}
			done = append(done, ids...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return done, nil
}

// qRenewClaim starts one claim's lease over (store.Store's Renew).
const qRenewClaim = `UPDATE deliveries SET lease_until = ?, updated_at = ?
	WHERE id = ? AND attempt_count = ? AND status = 'delivering'
	RETURNING id`

// Renew implements store.Store, as Release.
func (s *Store) Renew(ctx context.Context, rs []store.Release, lease time.Duration) ([]string, error) {
	return s.fenced(ctx, "renew", rs, func(r store.Release, now time.Time) []any {
		return []any{qRenewClaim, micros(s.leaseNow().Add(lease)), micros(now), r.DeliveryID, r.Attempt}
	})
}

func insertAttempt(ctx context.Context, tx *sql.Tx, deliveryID string, number int, a anyhook.Attempt) error {
	_, err := tx.ExecContext(ctx, attemptInserts[len(attemptInserts)-1],
		deliveryID, number, micros(a.StartedAt), a.Duration.Microseconds(), a.StatusCode, store.Text(a.Error), a.ResponseBody, store.OutcomeOf(a))
	if err != nil {
		return store.Unavailable("rescue", err)
	}
	return nil
}

// Rescue implements store.Store.
func (s *Store) Rescue(ctx context.Context, rule func(destination string) (store.StaleRule, bool)) ([]anyhook.Delivery, error) {
	var changed []anyhook.Delivery
	err := s.tx(ctx, "rescue", func(tx *sql.Tx) error {
		changed = changed[:0]
		now := s.now()
		expired, err := query(ctx, tx, sqlstore.ScanDelivery, `SELECT `+deliveryCols+` FROM deliveries WHERE status = 'delivering' AND lease_until < ?`, micros(s.leaseNow()))
		if err != nil {
			return store.Unavailable("rescue", err)
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
				return store.Unavailable("rescue", err)
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

// ExpirePending implements store.Store.
func (s *Store) ExpirePending(ctx context.Context, destination string, before time.Time, limit int, why string) ([]anyhook.Delivery, error) {
	if limit <= 0 {
		return nil, nil
	}
	var out []anyhook.Delivery
	err := s.tx(ctx, "expire pending", func(tx *sql.Tx) error {
		at := micros(s.now())
		var err error
		out, err = query(ctx, tx, sqlstore.ScanDelivery, `UPDATE deliveries SET status = 'dead', note = ?, lease_until = NULL, updated_at = ?
			WHERE id IN (SELECT id FROM deliveries WHERE destination = ? AND status = 'pending' AND created_at < ?
				ORDER BY created_at LIMIT ?)
			RETURNING `+deliveryCols, why, at, destination, micros(before), limit)
		if err != nil {
			return store.Unavailable("expire pending", err)
		}
		return nil
	})
	return out, err
}

// sendable checks, inside a write transaction (so that no prune runs
// meanwhile), that event id exists and still has its body.
func sendable(ctx context.Context, tx *sql.Tx, id string) error {
	var pruned bool
	err := tx.QueryRowContext(ctx, `SELECT `+prunedCol+` FROM events WHERE id = ?`, id).Scan(&pruned)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("event %s: %w", id, anyhook.ErrNotFound)
	case err != nil:
		return store.Unavailable("read body state", err)
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
	if _, err := tx.ExecContext(ctx, `INSERT INTO deliveries (id, event_id, source, type, destination, status, replay, next_attempt_at, created_at, updated_at)
		SELECT ?, id, source, type, ?, 'pending', 1, ?, ?, ? FROM events WHERE id = ?`, id, dest, at, at, at, eventID); err != nil {
		return "", store.Unavailable("replay", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE deliveries AS d SET status = 'resolved', resolution = ?, resolved_at = ?, resolved_by = ?,
			resolution_reason = ?, replayed_by = ?, note = ?, lease_until = NULL, updated_at = ?
		WHERE d.event_id = ? AND d.destination = ? AND `+sqlstore.Resolvable,
		anyhook.ResolvedReplayed, at, store.ActorName(by), by.Reason, id, store.Note("replayed", by, now)+" (replay delivery "+id+")", at,
		eventID, dest); err != nil {
		return "", store.Unavailable("replay", err)
	}
	return id, s.recordAction(ctx, tx, eventID, id, dest, store.ActionReplay, by, now)
}

// recordAction adds one row to the audit trail.
func (s *Store) recordAction(ctx context.Context, tx *sql.Tx, eventID, deliveryID, dest, action string, by store.Actor, now time.Time) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO actions (id, event_id, delivery_id, destination, action, actor, reason, at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, s.newID(), eventID, deliveryID, dest, action, store.ActorName(by), by.Reason, micros(now))
	return store.Unavailable("record action", err)
}

// Replay implements store.Store. SQLite runs one write transaction at a
// time, so the check and the inserts are atomic with PruneBodies.
func (s *Store) Replay(ctx context.Context, eventID string, destinations []string, by store.Actor) ([]anyhook.Delivery, error) {
	var out []anyhook.Delivery
	err := s.tx(ctx, "replay", func(tx *sql.Tx) error {
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
			d, err := sqlstore.ScanDelivery(tx.QueryRowContext(ctx, `SELECT `+deliveryCols+` FROM deliveries WHERE id = ?`, id))
			if err != nil {
				return store.Unavailable("replay", err)
			}
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// ReplayDeliveries implements store.Store.
func (s *Store) ReplayDeliveries(ctx context.Context, f store.DeliveryFilter, by store.Actor) (store.BulkReplay, error) {
	var out store.BulkReplay
	err := s.tx(ctx, "replay deliveries", func(tx *sql.Tx) error {
		out = store.BulkReplay{}
		shown, err := shownIn(ctx, tx, f.Status, f.Destination)
		if err != nil {
			return store.Unavailable("replay deliveries", err)
		}
		where, args := sqlstore.DeliveryWhere(sqlstore.SQLite, f, shown)
		where = and(where, sqlstore.NotResolved)
		type pair struct {
			event, dest string
			pruned      bool
		}
		rows, err := query(ctx, tx, func(sc scanner) (pair, error) {
			var p pair
			return p, sc.Scan(&p.event, &p.dest, &p.pruned)
		}, `SELECT DISTINCT d.event_id, d.destination, coalesce(l.body_pruned, 0)
			FROM deliveries d LEFT JOIN ledger_entries l ON l.event_id = d.event_id`+where+`
			ORDER BY d.event_id, d.destination`, args...)
		if err != nil {
			return store.Unavailable("replay deliveries", err)
		}
		var pairs [][2]string
		for _, p := range rows {
			if p.pruned {
				if n := len(out.Pruned); n == 0 || out.Pruned[n-1] != p.event {
					out.Pruned = append(out.Pruned, p.event)
				}
				continue
			}
			pairs = append(pairs, [2]string{p.event, p.dest})
		}
		now := s.now()
		for _, p := range pairs {
			if _, err := s.replayPair(ctx, tx, p[0], p[1], by, now); err != nil {
				return err
			}
		}
		out.Count = len(pairs)
		return nil
	})
	if err != nil {
		return store.BulkReplay{}, err
	}
	return out, nil
}

// Resolve implements store.Store.
func (s *Store) Resolve(ctx context.Context, deliveryID, action string, by store.Actor) (anyhook.Delivery, error) {
	var d anyhook.Delivery
	err := s.tx(ctx, "resolve", func(tx *sql.Tx) error {
		var err error
		d, err = sqlstore.ScanDelivery(tx.QueryRowContext(ctx, `SELECT `+deliveryCols+` FROM deliveries WHERE id = ?`, deliveryID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("delivery %s: %w", deliveryID, anyhook.ErrNotFound)
		}
		if err != nil {
			return store.Unavailable("resolve", err)
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
			return store.Unavailable("resolve", err)
		}
		if err := s.recordAction(ctx, tx, d.EventID, d.ID, d.Destination, action, by, now); err != nil {
			return err
		}
		// As every read shows it: a resend to a paused destination waits.
		d, err = sqlstore.ScanDelivery(tx.QueryRowContext(ctx, `SELECT `+deliveryCols+` FROM deliveries WHERE id = ?`, deliveryID))
		return store.Unavailable("resolve", err)
	})
	return d, err
}

// SetPaused implements store.Store.
func (s *Store) SetPaused(ctx context.Context, destination string, paused bool) error {
	return s.tx(ctx, "pause", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO destinations (name, paused) VALUES (?, ?)
			ON CONFLICT (name) DO UPDATE SET paused = excluded.paused`, destination, paused)
		return store.Unavailable("pause", err)
	})
}

// Paused implements store.Store.
func (s *Store) Paused(ctx context.Context) (map[string]bool, error) {
	names, err := query(ctx, s.r, sqlstore.ScanString, `SELECT name FROM destinations WHERE paused`)
	if err != nil {
		return nil, store.Unavailable("paused", err)
	}
	m := make(map[string]bool, len(names))
	for _, name := range names {
		m[name] = true
	}
	return m, nil
}
