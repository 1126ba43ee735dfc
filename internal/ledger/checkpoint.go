package ledger

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// ErrBadCheckpoint is wrapped by every failure to open or parse a signed
// checkpoint.
var ErrBadCheckpoint = errors.New("bad checkpoint")

// Key is the ledger's Ed25519 signing key.
type Key struct {
	Signer note.Signer
	// VerifierKey is the public key in note format
	// ("<name>+<hash>+<base64>"), what users pin.
	VerifierKey string
	Verifier    note.Verifier
}

// Name is the key's name (the default origin).
func (k *Key) Name() string { return k.Signer.Name() }

// LoadOrCreateKey reads the signing key at path, creating it (mode 0600,
// named name, or "anyhook-log-<random>" when name is "") when the file
// does not exist. Processes that start at once on one path agree on one
// key: the file appears complete or not at all.
func LoadOrCreateKey(path, name string) (*Key, error) {
	k, err := LoadKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return k, err
	}
	if name == "" {
		b := make([]byte, 4)
		rand.Read(b)
		name = "anyhook-log-" + hex.EncodeToString(b)
	}
	skey, _, err := note.GenerateKey(rand.Reader, name)
	if err != nil {
		return nil, fmt.Errorf("log key: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("log key: %w", err)
	}
	// Write the key under a temporary name, then link it into place: a
	// link never replaces an existing file, and a reader never sees the
	// file before it is whole (an O_EXCL create would be visible empty).
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, fmt.Errorf("log key: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(skey + "\n")
	if err = errors.Join(err, f.Chmod(0o600), f.Sync(), f.Close()); err != nil {
		return nil, fmt.Errorf("log key %s: %w", path, err)
	}
	if err := os.Link(f.Name(), path); errors.Is(err, fs.ErrExist) {
		return LoadKey(path) // another process made it first
	} else if err != nil {
		return nil, fmt.Errorf("log key %s: %w", path, err)
	}
	return ParseKey(skey)
}

// LoadKey reads the signing key at path.
func LoadKey(path string) (*Key, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("log key: %w", err)
	}
	k, err := ParseKey(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, fmt.Errorf("log key %s: %w", path, err)
	}
	return k, nil
}

