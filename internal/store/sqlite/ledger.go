package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// The tamper-evident ledger's storage (store.Ledger). Tables: migrations/0002_ledger.sql.

var _ store.Ledger = (*Store)(nil)

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// Sequence implements store.Ledger. New events are found by rowid, which
// SQLite hands out in commit order (it has one writer), past the watermark
// in ledger_state. The batch is read and hashed on a read snapshot, so the
// single writer is held only for the inserts; if another sequencer (another
// process on the same file) moved the ledger meanwhile, nothing is written and
// the next round starts over.
func (s *Store) Sequence(ctx context.Context, limit int, fn store.SequenceFunc) (int, error) {
	rtx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return 0, unavailable(err)
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
		return 0, unavailable(err)
	}
	mark := seen.mark
	var evs []anyhook.Event
	for rows.Next() {
		var rowid int64
		var ev anyhook.Event
		err := rows.Scan(append([]any{&rowid}, eventDest(&ev)...)...)
		if err == nil {
			err = finishEvent(&ev)
		}
		if err != nil {
			rows.Close()
			return 0, unavailable(err)
		}
		mark = max(mark, rowid)
		evs = append(evs, ev)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, unavailable(err)
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
	err = s.tx(ctx, func(tx *sql.Tx) error {
		now, err := readLedgerState(ctx, tx)
		if err != nil {
			return err
		}
		if now != seen {
			return nil // another sequencer went first: start over next round
		}
		at := micros(s.now())
		for _, e := range b.Entries {
			_, err := tx.ExecContext(ctx, `INSERT INTO ledger_entries (idx, event_id, header_hash, body_hash, leaf_hash, sequenced_at, late)
				VALUES (?, ?, ?, ?, ?, ?, ?)`, e.Index, e.EventID, e.HeaderHash[:], e.BodyHash[:], e.LeafHash[:], at, e.Late)
			if err != nil {
				return unavailable(err)
			}
		}
		for i, h := range b.Hashes {
			if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_hashes (idx, hash) VALUES (?, ?)`, b.HashIndex+int64(i), h[:]); err != nil {
				return unavailable(err)
			}
		}
		if _, err := tx.ExecContext(ctx, `UPDATE ledger_state SET seq_rowid = ? WHERE id = 1`, mark); err != nil {
			return unavailable(err)
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
	return st, unavailable(err)
}

// eventDest and finishEvent split scanEvent so that more columns can be
// scanned alongside.
func eventDest(ev *anyhook.Event) []any {
	ev.Header = nil
	return []any{&ev.ID, &ev.Source, &ev.DedupKey, &scanMicros{&ev.ReceivedAt}, &ev.Method, &ev.Path, &rawHeader{ev}, &ev.Body, &ev.Object, &ev.Version, &ev.Stale, &ev.Duplicates, &ev.Type}
}

func finishEvent(ev *anyhook.Event) error {
	if ev.Body == nil {
		ev.Body = []byte{}
	}
	return nil
}

// scanMicros scans Unix microseconds into a time.
type scanMicros struct{ t *time.Time }

func (m *scanMicros) Scan(v any) error {
	us, ok := v.(int64)
	if !ok {
		return fmt.Errorf("received_at: got %T", v)
	}
	*m.t = fromMicros(us)
	return nil
}

// rawHeader scans the stored header JSON into an event's Header.
type rawHeader struct{ ev *anyhook.Event }

func (r *rawHeader) Scan(v any) error {
	var b []byte
	switch v := v.(type) {
	case []byte:
		b = v
	case string:
		b = []byte(v)
	case nil:
	default:
		return fmt.Errorf("headers: got %T", v)
	}
	h, err := store.DecodeHeader(b)
	if err != nil {
		// Not what the gateway writes: keep the bytes, so that the leaf
		// recomputed from them differs and names this event.
		h = http.Header{"\x00undecodable": {string(b)}}
	}
	r.ev.Header = h
	return nil
}

func readHashes(ctx context.Context, q querier, idx []int64) ([]store.Hash, error) {
	out := make([]store.Hash, len(idx))
	pos := make(map[int64][]int, len(idx))
	for i, x := range idx {
		pos[x] = append(pos[x], i)
	}
	for chunk := range slices.Chunk(idx, 500) {
		args := make([]any, len(chunk))
		for i, x := range chunk {
			args[i] = x
		}
		rows, err := q.QueryContext(ctx, `SELECT idx, hash FROM ledger_hashes WHERE idx IN (?`+strings.Repeat(",?", len(chunk)-1)+`)`, args...)
		if err != nil {
			return nil, unavailable(err)
		}
		for rows.Next() {
			var x int64
			var h []byte
			if err := rows.Scan(&x, &h); err != nil {
				rows.Close()
				return nil, unavailable(err)
			}
			for _, i := range pos[x] {
				copy(out[i][:], h)
			}
			delete(pos, x)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, unavailable(err)
		}
	}
	for x := range pos {
		return nil, fmt.Errorf("stored hash %d: %w", x, anyhook.ErrNotFound)
	}
	return out, nil
}

// LedgerSize implements store.Ledger.
func (s *Store) LedgerSize(ctx context.Context) (int64, error) {
	var n int64
	err := s.r.QueryRowContext(ctx, `SELECT coalesce(max(idx) + 1, 0) FROM ledger_entries`).Scan(&n)
	return n, unavailable(err)
}

// ReadHashes implements store.Ledger.
func (s *Store) ReadHashes(ctx context.Context, indexes []int64) ([]store.Hash, error) {
	return readHashes(ctx, s.r, indexes)
}

const entryCols = `l.idx, l.event_id, l.header_hash, l.body_hash, l.leaf_hash, l.sequenced_at, l.late, l.body_pruned`

func entryDest(e *store.LedgerEntry) []any {
	return []any{&e.Index, &e.EventID, (*hashScan)(&e.HeaderHash), (*hashScan)(&e.BodyHash), (*hashScan)(&e.LeafHash), &scanMicros{&e.SequencedAt}, &e.Late, &e.BodyPruned}
}

// hashScan scans a 32-byte blob; another length is left as zeros, which
// verification then reports as a mismatch.
type hashScan store.Hash

func (h *hashScan) Scan(v any) error {
	b, _ := v.([]byte)
	*h = hashScan{}
	if len(b) == len(h) {
		copy(h[:], b)
	}
	return nil
}

// LedgerRecords implements store.Ledger.
func (s *Store) LedgerRecords(ctx context.Context, from int64, limit int) ([]store.LedgerRecord, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+entryCols+`, e.id IS NOT NULL,
			coalesce(e.id, ''), coalesce(e.source, ''), coalesce(e.dedup_key, ''), coalesce(e.received_at, 0), coalesce(e.method, ''),
			coalesce(e.path, ''), coalesce(e.headers, x''), coalesce(e.body, x''), coalesce(e.object, ''), coalesce(e.version, ''),
			coalesce(e.stale, 0), coalesce(e.duplicates, 0), coalesce(e.type, '')
		FROM ledger_entries l LEFT JOIN events e ON e.id = l.event_id
		WHERE l.idx >= ? ORDER BY l.idx LIMIT ?`, from, limit)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []store.LedgerRecord
	for rows.Next() {
		var r store.LedgerRecord
		var found bool
		ev := new(anyhook.Event)
		dest := append(entryDest(&r.Entry), &found)
		if err := rows.Scan(append(dest, eventDest(ev)...)...); err != nil {
			return nil, unavailable(err)
		}
		if found {
			finishEvent(ev)
			r.Event = ev
		}
		out = append(out, r)
	}
	return out, unavailable(rows.Err())
}

// LedgerEntry implements store.Ledger.
func (s *Store) LedgerEntry(ctx context.Context, eventID string) (store.LedgerEntry, error) {
	var e store.LedgerEntry
	err := s.r.QueryRowContext(ctx, `SELECT `+entryCols+` FROM ledger_entries l WHERE l.event_id = ?`, eventID).Scan(entryDest(&e)...)
	if errors.Is(err, sql.ErrNoRows) {
		return e, fmt.Errorf("event %s has no log entry: %w", eventID, anyhook.ErrNotFound)
	}
	return e, unavailable(err)
}

// Unsequenced implements store.Ledger.
func (s *Store) Unsequenced(ctx context.Context, receivedBefore time.Time, limit int) ([]anyhook.Event, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, source, coalesce(dedup_key, ''), received_at FROM events e
		WHERE received_at < ? AND NOT EXISTS (SELECT 1 FROM ledger_entries l WHERE l.event_id = e.id)
		ORDER BY id LIMIT ?`, micros(receivedBefore), limit)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []anyhook.Event
	for rows.Next() {
		var ev anyhook.Event
		if err := rows.Scan(&ev.ID, &ev.Source, &ev.DedupKey, &scanMicros{&ev.ReceivedAt}); err != nil {
			return nil, unavailable(err)
		}
		out = append(out, ev)
	}
	return out, unavailable(rows.Err())
}

// SaveCheckpoint implements store.Ledger.
func (s *Store) SaveCheckpoint(ctx context.Context, c store.Checkpoint) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		// Never smaller than the latest stored checkpoint (the store's
		// contract; on PostgreSQL several processes' checkpointers race).
		_, err := tx.ExecContext(ctx, `INSERT INTO ledger_checkpoints (size, root, note, created_at)
			SELECT ?, ?, ?, ? WHERE coalesce((SELECT size FROM ledger_checkpoints ORDER BY id DESC LIMIT 1), 0) <= ?`,
			c.Size, c.Root[:], c.Note, micros(s.now()), c.Size)
		return unavailable(err)
	})
}

