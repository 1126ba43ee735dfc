package postgres

import (
	"cmp"
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

// The tamper-evident ledger's storage (store.Ledger). Tables:
// migrations/0002_ledger.sql.

// ledgerLock is the key of the transaction-level advisory lock held by
// Sequence: of many processes, one sequences at a time.
const ledgerLock int64 = 0x61686c6f67 // "ahlog"

// Sequencing takes new events from ledger_pending, where ingest puts each
// new event's id (migrations/0012_ledger_pending.sql): a round costs what
// its events cost, however many the log holds. An event that reached the
// events table without ingest has no pending row; a sweep finds it: every
// sweepEvery a pass over all event ids starts, sweepChunk ids a round, so
// that no round reads more than that.
const (
	sweepEvery = 5 * time.Minute
	sweepChunk = 10000
)

// Sequence implements store.Ledger.
func (s *Store) Sequence(ctx context.Context, limit int, fn store.SequenceFunc) (int, error) {
	var n int
	err := s.tx(ctx, "sequence", func(tx pgx.Tx) error {
		n = 0
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, ledgerLock); err != nil {
			return store.Unavailable("sequence: lock", err)
		}
		// Each statement is planned for the tables as they are now. A
		// plan cached by a connection when the log was empty (a sequential
		// scan is the cheapest way to read an empty table) was kept while
		// the log grew, with autovacuum off nothing invalidating it: each
		// round then read all of ledger_entries and ledger_hashes, 400
		// events/s against 20,000 on a new connection (BENCHMARKS.md, "The
		// sequencer on one connection"). Statements with parameters are
		// planned for them (force_custom_plan); those without are not
		// cached at all (customPlans).
		if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_custom_plan`); err != nil {
			return store.Unavailable("sequence", err)
		}
		taken, evs, err := takePending(ctx, tx, limit)
		if err != nil {
			return err
		}
		if len(evs) < limit {
			more, err := sweep(ctx, tx, cmp.Or(s.sweepChunk, sweepChunk), limit-len(evs))
			if err != nil {
				return err
			}
			evs = append(evs, more...)
			slices.SortFunc(evs, func(a, b anyhook.Event) int { return strings.Compare(a.ID, b.ID) })
		}
		if len(evs) == 0 {
			return deletePending(ctx, tx, taken)
		}
		var size, nhashes int64
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(idx) + 1, 0) FROM ledger_entries`, customPlans).Scan(&size); err != nil {
			return store.Unavailable("sequence", err)
		}
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(idx) + 1, 0) FROM ledger_hashes`, customPlans).Scan(&nhashes); err != nil {
			return store.Unavailable("sequence", err)
		}
		b, err := fn(size, evs, func(idx []int64) ([]store.Hash, error) { return readHashes(ctx, tx, idx) })
		if err != nil {
			return err
		}
		if err := store.CheckBatch(size, nhashes, evs, b); err != nil {
			return err
		}
		// Set-based: one statement per table, however long the batch.
		k := len(b.Entries)
		idxs, ids, late := make([]int64, k), make([]string, k), make([]bool, k)
		headers, bodies, leaves := make([][]byte, k), make([][]byte, k), make([][]byte, k)
		for i, e := range b.Entries {
			idxs[i], ids[i], late[i] = e.Index, e.EventID, e.Late
			headers[i], bodies[i], leaves[i] = e.HeaderHash[:], e.BodyHash[:], e.LeafHash[:]
		}
		hashes := make([][]byte, len(b.Hashes))
		for i := range b.Hashes {
			hashes[i] = b.Hashes[i][:]
		}
		var batch pgx.Batch
		batch.Queue(`INSERT INTO ledger_entries (idx, event_id, header_hash, body_hash, leaf_hash, late)
			SELECT * FROM unnest($1::bigint[], $2::text[], $3::bytea[], $4::bytea[], $5::bytea[], $6::boolean[])`,
			idxs, ids, headers, bodies, leaves, late)
		batch.Queue(`INSERT INTO ledger_hashes (idx, hash)
			SELECT $1::bigint + i - 1, h FROM unnest($2::bytea[]) WITH ORDINALITY AS t (h, i)`, b.HashIndex, hashes)
		batch.Queue(`DELETE FROM ledger_pending WHERE event_id = ANY($1)`, taken)
		if err := tx.SendBatch(ctx, &batch).Close(); err != nil {
			return store.Unavailable("sequence", err)
		}
		n = len(b.Entries)
		return nil
	})
	return n, err
}

// takePending takes up to limit ids from ledger_pending and returns them
// with the events among them to log. An id whose event the log already
// holds (logged by a sequencer of a version before the queue, during a
// rolling upgrade) or whose event is gone (deleted, or its id rewritten,
// behind the gateway's back) is not returned; when there are such ids,
// all of them are deleted, so that new events never wait behind them.
func takePending(ctx context.Context, tx pgx.Tx, limit int) (taken []string, evs []anyhook.Event, err error) {
	rows, err := tx.Query(ctx, `SELECT event_id FROM ledger_pending ORDER BY event_id LIMIT $1`, limit)
	if err != nil {
		return nil, nil, store.Unavailable("sequence", err)
	}
	if taken, err = collect(rows, sqlstore.ScanString); err != nil || len(taken) == 0 {
		return nil, nil, store.Unavailable("sequence", err)
	}
	// Each id is looked up by the events' primary key: a join left to the
	// planner merged the pending ids with every event id.
	rows, err = tx.Query(ctx, `SELECT `+sqlstore.EventColumns("e.")+` FROM events e
		WHERE e.id = ANY($1) AND NOT EXISTS (SELECT 1 FROM ledger_entries l WHERE l.event_id = e.id) ORDER BY e.id`, taken)
	if err != nil {
		return nil, nil, store.Unavailable("sequence", err)
	}
	if evs, err = collect(rows, sqlstore.ScanLedgerEvent); err != nil {
		return nil, nil, store.Unavailable("sequence", err)
	}
	if len(evs) < len(taken) {
		if _, err := tx.Exec(ctx, `DELETE FROM ledger_pending p
			WHERE EXISTS (SELECT 1 FROM ledger_entries l WHERE l.event_id = p.event_id)
				OR NOT EXISTS (SELECT 1 FROM events e WHERE e.id = p.event_id)`); err != nil {
			return nil, nil, store.Unavailable("sequence", err)
		}
	}
	return taken, evs, nil
}

func deletePending(ctx context.Context, tx pgx.Tx, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, `DELETE FROM ledger_pending WHERE event_id = ANY($1)`, ids)
	return store.Unavailable("sequence", err)
}

// sweep returns up to room events of the sweep's next chunk of ids that have
// neither a log entry nor a pending row, when a pass is under way or due,
// and moves the sweep on: past what it returned when it filled room, else
// past the chunk, and when the chunk was the last, the pass ends.
func sweep(ctx context.Context, tx pgx.Tx, chunk, room int) ([]anyhook.Event, error) {
	var cursor string
	var due bool
	if err := tx.QueryRow(ctx, `SELECT sweep_cursor, swept_at < now() - $1 * interval '1 microsecond' FROM ledger_state WHERE id = 1`,
		sweepEvery.Microseconds()).Scan(&cursor, &due); err != nil {
		return nil, store.Unavailable("sequence: sweep", err)
	}
	if cursor == "" && !due {
		return nil, nil
	}
	// The chunk's last id; none: the chunk runs to the last event.
	var end *string
	if err := tx.QueryRow(ctx, `SELECT id FROM events WHERE id > $1 ORDER BY id OFFSET $2 LIMIT 1`, cursor, chunk-1).Scan(&end); err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return nil, store.Unavailable("sequence: sweep", err)
	}
	rows, err := tx.Query(ctx, `SELECT `+sqlstore.EventColumns("e.")+` FROM events e
		WHERE e.id > $1 AND ($2::text IS NULL OR e.id <= $2)
			AND NOT EXISTS (SELECT 1 FROM ledger_entries l WHERE l.event_id = e.id)
			AND NOT EXISTS (SELECT 1 FROM ledger_pending p WHERE p.event_id = e.id)
		ORDER BY e.id LIMIT $3`, cursor, end, room)
	if err != nil {
		return nil, store.Unavailable("sequence: sweep", err)
	}
	found, err := collect(rows, sqlstore.ScanLedgerEvent)
	if err != nil {
		return nil, store.Unavailable("sequence: sweep", err)
	}
	next, done := "", end == nil
	switch {
	case len(found) == room:
		next, done = found[len(found)-1].ID, false // more may follow in this chunk
	case end != nil:
		next = *end
	}
	if _, err := tx.Exec(ctx, `UPDATE ledger_state SET sweep_cursor = $1, swept_at = CASE WHEN $2 THEN now() ELSE swept_at END WHERE id = 1`,
		next, done); err != nil {
		return nil, store.Unavailable("sequence: sweep", err)
	}
	return found, nil
}

// queryer is a pool or a transaction.
type queryer interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func readHashes(ctx context.Context, q queryer, idx []int64) ([]store.Hash, error) {
	out := make([]store.Hash, len(idx))
	if len(idx) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `SELECT idx, hash FROM ledger_hashes WHERE idx = ANY($1)`, customPlans, idx)
	if err != nil {
		return nil, store.Unavailable("read hashes", err)
	}
	got, err := collect(rows, sqlstore.ScanHashRow)
	if err != nil {
		return nil, store.Unavailable("read hashes", err)
	}
	return sqlstore.PlaceHashes(idx, got)
}

// LedgerSize implements store.Ledger.
func (s *Store) LedgerSize(ctx context.Context) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(max(idx) + 1, 0) FROM ledger_entries`, customPlans).Scan(&n)
	return n, store.Unavailable("ledger size", err)
}

