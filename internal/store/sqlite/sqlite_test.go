package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/store/storetest"
)

func open(t *testing.T) store.Store {
	s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestConformance(t *testing.T)       { storetest.Run(t, open) }
func TestLedgerConformance(t *testing.T) { storetest.RunLedger(t, open) }
