package sqlite_test

import (
	"database/sql"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// TestWALCopiedInTheBackground: a commit reaches the database file
// itself (not only the WAL) without waiting for the writer's automatic
// WAL copy, which SQLite would run inside a later commit only once the
// WAL held 1,000 pages, and without closing the store. The file is read
// with immutable=1, which ignores the WAL.
func TestWALCopiedInTheBackground(t *testing.T) {
	t.Parallel()
	s, path := openFile(t)
	id := store.NewID()
	res, err := s.Ingest(t.Context(), []store.NewEvent{{Event: anyhook.Event{ID: id, Source: "generic", DedupKey: "k1",
		ReceivedAt: time.Now(), Method: "POST", Path: "/webhooks/generic", Body: []byte(`{}`)}}})
	if err != nil || res[0].Err != nil {
		t.Fatalf("Ingest: %v %v", err, res)
	}
	file, err := sql.Open("sqlite", "file:"+path+"?mode=ro&immutable=1")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	file.SetMaxOpenConns(1)
	var seen string
	testwait.For(t, "the event in the database file", func() bool {
		// immutable: each check opens the file anew (no cache kept).
		file.SetMaxIdleConns(0)
		err := file.QueryRow(`SELECT id FROM events WHERE id = ?`, id).Scan(&seen)
		return err == nil && seen == id
	})
}