// LatestCheckpoint implements store.Ledger.
func (s *Store) LatestCheckpoint(ctx context.Context) (store.Checkpoint, error) {
	var c store.Checkpoint
	err := s.r.QueryRowContext(ctx, `SELECT size, root, note, created_at FROM ledger_checkpoints ORDER BY id DESC LIMIT 1`).
		Scan(&c.Size, (*hashScan)(&c.Root), &c.Note, &scanMicros{&c.CreatedAt})
	if errors.Is(err, sql.ErrNoRows) {
		return c, fmt.Errorf("checkpoint: %w", anyhook.ErrNotFound)
	}
	return c, unavailable(err)
}

// Checkpoints implements store.Ledger.
func (s *Store) Checkpoints(ctx context.Context) ([]store.Checkpoint, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT size, root, note, created_at FROM ledger_checkpoints ORDER BY id`)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []store.Checkpoint
	for rows.Next() {
		var c store.Checkpoint
		if err := rows.Scan(&c.Size, (*hashScan)(&c.Root), &c.Note, &scanMicros{&c.CreatedAt}); err != nil {
			return nil, unavailable(err)
		}
		out = append(out, c)
	}
	return out, unavailable(rows.Err())
}

// PruneBodies implements store.Ledger. SQLite runs one write transaction
// at a time, so no replay or resend interleaves with it.
func (s *Store) PruneBodies(ctx context.Context, receivedBefore time.Time, limit int) (int, error) {
	var n int
	err := s.tx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT l.idx, l.event_id FROM ledger_entries l JOIN events e ON e.id = l.event_id
			WHERE l.body_pruned = 0 AND e.received_at < ?
				AND NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = l.event_id AND `+store.NeedsBody+`)
			ORDER BY l.idx LIMIT ?`, micros(receivedBefore), limit)
		if err != nil {
			return unavailable(err)
		}
		type item struct {
			idx int64
			id  string
		}
		var items []item
		for rows.Next() {
			var it item
			if err := rows.Scan(&it.idx, &it.id); err != nil {
				rows.Close()
				return unavailable(err)
			}
			items = append(items, it)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return unavailable(err)
		}
		for _, it := range items {
			if _, err := tx.ExecContext(ctx, `UPDATE events SET body = x'' WHERE id = ?`, it.id); err != nil {
				return unavailable(err)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE ledger_entries SET body_pruned = 1 WHERE idx = ?`, it.idx); err != nil {
				return unavailable(err)
			}
		}
		n = len(items)
		return nil
	})
	return n, err
}

// PrunedStillNeeded implements store.Ledger.
func (s *Store) PrunedStillNeeded(ctx context.Context, limit int) ([]store.LedgerEntry, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT l.idx, l.event_id FROM ledger_entries l
		WHERE l.body_pruned = 1 AND EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = l.event_id AND `+store.NeedsBody+`)
		ORDER BY l.idx LIMIT ?`, limit)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []store.LedgerEntry
	for rows.Next() {
		var e store.LedgerEntry
		if err := rows.Scan(&e.Index, &e.EventID); err != nil {
			return nil, unavailable(err)
		}
		out = append(out, e)
	}
	return out, unavailable(rows.Err())
}

