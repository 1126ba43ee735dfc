package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// KeyMismatchError refuses a signing key that is not the ledger's: the
// database records the key in force (store.Ledger.LedgerKeys), and a process
// with another key would sign checkpoints the others cannot verify.
type KeyMismatchError struct {
	Key    string // this process's verifier key
	InUse  string // the ledger's key in force ("" when only its checkpoints say so)
	Reason string
}

func (e *KeyMismatchError) Error() string {
	return e.Reason
}

// PinKey makes sure key is the ledger's key in force. On the first start it
// records it (of processes starting at once on one database, the first
// writer wins); a ledger that has checkpoints but no recorded key yet (one
// created before keys were recorded) is only pinned to a key that verifies
// its latest checkpoint. Any other key is refused with a
// *KeyMismatchError; the way to change keys is Rotate.
func PinKey(ctx context.Context, st store.Ledger, key *Key) error {
	keys, err := st.LedgerKeys(ctx)
	if err != nil {
		return err
	}
	if len(keys) == 0 {
		cp, err := st.LatestCheckpoint(ctx)
		switch {
		case err == nil:
			if _, err := OpenCheckpoint(cp.Note, key.Verifier); err != nil {
				return &KeyMismatchError{Key: key.VerifierKey, Reason: fmt.Sprintf(
					"the key %s is not the one this log was signed with (its latest checkpoint does not verify with it): every process on the database must use the same key file",
					KeyID(key.VerifierKey))}
			}
		case !errors.Is(err, anyhook.ErrNotFound):
			return err
		}
	}
	inUse, err := st.PinLedgerKey(ctx, key.VerifierKey)
	if err != nil {
		return err
	}
	if inUse != key.VerifierKey {
		return &KeyMismatchError{Key: key.VerifierKey, InUse: inUse, Reason: fmt.Sprintf(
			"the key %s is not this log's key %s (recorded in the database): every process on the database must use the same key file — copy it from a host that runs (anyhook log key prints the key a config uses); to change the log's key on purpose, run anyhook log rotate-key",
			KeyID(key.VerifierKey), KeyID(inUse))}
	}
	return nil
}

// RotateOptions configure Rotate.
type RotateOptions struct {
	Origin string // the checkpoint origin; default the old key's name
	Now    func() time.Time
}

// Rotate hands the ledger from key old to key next. It checks the ledger as the
// checkpointer does (and signs what is not yet in a checkpoint with old),
// then stores, in one transaction, next as the key in force and a
// checkpoint of the whole log signed by both keys whose "rotate" line
// names both: a verifier that trusts either key learns the other from it
// (Verify). Checkpoints before it must be signed by old, those after it by
// next. Stop every gateway first: one still running with old stops
// signing at its next round, but may sign one more checkpoint that Verify
// then reports.
func Rotate(ctx context.Context, st store.Ledger, old, next *Key, opt RotateOptions) (store.Checkpoint, error) {
	if opt.Origin == "" {
		opt.Origin = old.Name()
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if old.VerifierKey == next.VerifierKey {
		return store.Checkpoint{}, fmt.Errorf("rotate: the new key is the key in force: %w", anyhook.ErrInvalid)
	}
	if err := PinKey(ctx, st, old); err != nil {
		return store.Checkpoint{}, err
	}
	if _, _, err := NewCheckpointer(st, CheckpointerOptions{Key: old, Origin: opt.Origin, Now: opt.Now}).Once(ctx); err != nil {
		return store.Checkpoint{}, fmt.Errorf("rotate: the log does not check out, so no key is handed over: %w", err)
	}
	size, err := st.LedgerSize(ctx)
	if err != nil {
		return store.Checkpoint{}, err
	}
	root, err := tlog.TreeHash(size, HashReader(ctx, st))
	if err != nil {
		return store.Checkpoint{}, fmt.Errorf("rotate: tree hash: %w", err)
	}
	t := Tree{Origin: opt.Origin, Size: size, Root: root, Time: opt.Now(), Rotation: &Rotation{From: old.VerifierKey, To: next.VerifierKey}}
	msg, err := SignCheckpoint(old, t, next)
	if err != nil {
		return store.Checkpoint{}, fmt.Errorf("rotate: sign: %w", err)
	}
	cp := store.Checkpoint{Size: size, Root: root, Note: msg}
	if err := st.RotateLedgerKey(ctx, old.VerifierKey, next.VerifierKey, cp); err != nil {
		return store.Checkpoint{}, err
	}
	return cp, nil
}