// ParseKey parses a note signer key ("PRIVATE+KEY+<name>+<hash>+<base64>").
func ParseKey(skey string) (*Key, error) {
	signer, err := note.NewSigner(skey)
	if err != nil {
		return nil, errors.New("not a note signing key (PRIVATE+KEY+…)")
	}
	// PRIVATE+KEY+<name>+<hash>+<base64>: the name has no '+', the base64 may.
	parts := strings.SplitN(strings.TrimPrefix(skey, "PRIVATE+KEY+"), "+", 3)
	if len(parts) != 3 {
		return nil, errors.New("not a note signing key (PRIVATE+KEY+…)")
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 1+ed25519.SeedSize || raw[0] != 1 {
		return nil, errors.New("not an Ed25519 note signing key")
	}
	pub := ed25519.NewKeyFromSeed(raw[1:]).Public().(ed25519.PublicKey)
	vkey, err := note.NewEd25519VerifierKey(signer.Name(), pub)
	if err != nil {
		return nil, err
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, err
	}
	return &Key{Signer: signer, VerifierKey: vkey, Verifier: v}, nil
}

// Tree is the content of a checkpoint.
type Tree struct {
	Origin string
	Size   int64
	Root   tlog.Hash
	// Time is when the checkpoint was signed, to the second, as the signer
	// states it in the signed text (the "time" extension line); zero for a
	// checkpoint without one (those signed before AnyHook wrote it).
	Time time.Time
	// Rotation, on the checkpoint anyhook log rotate-key makes (signed by
	// both keys), hands the ledger from one key to the next (the "rotate"
	// extension line).
	Rotation *Rotation
}

// Rotation names the key a ledger was signed with up to a checkpoint and the
// key it is signed with from there on (note verifier keys).
type Rotation struct{ From, To string }

// rotateLine starts the extension line of a key rotation:
// "rotate <old verifier key> <new verifier key>".
const rotateLine = "rotate "

// timeLine starts the checkpoint extension line that states the signing
// time: "time 2026-03-01T12:00:00Z" (RFC 3339, UTC, whole seconds).
const timeLine = "time "

// CheckpointText is the C2SP checkpoint body:
// "<origin>\n<size>\n<base64 root>\n", then, when t.Time is set, the
// extension line "time <RFC 3339 UTC>\n".
func CheckpointText(t Tree) string {
	s := fmt.Sprintf("%s\n%d\n%s\n", t.Origin, t.Size, base64.StdEncoding.EncodeToString(t.Root[:]))
	if !t.Time.IsZero() {
		s += timeLine + t.Time.UTC().Truncate(time.Second).Format(time.RFC3339) + "\n"
	}
	if r := t.Rotation; r != nil {
		s += rotateLine + r.From + " " + r.To + "\n"
	}
	return s
}

// ParseCheckpointText parses a checkpoint body. Extension lines after the
// root are allowed; the "time" line is read (once, RFC 3339 UTC to the
// second), others are ignored.
func ParseCheckpointText(text string) (Tree, error) {
	lines := strings.SplitAfter(text, "\n")
	if len(lines) < 4 || !strings.HasSuffix(lines[2], "\n") {
		return Tree{}, fmt.Errorf("%w: want origin, size and root lines", ErrBadCheckpoint)
	}
	var t Tree
	t.Origin = strings.TrimSuffix(lines[0], "\n")
	size, err := strconv.ParseInt(strings.TrimSuffix(lines[1], "\n"), 10, 64)
	if err != nil || size < 0 || t.Origin == "" {
		return Tree{}, fmt.Errorf("%w: malformed origin or size", ErrBadCheckpoint)
	}
	t.Size = size
	root, err := base64.StdEncoding.DecodeString(strings.TrimSuffix(lines[2], "\n"))
	if err != nil || len(root) != tlog.HashSize {
		return Tree{}, fmt.Errorf("%w: malformed root hash", ErrBadCheckpoint)
	}
	copy(t.Root[:], root)
	for _, line := range lines[3:] {
		line = strings.TrimSuffix(line, "\n")
		if v, ok := strings.CutPrefix(line, timeLine); ok {
			at, err := time.Parse(time.RFC3339, v)
			if err != nil || !t.Time.IsZero() || at.Format(time.RFC3339) != v || at.Location() != time.UTC {
				return Tree{}, fmt.Errorf("%w: malformed or repeated time line %q", ErrBadCheckpoint, v)
			}
			t.Time = at
		}
		if v, ok := strings.CutPrefix(line, rotateLine); ok {
			from, to, _ := strings.Cut(v, " ")
			_, errFrom := note.NewVerifier(from)
			_, errTo := note.NewVerifier(to)
			if errFrom != nil || errTo != nil || from == to || t.Rotation != nil {
				return Tree{}, fmt.Errorf("%w: malformed or repeated rotate line", ErrBadCheckpoint)
			}
			t.Rotation = &Rotation{From: from, To: to}
		}
	}
	return t, nil
}

// SignCheckpoint signs t with k: a note whose text is CheckpointText(t).
// A rotation checkpoint (t.Rotation) is signed by every key given.
func SignCheckpoint(k *Key, t Tree, more ...*Key) ([]byte, error) {
	signers := []note.Signer{k.Signer}
	for _, m := range more {
		signers = append(signers, m.Signer)
	}
	return note.Sign(&note.Note{Text: CheckpointText(t)}, signers...)
}

// KeyID is the short form of a verifier key for messages: "<name>+<hash>".
func KeyID(vkey string) string {
	name, rest, _ := strings.Cut(vkey, "+")
	hash, _, _ := strings.Cut(rest, "+")
	return name + "+" + hash
}

// OpenCheckpoint checks the signature of a signed checkpoint with the
// verifier key vkey and parses it. A checkpoint whose text was edited (size
// or root) fails here.
func OpenCheckpoint(msg []byte, v note.Verifier) (Tree, error) {
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		return Tree{}, fmt.Errorf("%w: signature does not verify with key %s+%08x: %v", ErrBadCheckpoint, v.Name(), v.KeyHash(), err)
	}
	return ParseCheckpointText(n.Text)
}