// ReadHashes implements store.Ledger.
func (s *Store) ReadHashes(ctx context.Context, indexes []int64) ([]store.Hash, error) {
	return readHashes(ctx, s.pool, indexes)
}

var entryCols = sqlstore.EntryColumns("")

// LedgerRecords implements store.Ledger.
func (s *Store) LedgerRecords(ctx context.Context, from int64, limit int) ([]store.LedgerRecord, error) {
	// customPlans: see Sequence; the checkpointer reads the log through
	// these on pooled connections as it grows.
	rows, err := s.pool.Query(ctx, `SELECT `+entryCols+` FROM ledger_entries WHERE idx >= $1 ORDER BY idx LIMIT $2`, customPlans, from, limit)
	if err != nil {
		return nil, store.Unavailable("ledger records", err)
	}
	entries, err := collect(rows, sqlstore.ScanEntry)
	if err != nil {
		return nil, store.Unavailable("ledger records", err)
	}
	ids := make([]string, len(entries))
	for i, e := range entries {
		ids[i] = e.EventID
	}
	rows, err = s.pool.Query(ctx, `SELECT `+eventCols+` FROM events WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, store.Unavailable("ledger records", err)
	}
	evs, err := collect(rows, sqlstore.ScanLedgerEvent)
	if err != nil {
		return nil, store.Unavailable("ledger records", err)
	}
	byID := make(map[string]*anyhook.Event, len(evs))
	for i := range evs {
		byID[evs[i].ID] = &evs[i]
	}
	out := make([]store.LedgerRecord, len(entries))
	for i, e := range entries {
		out[i] = store.LedgerRecord{Entry: e, Event: byID[e.EventID]}
	}
	return out, nil
}

// LedgerEntry implements store.Ledger.
func (s *Store) LedgerEntry(ctx context.Context, eventID string) (store.LedgerEntry, error) {
	e, err := sqlstore.ScanEntry(s.pool.QueryRow(ctx, `SELECT `+entryCols+` FROM ledger_entries WHERE event_id = $1`, eventID))
	if errors.Is(err, pgx.ErrNoRows) {
		return e, fmt.Errorf("event %s has no log entry: %w", eventID, anyhook.ErrNotFound)
	}
	return e, store.Unavailable("ledger entry", err)
}

// Unsequenced implements store.Ledger.
func (s *Store) Unsequenced(ctx context.Context, receivedBefore time.Time, limit int) ([]anyhook.Event, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+sqlstore.EventHeadColumns+` FROM events e
		WHERE received_at < $1 AND NOT EXISTS (SELECT 1 FROM ledger_entries l WHERE l.event_id = e.id)
		ORDER BY id LIMIT $2`, receivedBefore, limit)
	if err != nil {
		return nil, store.Unavailable("unsequenced", err)
	}
	out, err := collect(rows, sqlstore.ScanEventHead)
	return out, store.Unavailable("unsequenced", err)
}

// SaveCheckpoint implements store.Ledger. The checkpointers of several
// processes sign unsynchronized: one may sign size 9, another size 10 and
// store it first. Stored after it, the 9 would make the stored sizes
// shrink, which log verify reports as a rollback. So saves take turns
// (checkpointLock) and one smaller than the latest stored is dropped: a
// larger one, signed by the same key, covers it.
func (s *Store) SaveCheckpoint(ctx context.Context, c store.Checkpoint) error {
	return s.tx(ctx, "save checkpoint", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, checkpointLock); err != nil {
			return store.Unavailable("save checkpoint", err)
		}
		_, err := tx.Exec(ctx, `INSERT INTO ledger_checkpoints (size, root, note)
			SELECT $1, $2, $3 WHERE coalesce((SELECT size FROM ledger_checkpoints ORDER BY id DESC LIMIT 1), 0) <= $1`,
			c.Size, c.Root[:], c.Note)
		return store.Unavailable("save checkpoint", err)
	})
}

// checkpointLock is the key of the transaction-level advisory lock that
// serializes saving checkpoints.
const checkpointLock int64 = 0x61686370 // "ahcp"

// LatestCheckpoint implements store.Ledger.
func (s *Store) LatestCheckpoint(ctx context.Context) (store.Checkpoint, error) {
	c, err := sqlstore.ScanCheckpoint(s.pool.QueryRow(ctx, `SELECT `+sqlstore.CheckpointColumns+` FROM ledger_checkpoints ORDER BY id DESC LIMIT 1`))
	if errors.Is(err, pgx.ErrNoRows) {
		return c, fmt.Errorf("checkpoint: %w", anyhook.ErrNotFound)
	}
	return c, store.Unavailable("latest checkpoint", err)
}

// Checkpoints implements store.Ledger.
func (s *Store) Checkpoints(ctx context.Context) ([]store.Checkpoint, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+sqlstore.CheckpointColumns+` FROM ledger_checkpoints ORDER BY id`)
	if err != nil {
		return nil, store.Unavailable("checkpoints", err)
	}
	out, err := collect(rows, sqlstore.ScanCheckpoint)
	return out, store.Unavailable("checkpoints", err)
}

// PruneBodies implements store.Ledger. It locks the candidate events FOR
// UPDATE, skipping those a replay or resend holds (see sendable), and
// empties their bodies in a later statement that checks their deliveries
// again: its snapshot sees every delivery that a replay holding the lock
// before had committed.
func (s *Store) PruneBodies(ctx context.Context, receivedBefore time.Time, after int64, limit int) (store.PruneStep, error) {
	var step store.PruneStep
	err := s.tx(ctx, "prune bodies", func(tx pgx.Tx) error {
		step = store.PruneStep{Last: after}
		rows, err := tx.Query(ctx, `SELECT l.idx, e.id, e.received_at < $1,
				e.received_at < $1 AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id AND `+sqlstore.NeedsBody+`)
			FROM ledger_entries l JOIN events e ON e.id = l.event_id
			WHERE NOT l.body_pruned AND l.idx > $2
			ORDER BY l.idx LIMIT $3
			FOR UPDATE OF e SKIP LOCKED`, receivedBefore, after, limit)
		if err != nil {
			return store.Unavailable("prune bodies", err)
		}
		items, err := collect(rows, sqlstore.ScanPruneCandidate)
		if err != nil {
			return store.Unavailable("prune bodies", err)
		}
		var ids []string
		for _, it := range items {
			step.Examined++
			step.Last = it.Index
			if it.Old {
				step.Old++
			}
			if it.Prunable {
				ids = append(ids, it.EventID)
			}
		}
		if len(ids) == 0 {
			return nil
		}
		rows, err = tx.Query(ctx, `UPDATE events e SET body = ''::bytea
			WHERE e.id = ANY($1) AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id AND `+sqlstore.NeedsBody+`)
			RETURNING e.id`, ids)
		if err != nil {
			return store.Unavailable("prune bodies", err)
		}
		if ids, err = collect(rows, sqlstore.ScanString); err != nil {
			return store.Unavailable("prune bodies", err)
		}
		if _, err := tx.Exec(ctx, `UPDATE ledger_entries SET body_pruned = true WHERE event_id = ANY($1)`, ids); err != nil {
			return store.Unavailable("prune bodies", err)
		}
		step.Pruned = len(ids)
		return nil
	})
	return step, err
}

// PruneActivity implements store.Ledger: a range of the rollup's primary
// key, which starts with the minute; rows a fold holds are skipped, for
// the next call.
func (s *Store) PruneActivity(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := s.tx(ctx, "prune activity", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM activity WHERE (minute, destination, kind, shard) IN (
			SELECT minute, destination, kind, shard FROM activity WHERE minute < $1 ORDER BY minute LIMIT $2 FOR UPDATE SKIP LOCKED)`,
			before.Unix()/60, limit)
		if err != nil {
			return store.Unavailable("prune activity", err)
		}
		n = tag.RowsAffected()
		return nil
	})
	return int(n), err
}

