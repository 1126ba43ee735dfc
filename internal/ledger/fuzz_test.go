package ledger

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"testing"

	"golang.org/x/mod/sumdb/note"
)

// FuzzOpenCheckpoint feeds untrusted checkpoint files (--checkpoint, a
// witness's copy) to the parser: no panic, and whatever opens re-encodes to
// the text that was signed.
func FuzzOpenCheckpoint(f *testing.F) {
	skey, _, err := note.GenerateKey(rand.Reader, "fuzz")
	if err != nil {
		f.Fatal(err)
	}
	k, err := ParseKey(skey)
	if err != nil {
		f.Fatal(err)
	}
	good, _ := SignCheckpoint(k, Tree{Origin: "fuzz", Size: 42})
	f.Add(good)
	f.Add([]byte("fuzz\n42\nAAAA\n\n— fuzz x\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, msg []byte) {
		tr, err := OpenCheckpoint(msg, k.Verifier)
		if err != nil {
			return
		}
		n, _ := note.Open(msg, note.VerifierList(k.Verifier))
		if tr.Size < 0 || tr.Origin == "" || n == nil {
			t.Fatalf("opened %+v", tr)
		}
		if _, err := ParseCheckpointText(n.Text); err != nil {
			t.Fatal(err)
		}
	})
}

// A --checkpoint file is the signed note, or GET /api/log/checkpoint's
// JSON answer (CheckpointInfo) saved as is: both give the note, which
// opens; JSON without one is a bad checkpoint, never a panic.
func TestSignedCheckpoint(t *testing.T) {
	t.Parallel()
	skey, _, err := note.GenerateKey(rand.Reader, "file")
	if err != nil {
		t.Fatal(err)
	}
	k, err := ParseKey(skey)
	if err != nil {
		t.Fatal(err)
	}
	signed, err := SignCheckpoint(k, Tree{Origin: "file", Size: 7})
	if err != nil {
		t.Fatal(err)
	}
	asJSON, _ := json.Marshal(CheckpointInfo{Origin: "file", Size: 7, Checkpoint: string(signed)})
	for name, in := range map[string][]byte{"note": signed, "API answer": asJSON, "API answer indented": append([]byte("\n  "), asJSON...)} {
		b, err := SignedCheckpoint(in)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if tr, err := OpenCheckpoint(b, k.Verifier); err != nil || tr.Size != 7 {
			t.Errorf("%s: opens as %+v, %v", name, tr, err)
		}
	}
	for _, in := range []string{`{"size": 7}`, `{"checkpoint": ""}`, `{"checkpoint": 7}`, `{not json`} {
		if _, err := SignedCheckpoint([]byte(in)); !errors.Is(err, ErrBadCheckpoint) {
			t.Errorf("SignedCheckpoint(%s) = %v, want ErrBadCheckpoint", in, err)
		}
	}
}
