package sqlite_test

import (
	"database/sql"
	"errors"
	"testing"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/store/storetest"
)

func openMemory(t *testing.T) store.Store {
	s, err := sqlite.Open(t.Context(), ":memory:", sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// sqlite::memory: is the same store: the whole conformance suite passes
// on it (its reads share the writer's one connection, so a read path that
// held a connection across a write would deadlock here).
func TestMemoryConformance(t *testing.T) { storetest.Exercise(t, openMemory) }

// Ping answers from the schema: a database that lost its tables is down,
// although SELECT 1 still answers.
func TestPingNeedsTheSchema(t *testing.T) {
	t.Parallel()
	s, path := openFile(t)
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("Ping of a fresh store: %v", err)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`DROP TABLE schema_migrations`); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(t.Context()); !errors.Is(err, anyhook.ErrUnavailable) {
		t.Fatalf("Ping without the schema = %v, want ErrUnavailable", err)
	}
}
