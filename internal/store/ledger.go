package store

import (
	"context"
	"fmt"
	"time"

	"github.com/anyhook/anyhook"
)

// Hash is a SHA-256 digest: a leaf, a node of the ledger's Merkle tree, or the
// hash of an event's headers or body.
type Hash = [32]byte

// LedgerEntry is one position of the tamper-evident ledger (internal/ledger):
// the event at Index and the inputs of its leaf that are not kept in the
// event row itself once its body is pruned.
type LedgerEntry struct {
	Index       int64
	EventID     string
	HeaderHash  Hash // SHA-256 of the event's canonical headers
	BodyHash    Hash // SHA-256 of the exact body
	LeafHash    Hash
	SequencedAt time.Time // by the store's clock
	// Late marks an event that turned up in the store long after a
	// checkpoint that should already have held it: most likely a row
	// inserted behind the gateway's back. It is logged all the same.
	Late bool
	// BodyPruned is set once the body was removed by retention; BodyHash
	// then stands in for it.
	BodyPruned bool
}

// LedgerBatch is what a SequenceFunc asks the store to append.
type LedgerBatch struct {
	// Entries take positions size, size+1, … in order, one per event given
	// to the SequenceFunc (same order).
	Entries []LedgerEntry
	// Hashes are the tree's new stored hashes (tlog.StoredHashes), the
	// first at stored-hash index HashIndex, the rest following.
	HashIndex int64
	Hashes    []Hash
}

// SequenceFunc builds the next batch of the log: size is the number of
// entries so far, evs the events to append (in id order, with headers and
// body), and readHashes reads stored hashes of the tree so far.
type SequenceFunc func(size int64, evs []anyhook.Event, readHashes func(indexes []int64) ([]Hash, error)) (LedgerBatch, error)

// LedgerRecord is an entry together with its event; Event is nil when the
// event row is gone.
type LedgerRecord struct {
	Entry LedgerEntry
	Event *anyhook.Event
}

// Checkpoint is a signed statement of the ledger's size and root hash.
type Checkpoint struct {
	Size      int64
	Root      Hash
	Note      []byte // the signed note (golang.org/x/mod/sumdb/note)
	CreatedAt time.Time
}