// LedgerKeys implements store.Ledger.
func (s *Store) LedgerKeys(ctx context.Context) ([]string, error) {
	return ledgerKeys(ctx, s.r)
}

func ledgerKeys(ctx context.Context, q querier) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT verifier_key FROM ledger_keys ORDER BY seq`)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return nil, unavailable(err)
		}
		out = append(out, k)
	}
	return out, unavailable(rows.Err())
}

// PinLedgerKey implements store.Ledger.
func (s *Store) PinLedgerKey(ctx context.Context, key string) (string, error) {
	var cur string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO ledger_keys (seq, verifier_key, added_at) VALUES (1, ?, ?) ON CONFLICT DO NOTHING`,
			key, micros(s.now())); err != nil {
			return unavailable(err)
		}
		return unavailable(tx.QueryRowContext(ctx, `SELECT verifier_key FROM ledger_keys ORDER BY seq DESC LIMIT 1`).Scan(&cur))
	})
	return cur, err
}

// RotateLedgerKey implements store.Ledger.
func (s *Store) RotateLedgerKey(ctx context.Context, from, to string, bridge store.Checkpoint) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		var seq int64
		var cur string
		err := tx.QueryRowContext(ctx, `SELECT seq, verifier_key FROM ledger_keys ORDER BY seq DESC LIMIT 1`).Scan(&seq, &cur)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return unavailable(err)
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
		return unavailable(err)
	})
}
