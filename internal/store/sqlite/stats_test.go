package sqlite_test

import (
	"path/filepath"
	"testing"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/store/storetest"
)

func TestStats(t *testing.T) {
	t.Parallel()
	storetest.RunStats(t, func(t *testing.T) store.Store {
		s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	})
}
