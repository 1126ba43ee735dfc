package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// The tamper-evident ledger's storage (store.Ledger). Tables: migrations/0002_ledger.sql.

// Sequence implements store.Ledger. New events are found by rowid, which
// SQLite hands out in commit order (it has one writer), past the watermark
// in ledger_state. The batch is read and hashed on a read snapshot, so the
// single writer is held only for the inserts; if another sequencer (another
// process on the same file) moved the ledger meanwhile, nothing is written and
// the next round starts over.
func (s *Store) Sequence(ctx context.Context, limit int, fn store.SequenceFunc) (int, error) {
	rtx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return 0, store.Unavailable("sequence", err)
	}
	defer rtx.Rollback()
	seen, err := readLedgerState(ctx, rtx)
	if err != nil {
		return 0, err
	}
	rows, err := rtx.QueryContext(ctx, `SELECT rowid, `+eventCols+` FROM events
		WHERE rowid > ? AND NOT EXISTS (SELECT 1 FROM ledger_entries l WHERE l.event_id = events.id)
		ORDER BY rowid LIMIT ?`, seen.mark, limit)
	if err != nil {
		return 0, store.Unavailable("sequence", err)
	}
	mark := seen.mark
	evs, err := sqlstore.Collect(rows, func(sc scanner) (anyhook.Event, error) {
		var rowid int64
		var ev anyhook.Event
		dest, done := sqlstore.LedgerEventDest(&ev)
		err := sc.Scan(append([]any{&rowid}, dest...)...)
		done()
		mark = max(mark, rowid)
		return ev, err
	})
	rows.Close()
	if err != nil {
		return 0, store.Unavailable("sequence", err)
	}
	if len(evs) == 0 {
		return 0, nil
	}
	slices.SortFunc(evs, func(a, b anyhook.Event) int { return strings.Compare(a.ID, b.ID) })
	b, err := fn(seen.size, evs, func(idx []int64) ([]store.Hash, error) { return readHashes(ctx, rtx, idx) })
	if err != nil {
		return 0, err
	}
	if err := store.CheckBatch(seen.size, seen.nhashes, evs, b); err != nil {
		return 0, err
	}
	rtx.Rollback()

	var n int
	err = s.tx(ctx, "sequence", func(tx *sql.Tx) error {
		now, err := readLedgerState(ctx, tx)
		if err != nil {
			return err
		}
		if now != seen {
			return nil // another sequencer went first: start over next round
		}
		at := micros(s.now())
		st := s.stmts(ctx, tx)
		err = insertRows(st, &entryInserts, len(b.Entries), func(i int, args []any) []any {
			e := &b.Entries[i]
			return append(args, e.Index, e.EventID, e.HeaderHash[:], e.BodyHash[:], e.LeafHash[:], at, e.Late)
		})
		if err != nil {
			return store.Unavailable("sequence", err)
		}
		err = insertRows(st, &hashInserts, len(b.Hashes), func(i int, args []any) []any {
			return append(args, b.HashIndex+int64(i), b.Hashes[i][:])
		})
		if err != nil {
			return store.Unavailable("sequence", err)
		}
		if _, err := tx.ExecContext(ctx, `UPDATE ledger_state SET seq_rowid = ? WHERE id = 1`, mark); err != nil {
			return store.Unavailable("sequence", err)
		}
		n = len(b.Entries)
		return nil
	})
	return n, err
}

// ledgerState is where the ledger stands: the sequencer's rowid watermark, the
// number of entries and of stored hashes.
type ledgerState struct{ mark, size, nhashes int64 }

func readLedgerState(ctx context.Context, tx *sql.Tx) (ledgerState, error) {
	var st ledgerState
	err := tx.QueryRowContext(ctx, `SELECT seq_rowid,
		(SELECT coalesce(max(idx) + 1, 0) FROM ledger_entries),
		(SELECT coalesce(max(idx) + 1, 0) FROM ledger_hashes)
		FROM ledger_state WHERE id = 1`).Scan(&st.mark, &st.size, &st.nhashes)
	return st, store.Unavailable("ledger state", err)
}

func readHashes(ctx context.Context, q querier, idx []int64) ([]store.Hash, error) {
	var got []sqlstore.HashRow
	for chunk := range slices.Chunk(idx, 500) {
		args := make([]any, len(chunk))
		for i, x := range chunk {
			args[i] = x
		}
		rows, err := query(ctx, q, sqlstore.ScanHashRow, `SELECT idx, hash FROM ledger_hashes WHERE idx IN (?`+strings.Repeat(",?", len(chunk)-1)+`)`, args...)
		if err != nil {
			return nil, store.Unavailable("read hashes", err)
		}
		got = append(got, rows...)
	}
	return sqlstore.PlaceHashes(idx, got)
}

// LedgerSize implements store.Ledger.
func (s *Store) LedgerSize(ctx context.Context) (int64, error) {
	var n int64
	err := s.r.QueryRowContext(ctx, `SELECT coalesce(max(idx) + 1, 0) FROM ledger_entries`).Scan(&n)
	return n, store.Unavailable("ledger size", err)
}

