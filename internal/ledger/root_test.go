package ledger

import (
	"crypto/sha256"
	"testing"

	"golang.org/x/mod/sumdb/tlog"
)

// TestRootStack checks the streaming root Verify computes against tlog's
// tree for every size up to 300.
func TestRootStack(t *testing.T) {
	t.Parallel()
	var stored []tlog.Hash
	r := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = stored[x]
		}
		return out, nil
	})
	var s rootStack
	for n := int64(0); n <= 300; n++ {
		want, err := tlog.TreeHash(n, r)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.root(); got != want {
			t.Fatalf("size %d: root %x, want %x", n, got, want)
		}
		h := sha256.Sum256([]byte{byte(n), byte(n >> 8)})
		hs, err := tlog.StoredHashesForRecordHash(n, h, r)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, hs...)
		s.push(h)
	}
}
