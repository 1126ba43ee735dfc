package sqlite_test

import (
	"path/filepath"
	"sync"
	"testing"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/store/storetest"
)

func open(t *testing.T) store.Store {
	s, _ := openFile(t)
	return s
}

// openFile opens a store on a new file and returns it with the file's
// path; the store is closed when the test ends.
func openFile(t *testing.T) (*sqlite.Store, string) {
	path := filepath.Join(t.TempDir(), "anyhook.db")
	s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s, path
}

func TestConformance(t *testing.T) { storetest.Exercise(t, open) }

// TestMigrateConcurrently: processes opening a new file at once (gateways
// started together) all open it; the migrations run once.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "anyhook.db")
	const n = 6
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// Separate handles, as separate processes have.
			s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
			if err == nil {
				s.Close()
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
		}
	}
}
