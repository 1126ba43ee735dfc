package sqlstore

import (
	"fmt"
	"net/http"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// Hash is a scan destination for a stored 32-byte hash; a value of
// another length is read as zeros, which verification then reports as a
// mismatch.
func Hash(h *store.Hash) any { return (*hashDest)(h) }

type hashDest store.Hash

// Scan implements sql.Scanner.
func (h *hashDest) Scan(src any) error {
	b, _ := src.([]byte)
	*h = hashDest{}
	if len(b) == len(h) {
		copy(h[:], b)
	}
	return nil
}

// rawHeader scans stored headers into an event's Header, keeping bytes
// that do not decode under a name no request can carry: the leaf
// recomputed from them then differs and names the event.
type rawHeader struct{ ev *anyhook.Event }

// Scan implements sql.Scanner.
func (r rawHeader) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case []byte:
		b = v
	case string:
		b = []byte(v)
	}
	h, err := store.DecodeHeader(b)
	if err != nil {
		h = http.Header{"\x00undecodable": {string(b)}}
	}
	r.ev.Header = h
	return nil
}

// LedgerEventDest is EventDest for the log: headers that do not decode are
// kept as they are rather than failing the scan. Call the func after the
// scan.
func LedgerEventDest(ev *anyhook.Event) ([]any, func()) {
	dest, _ := EventDest(ev)
	dest[6] = rawHeader{ev}
	return dest, func() {
		if ev.Body == nil {
			ev.Body = []byte{}
		}
	}
}

// ScanLedgerEvent scans one row of EventColumns as LedgerEventDest does.
func ScanLedgerEvent(sc Scanner) (anyhook.Event, error) {
	var ev anyhook.Event
	dest, done := LedgerEventDest(&ev)
	if err := sc.Scan(dest...); err != nil {
		return ev, err
	}
	done()
	return ev, nil
}

// EntryColumns lists what ScanEntry reads, each name prefixed by p.
func EntryColumns(p string) string {
	return p + "idx, " + p + "event_id, " + p + "header_hash, " + p + "body_hash, " + p + "leaf_hash, " + p + "sequenced_at, " + p + "late, " + p + "body_pruned"
}

// EntryDest returns the scan destinations of EntryColumns into e.
func EntryDest(e *store.LedgerEntry) []any {
	return []any{&e.Index, &e.EventID, Hash(&e.HeaderHash), Hash(&e.BodyHash), Hash(&e.LeafHash), Time(&e.SequencedAt), &e.Late, &e.BodyPruned}
}

// ScanEntry scans one row of EntryColumns.
func ScanEntry(sc Scanner) (store.LedgerEntry, error) {
	var e store.LedgerEntry
	err := sc.Scan(EntryDest(&e)...)
	return e, err
}

// ScanEntryID scans a row of idx and event_id.
func ScanEntryID(sc Scanner) (store.LedgerEntry, error) {
	var e store.LedgerEntry
	return e, sc.Scan(&e.Index, &e.EventID)
}

// PruneCandidate is a log entry whose body is kept, as PruneBodies looks
// at it.
type PruneCandidate struct {
	Index    int64
	EventID  string
	Old      bool // received before the cutoff
	Prunable bool // and no delivery needs its body
}

// ScanPruneCandidate scans a row of idx, event_id, old and prunable.
func ScanPruneCandidate(sc Scanner) (PruneCandidate, error) {
	var c PruneCandidate
	return c, sc.Scan(&c.Index, &c.EventID, &c.Old, &c.Prunable)
}

// CheckpointColumns lists what ScanCheckpoint reads.
const CheckpointColumns = `size, root, note, created_at`

// ScanCheckpoint scans one row of CheckpointColumns.
func ScanCheckpoint(sc Scanner) (store.Checkpoint, error) {
	var c store.Checkpoint
	err := sc.Scan(&c.Size, Hash(&c.Root), &c.Note, Time(&c.CreatedAt))
	return c, err
}

// EventHeadColumns lists what ScanEventHead reads: what names an event
// that the log has not sequenced.
const EventHeadColumns = `id, source, coalesce(dedup_key, ''), received_at`

// ScanEventHead scans one row of EventHeadColumns.
func ScanEventHead(sc Scanner) (anyhook.Event, error) {
	var ev anyhook.Event
	return ev, sc.Scan(&ev.ID, &ev.Source, &ev.DedupKey, Time(&ev.ReceivedAt))
}

// ScanString scans a row of one text column.
func ScanString(sc Scanner) (string, error) {
	var v string
	return v, sc.Scan(&v)
}

// HashRow is one row of idx, hash from ledger_hashes.
type HashRow struct {
	Index int64
	Hash  store.Hash
}

// ScanHashRow scans one row of idx, hash.
func ScanHashRow(sc Scanner) (HashRow, error) {
	var r HashRow
	return r, sc.Scan(&r.Index, Hash(&r.Hash))
}

// PlaceHashes returns the hashes of rows in the order of idx (an index
// may be asked for more than once); one that rows lack is ErrNotFound.
func PlaceHashes(idx []int64, rows []HashRow) ([]store.Hash, error) {
	got := make(map[int64]store.Hash, len(rows))
	for _, r := range rows {
		got[r.Index] = r.Hash
	}
	out := make([]store.Hash, len(idx))
	for i, x := range idx {
		h, ok := got[x]
		if !ok {
			return nil, fmt.Errorf("stored hash %d: %w", x, anyhook.ErrNotFound)
		}
		out[i] = h
	}
	return out, nil
}
