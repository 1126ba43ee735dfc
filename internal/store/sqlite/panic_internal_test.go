package sqlite

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"
)

// TestUnsyncedPanicPropagates: a panic inside an unsynced transaction's fn
// reaches the caller at once. It used to wait for the transaction's
// context to end (Finish's 30 s timeout): the transaction stayed open, so
// setting the connection back to FULL failed, and dropping the
// connection waited for that transaction to end.
func TestUnsyncedPanicPropagates(t *testing.T) {
	s, err := Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := make(chan any, 1)
	go func() {
		defer func() { got <- recover() }()
		s.txUnsyncedHeld(t.Context(), "probe", func(*sql.Tx) error { panic("boom") })
	}()
	select {
	case p := <-got:
		if p != "boom" {
			t.Fatalf("recovered %v, want the panic", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a panic inside txUnsyncedHeld's fn did not reach its caller within 10 s")
	}
	var level int
	if err := s.w.QueryRowContext(t.Context(), `PRAGMA synchronous`).Scan(&level); err != nil || level != 2 {
		t.Fatalf("writer after the panic: synchronous=%d, %v; want 2 (FULL)", level, err)
	}
}
