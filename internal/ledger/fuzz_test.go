package ledger

import (
	"crypto/rand"
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