// ReadHashes implements store.Ledger.
func (s *Store) ReadHashes(ctx context.Context, indexes []int64) ([]store.Hash, error) {
	return readHashes(ctx, s.r, indexes)
}

var entryCols = sqlstore.EntryColumns("l.")

// LedgerRecords implements store.Ledger.
func (s *Store) LedgerRecords(ctx context.Context, from int64, limit int) ([]store.LedgerRecord, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+entryCols+`, e.id IS NOT NULL,
			coalesce(e.id, ''), coalesce(e.source, ''), coalesce(e.dedup_key, ''), coalesce(e.received_at, 0), coalesce(e.method, ''),
			coalesce(e.path, ''), coalesce(e.headers, x''), coalesce(e.body, x''), coalesce(e.object, ''), coalesce(e.version, ''),
			coalesce(e.stale, 0), coalesce(e.duplicates, 0), coalesce(e.type, ''), coalesce(e.origin, 'webhook')
		FROM ledger_entries l LEFT JOIN events e ON e.id = l.event_id
		WHERE l.idx >= ? ORDER BY l.idx LIMIT ?`, from, limit)
	if err != nil {
		return nil, store.Unavailable("ledger records", err)
	}
	defer rows.Close()
	out, err := sqlstore.Collect(rows, func(sc scanner) (store.LedgerRecord, error) {
		var r store.LedgerRecord
		var found bool
		ev := new(anyhook.Event)
		evDest, done := sqlstore.LedgerEventDest(ev)
		if err := sc.Scan(append(append(sqlstore.EntryDest(&r.Entry), &found), evDest...)...); err != nil {
			return r, err
		}
		if found {
			done()
			r.Event = ev
		}
		return r, nil
	})
	return out, store.Unavailable("ledger records", err)
}

// LedgerEntry implements store.Ledger.
func (s *Store) LedgerEntry(ctx context.Context, eventID string) (store.LedgerEntry, error) {
	var e store.LedgerEntry
	err := s.r.QueryRowContext(ctx, `SELECT `+entryCols+` FROM ledger_entries l WHERE l.event_id = ?`, eventID).Scan(sqlstore.EntryDest(&e)...)
	if errors.Is(err, sql.ErrNoRows) {
		return e, fmt.Errorf("event %s has no log entry: %w", eventID, anyhook.ErrNotFound)
	}
	return e, store.Unavailable("ledger entry", err)
}

// Unsequenced implements store.Ledger.
func (s *Store) Unsequenced(ctx context.Context, receivedBefore time.Time, limit int) ([]anyhook.Event, error) {
	out, err := query(ctx, s.r, sqlstore.ScanEventHead, `SELECT `+sqlstore.EventHeadColumns+` FROM events e
		WHERE received_at < ? AND NOT EXISTS (SELECT 1 FROM ledger_entries l WHERE l.event_id = e.id)
		ORDER BY id LIMIT ?`, micros(receivedBefore), limit)
	return out, store.Unavailable("unsequenced", err)
}

// SaveCheckpoint implements store.Ledger.
func (s *Store) SaveCheckpoint(ctx context.Context, c store.Checkpoint) error {
	return s.tx(ctx, "save checkpoint", func(tx *sql.Tx) error {
		// Never smaller than the latest stored checkpoint (the store's
		// contract; on PostgreSQL several processes' checkpointers race).
		_, err := tx.ExecContext(ctx, `INSERT INTO ledger_checkpoints (size, root, note, created_at)
			SELECT ?, ?, ?, ? WHERE coalesce((SELECT size FROM ledger_checkpoints ORDER BY id DESC LIMIT 1), 0) <= ?`,
			c.Size, c.Root[:], c.Note, micros(s.now()), c.Size)
		return store.Unavailable("save checkpoint", err)
	})
}

// LatestCheckpoint implements store.Ledger.
func (s *Store) LatestCheckpoint(ctx context.Context) (store.Checkpoint, error) {
	c, err := sqlstore.ScanCheckpoint(s.r.QueryRowContext(ctx, `SELECT `+sqlstore.CheckpointColumns+` FROM ledger_checkpoints ORDER BY id DESC LIMIT 1`))
	if errors.Is(err, sql.ErrNoRows) {
		return c, fmt.Errorf("checkpoint: %w", anyhook.ErrNotFound)
	}
	return c, store.Unavailable("latest checkpoint", err)
}

// Checkpoints implements store.Ledger.
func (s *Store) Checkpoints(ctx context.Context) ([]store.Checkpoint, error) {
	out, err := query(ctx, s.r, sqlstore.ScanCheckpoint, `SELECT `+sqlstore.CheckpointColumns+` FROM ledger_checkpoints ORDER BY id`)
	return out, store.Unavailable("checkpoints", err)
}