// Ledger is the storage of the tamper-evident ledger (internal/ledger), a
// part of Store. Entries and stored hashes are append-only: nothing here
// changes or deletes them.
type Ledger interface {
	// Sequence appends up to limit events that have no ledger entry yet,
	// oldest commit first, sorted by id within the batch. In one
	// transaction, during which no other Sequence runs on the same
	// database, it reads the ledger size and those events (with headers and
	// bodies), calls fn (not at all when there is nothing to append) and
	// stores the batch fn returns. It returns how many entries it appended.
	// A batch that does not continue the ledger (wrong indexes, wrong events)
	// is refused with an error wrapping anyhook.ErrInvalid.
	Sequence(ctx context.Context, limit int, fn SequenceFunc) (int, error)

	// LedgerSize is the number of entries.
	LedgerSize(ctx context.Context) (int64, error)
	// ReadHashes returns the stored hashes at the given stored-hash
	// indexes; a missing one is an error wrapping anyhook.ErrNotFound.
	ReadHashes(ctx context.Context, indexes []int64) ([]Hash, error)
	// LedgerRecords returns up to limit entries with index >= from, in
	// index order, each with its event (headers and body included).
	LedgerRecords(ctx context.Context, from int64, limit int) ([]LedgerRecord, error)
	// LedgerEntry returns the entry of an event (anyhook.ErrNotFound when
	// it has none yet).
	LedgerEntry(ctx context.Context, eventID string) (LedgerEntry, error)
	// Unsequenced returns up to limit events without a ledger entry that were
	// received before receivedBefore, in id order. Only ID, Source,
	// DedupKey and ReceivedAt are filled.
	Unsequenced(ctx context.Context, receivedBefore time.Time, limit int) ([]anyhook.Event, error)

	// SaveCheckpoint records a checkpoint; CreatedAt is set by the store's
	// clock. One smaller than the latest stored checkpoint (another
	// process's checkpointer got ahead) is not stored, so that the stored
	// sizes never shrink.
	SaveCheckpoint(ctx context.Context, c Checkpoint) error
	// LatestCheckpoint returns the newest checkpoint (anyhook.ErrNotFound
	// when there is none).
	LatestCheckpoint(ctx context.Context) (Checkpoint, error)
	// Checkpoints returns every stored checkpoint in the order they were
	// saved, oldest first (none: no checkpoints and no error). Verify reads
	// them all: their sizes must never shrink.
	Checkpoints(ctx context.Context) ([]Checkpoint, error)

	// PruneBodies looks at up to limit log entries whose bodies are kept,
	// in index order after the index after (-1: from the first), and
	// empties the bodies of those whose events were received before
	// receivedBefore and have no delivery still needing the body
	// (sqlstore.NeedsBody: pending, delivering, paused, held, or dead and
	// not discarded), marking their entries BodyPruned; events, headers,
	// dedup keys and hashes stay. It is atomic with Replay,
	// ReplayDeliveries and Resolve: an event gets a new delivery and keeps
	// its body, or is pruned and refuses the delivery.
	//
	// One call is one transaction over at most limit entries, however many
	// the log holds, so that the writer is never held long: a pass walks
	// the log with PruneStep.Last (ledger.Prune).
	PruneBodies(ctx context.Context, receivedBefore time.Time, after int64, limit int) (PruneStep, error)
	// PruneActivity deletes up to limit rows of the activity rollup
	// (StatsReader.Activity) of the minutes before before, oldest first, and
	// returns how many. It lives beside PruneBodies so that one retention
	// loop keeps both bounded; an Activity window reaching past before
	// counts nothing there.
	PruneActivity(ctx context.Context, before time.Time, limit int) (int, error)
	// PrunedStillNeeded returns up to limit entries, in index order (Index
	// and EventID filled), marked BodyPruned although their event has a
	// delivery that still needs the body (sqlstore.NeedsBody): pruning that
	// PruneBodies never does.
	PrunedStillNeeded(ctx context.Context, limit int) ([]LedgerEntry, error)

	// LedgerKeys returns the ledger's public keys (note verifier keys) in the
	// order they came into force; the last is the key in force. None
	// before the first PinLedgerKey.
	LedgerKeys(ctx context.Context) ([]string, error)
	// PinLedgerKey records key as the ledger's first key unless one is recorded
	// already, atomically (of processes starting at once, the first writer
	// wins), and returns the key in force.
	PinLedgerKey(ctx context.Context, key string) (string, error)
	// RotateLedgerKey puts key to in force in place of from and saves bridge
	// (a checkpoint signed by both), in one transaction. When from is not
	// the key in force it changes nothing and returns an error wrapping
	// anyhook.ErrInvalid.
	RotateLedgerKey(ctx context.Context, from, to string, bridge Checkpoint) error
}

// CheckBatch is the check both backends make before storing b: it must
// continue a ledger of size entries and nhashes stored hashes with exactly
// the events evs, in order.
func CheckBatch(size, nhashes int64, evs []anyhook.Event, b LedgerBatch) error {
	if len(b.Entries) != len(evs) {
		return fmt.Errorf("ledger batch: %d entries for %d events: %w", len(b.Entries), len(evs), anyhook.ErrInvalid)
	}
	for i, e := range b.Entries {
		if e.Index != size+int64(i) || e.EventID != evs[i].ID {
			return fmt.Errorf("ledger batch: entry %d is (%d, %s), want (%d, %s): %w", i, e.Index, e.EventID, size+int64(i), evs[i].ID, anyhook.ErrInvalid)
		}
	}
	if b.HashIndex != nhashes {
		return fmt.Errorf("ledger batch: hashes start at %d, want %d: %w", b.HashIndex, nhashes, anyhook.ErrInvalid)
	}
	return nil
}

// PruneStep is what one PruneBodies call did.
type PruneStep struct {
	Examined int   // entries looked at, at most the limit
	Old      int   // of those, received before the cutoff
	Pruned   int   // bodies emptied
	Last     int64 // the index of the last entry looked at (after, if none)
}
