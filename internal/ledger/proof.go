package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// Proof is an inclusion proof of one event in the ledger, against a signed
// checkpoint. Hashes are base64 in JSON.
type Proof struct {
	EventID    string   `json:"event_id"`
	Index      int64    `json:"index"`
	LeafHash   []byte   `json:"leaf_hash"`
	HeaderHash []byte   `json:"header_hash"`
	BodyHash   []byte   `json:"body_hash"`
	BodyPruned bool     `json:"body_pruned"`
	Proof      [][]byte `json:"proof"`      // tlog.RecordProof, bottom up
	TreeSize   int64    `json:"tree_size"`  // the checkpoint's size
	Checkpoint string   `json:"checkpoint"` // the signed checkpoint note
}

// CheckpointInfo describes the latest checkpoint.
type CheckpointInfo struct {
	Origin      string    `json:"origin"`
	Size        int64     `json:"size"`
	Root        []byte    `json:"root"`
	Checkpoint  string    `json:"checkpoint"` // the signed note
	CreatedAt   time.Time `json:"created_at"`
	VerifierKey string    `json:"verifier_key,omitempty"`
}

// SignedCheckpoint returns the signed checkpoint note in b, the contents of
// a file kept to verify against later: the note itself (what log.push_url
// receives), or a JSON object with the note in its checkpoint field (the
// answer of GET /api/log/checkpoint, a CheckpointInfo, saved as is).
func SignedCheckpoint(b []byte) ([]byte, error) {
	trimmed := bytes.TrimSpace(b)
	if !bytes.HasPrefix(trimmed, []byte("{")) {
		return b, nil
	}
	var info struct {
		Checkpoint *string `json:"checkpoint"`
	}
	if err := json.Unmarshal(trimmed, &info); err != nil {
		return nil, fmt.Errorf("%w: a JSON object that does not parse: %v", ErrBadCheckpoint, err)
	}
	if info.Checkpoint == nil || *info.Checkpoint == "" {
		return nil, fmt.Errorf("%w: a JSON object without a \"checkpoint\" (the signed note, as in GET /api/log/checkpoint's answer)", ErrBadCheckpoint)
	}
	return []byte(*info.Checkpoint), nil
}

// Latest returns the latest checkpoint (anyhook.ErrNotFound before the
// first one).
func Latest(ctx context.Context, st store.Ledger) (CheckpointInfo, error) {
	cp, err := st.LatestCheckpoint(ctx)
	if err != nil {
		if errors.Is(err, anyhook.ErrNotFound) {
			return CheckpointInfo{}, fmt.Errorf("no checkpoint yet: %w", anyhook.ErrNotFound)
		}
		return CheckpointInfo{}, err
	}
	info := CheckpointInfo{Size: cp.Size, Root: cp.Root[:], Checkpoint: string(cp.Note), CreatedAt: cp.CreatedAt}
	if t, err := ParseCheckpointText(noteText(cp.Note)); err == nil {
		info.Origin = t.Origin
	}
	return info, nil
}

// noteText is the text of a signed note, up to the blank line before the
// signatures (unverified).
func noteText(msg []byte) string {
	s := string(msg)
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '\n' && s[i+1] == '\n' {
			return s[:i+1]
		}
	}
	return s
}

// Prove returns the inclusion proof of an event against the latest
// checkpoint. An event not yet covered by a checkpoint is
// anyhook.ErrNotFound (ask again after the next checkpoint).
func Prove(ctx context.Context, st store.Ledger, eventID string) (*Proof, error) {
	e, err := st.LedgerEntry(ctx, eventID)
	if err != nil {
		return nil, err
	}
	cp, err := st.LatestCheckpoint(ctx)
	if errors.Is(err, anyhook.ErrNotFound) || (err == nil && e.Index >= cp.Size) {
		return nil, fmt.Errorf("event %s is at log index %d but not yet in a checkpoint; ask again after the next one: %w", eventID, e.Index, anyhook.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	rp, err := tlog.ProveRecord(cp.Size, e.Index, HashReader(ctx, st))
	if err != nil {
		return nil, fmt.Errorf("ledger: proof for index %d: %w", e.Index, err)
	}
	p := &Proof{
		EventID: eventID, Index: e.Index,
		LeafHash: e.LeafHash[:], HeaderHash: e.HeaderHash[:], BodyHash: e.BodyHash[:], BodyPruned: e.BodyPruned,
		TreeSize: cp.Size, Checkpoint: string(cp.Note), Proof: make([][]byte, 0, len(rp)),
	}
	for _, h := range rp {
		p.Proof = append(p.Proof, h[:])
	}
	return p, nil
}

// CheckProof checks, with nothing but the ledger's public key, that ev (as
// returned by GET /api/events/{id}: id, source, dedup key, receive time,
// headers, body) is at p.Index in the ledger signed by p.Checkpoint. When the
// body was pruned (ev.Body empty and p.BodyPruned), p.BodyHash stands in
// for it. docs/ledger.md shows the same steps as a standalone program.
func CheckProof(v note.Verifier, ev *anyhook.Event, p *Proof) error {
	t, err := OpenCheckpoint([]byte(p.Checkpoint), v)
	if err != nil {
		return err
	}
	leaf := LeafOf(ev)
	if p.BodyPruned && len(ev.Body) == 0 && len(p.BodyHash) == tlog.HashSize {
		leaf = LeafWithBodyHash(ev, tlog.Hash(p.BodyHash))
	}
	rp := make(tlog.RecordProof, len(p.Proof))
	for i, h := range p.Proof {
		if len(h) != tlog.HashSize {
			return errors.New("proof: malformed hash")
		}
		rp[i] = tlog.Hash(h)
	}
	if err := tlog.CheckRecord(rp, t.Size, t.Root, p.Index, leaf.Hash); err != nil {
		return fmt.Errorf("event %s is not at index %d of the signed log of size %d: %w", ev.ID, p.Index, t.Size, err)
	}
	return nil
}

// Reader serves the latest checkpoint and inclusion proofs: the admin
// API's view of the ledger.
type Reader struct {
	Store store.Ledger
	Key   *Key // for the verifier key shown with checkpoints; may be nil
}

// Checkpoint returns the latest checkpoint with the ledger's public key.
func (r Reader) Checkpoint(ctx context.Context) (CheckpointInfo, error) {
	info, err := Latest(ctx, r.Store)
	if err == nil && r.Key != nil {
		info.VerifierKey = r.Key.VerifierKey
	}
	return info, err
}

// Proof returns the inclusion proof of an event against the latest
// checkpoint.
func (r Reader) Proof(ctx context.Context, eventID string) (*Proof, error) {
	return Prove(ctx, r.Store, eventID)
}