// PrunedStillNeeded implements store.Ledger.
func (s *Store) PrunedStillNeeded(ctx context.Context, limit int) ([]store.LedgerEntry, error) {
	rows, err := s.pool.Query(ctx, `SELECT l.idx, l.event_id FROM ledger_entries l
		WHERE l.body_pruned AND EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = l.event_id AND `+sqlstore.NeedsBody+`)
		ORDER BY l.idx LIMIT $1`, limit)
	if err != nil {
		return nil, store.Unavailable("pruned still needed", err)
	}
	out, err := collect(rows, sqlstore.ScanEntryID)
	return out, store.Unavailable("pruned still needed", err)
}

// LedgerKeys implements store.Ledger.
func (s *Store) LedgerKeys(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT verifier_key FROM ledger_keys ORDER BY seq`)
	if err != nil {
		return nil, store.Unavailable("log keys", err)
	}
	out, err := collect(rows, sqlstore.ScanString)
	return out, store.Unavailable("log keys", err)
}

// PinLedgerKey implements store.Ledger. Of processes starting at once, the
// first INSERT wins; the others wait for its commit, insert nothing, and
// read its key back.
func (s *Store) PinLedgerKey(ctx context.Context, key string) (string, error) {
	var cur string
	err := s.tx(ctx, "pin log key", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO ledger_keys (seq, verifier_key) VALUES (1, $1) ON CONFLICT DO NOTHING`, key); err != nil {
			return store.Unavailable("pin log key", err)
		}
		return store.Unavailable("pin log key", tx.QueryRow(ctx, `SELECT verifier_key FROM ledger_keys ORDER BY seq DESC LIMIT 1`).Scan(&cur))
	})
	return cur, err
}

// RotateLedgerKey implements store.Ledger.
func (s *Store) RotateLedgerKey(ctx context.Context, from, to string, bridge store.Checkpoint) error {
	return s.tx(ctx, "rotate log key", func(tx pgx.Tx) error {
		var seq int64
		var cur string
		err := tx.QueryRow(ctx, `SELECT seq, verifier_key FROM ledger_keys ORDER BY seq DESC LIMIT 1 FOR UPDATE`).Scan(&seq, &cur)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return store.Unavailable("rotate log key", err)
		}
		if cur != from {
			return fmt.Errorf("rotate log key: the key in force is %q, not %q: %w", cur, from, anyhook.ErrInvalid)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO ledger_keys (seq, verifier_key) VALUES ($1, $2)`, seq+1, to); err != nil {
			if itemLevel(err) {
				return fmt.Errorf("rotate log key: %w: %w", anyhook.ErrInvalid, err)
			}
			return store.Unavailable("rotate log key", err)
		}
		_, err = tx.Exec(ctx, `INSERT INTO ledger_checkpoints (size, root, note) VALUES ($1, $2, $3)`, bridge.Size, bridge.Root[:], bridge.Note)
		return store.Unavailable("rotate log key", err)
	})
}