// PruneBodies implements store.Ledger. SQLite runs one write transaction
// at a time, so no replay or resend interleaves with it.
func (s *Store) PruneBodies(ctx context.Context, receivedBefore time.Time, after int64, limit int) (store.PruneStep, error) {
	var step store.PruneStep
	err := s.tx(ctx, "prune bodies", func(tx *sql.Tx) error {
		step = store.PruneStep{Last: after}
		cutoff := micros(receivedBefore)
		items, err := query(ctx, tx, sqlstore.ScanPruneCandidate, `SELECT l.idx, l.event_id, e.received_at < ?,
				e.received_at < ? AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = l.event_id AND `+sqlstore.NeedsBody+`)
			FROM ledger_entries l JOIN events e ON e.id = l.event_id
			WHERE l.body_pruned = 0 AND l.idx > ?
			ORDER BY l.idx LIMIT ?`, cutoff, cutoff, after, limit)
		if err != nil {
			return store.Unavailable("prune bodies", err)
		}
		for _, it := range items {
			step.Examined++
			step.Last = it.Index
			if it.Old {
				step.Old++
			}
			if !it.Prunable {
				continue
			}
			if _, err := tx.ExecContext(ctx, `UPDATE events SET body = x'' WHERE id = ?`, it.EventID); err != nil {
				return store.Unavailable("prune bodies", err)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE ledger_entries SET body_pruned = 1 WHERE idx = ?`, it.Index); err != nil {
				return store.Unavailable("prune bodies", err)
			}
			step.Pruned++
		}
		return nil
	})
	return step, err
}

// PruneActivity implements store.Ledger: a range of the rollup's primary
// key, which starts with the minute.
func (s *Store) PruneActivity(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int64
	err := s.tx(ctx, "prune activity", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM activity WHERE (minute, destination, kind) IN (
			SELECT minute, destination, kind FROM activity WHERE minute < ? ORDER BY minute LIMIT ?)`, before.Unix()/60, limit)
		if err != nil {
			return store.Unavailable("prune activity", err)
		}
		n, err = res.RowsAffected()
		return err
	})
	return int(n), err
}

// PrunedStillNeeded implements store.Ledger.
func (s *Store) PrunedStillNeeded(ctx context.Context, limit int) ([]store.LedgerEntry, error) {
	out, err := query(ctx, s.r, sqlstore.ScanEntryID, `SELECT l.idx, l.event_id FROM ledger_entries l
		WHERE l.body_pruned = 1 AND EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = l.event_id AND `+sqlstore.NeedsBody+`)
		ORDER BY l.idx LIMIT ?`, limit)
	return out, store.Unavailable("pruned still needed", err)
}

// LedgerKeys implements store.Ledger.
func (s *Store) LedgerKeys(ctx context.Context) ([]string, error) {
	return ledgerKeys(ctx, s.r)
}

func ledgerKeys(ctx context.Context, q querier) ([]string, error) {
	out, err := query(ctx, q, sqlstore.ScanString, `SELECT verifier_key FROM ledger_keys ORDER BY seq`)
	return out, store.Unavailable("ledger keys", err)
}

// PinLedgerKey implements store.Ledger.
func (s *Store) PinLedgerKey(ctx context.Context, key string) (string, error) {
	var cur string
	err := s.tx(ctx, "pin ledger key", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_keys (seq, verifier_key, added_at) VALUES (1, ?, ?) ON CONFLICT DO NOTHING`,
			key, micros(s.now())); err != nil {
			return store.Unavailable("pin ledger key", err)
		}
		return store.Unavailable("pin ledger key", tx.QueryRowContext(ctx, `SELECT verifier_key FROM ledger_keys ORDER BY seq DESC LIMIT 1`).Scan(&cur))
	})
	return cur, err
}

// RotateLedgerKey implements store.Ledger.
func (s *Store) RotateLedgerKey(ctx context.Context, from, to string, bridge store.Checkpoint) error {
	return s.tx(ctx, "rotate ledger key", func(tx *sql.Tx) error {
		var seq int64
		var cur string
		err := tx.QueryRowContext(ctx, `SELECT seq, verifier_key FROM ledger_keys ORDER BY seq DESC LIMIT 1`).Scan(&seq, &cur)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return store.Unavailable("rotate ledger key", err)
		}
		if cur != from {
			return fmt.Errorf("rotate log key: the key in force is %q, not %q: %w", cur, from, anyhook.ErrInvalid)
		}
		now := micros(s.now())
		if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_keys (seq, verifier_key, added_at) VALUES (?, ?, ?)`, seq+1, to, now); err != nil {
			return fmt.Errorf("rotate log key: %w: %w", anyhook.ErrInvalid, err)
		}
		_, err = tx.ExecContext(ctx, `INSERT INTO ledger_checkpoints (size, root, note, created_at) VALUES (?, ?, ?, ?)`,
			bridge.Size, bridge.Root[:], bridge.Note, now)
		return store.Unavailable("rotate ledger key", err)
	})
}
