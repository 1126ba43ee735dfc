package main

import (
	"database/sql"
	"path/filepath"
	"testing"

	_ "modernc.org/sqlite"
)

// TestKillMidBatchLeavesNoHalfEvent kills the gateway with kill -9 while 64
// clients keep the group committer's batches full (many requests share
// each transaction), then reads the database as the crash left it: every
// acknowledged event is there with its delivery, and no event, acknowledged
// or not, exists without its delivery (a batch is all or nothing).
func TestKillMidBatchLeavesNoHalfEvent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg, _ := sqliteGateway(t, dir)
	acked := burstThenKill(t, start(t, cfg), "evt_batch", 3000, 64)

	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "anyhook.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var stored, half int
	if err := db.QueryRow(`SELECT count(*) FROM events WHERE dedup_key LIKE 'evt_batch_%'`).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(`SELECT count(*) FROM events e WHERE NOT EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = e.id)`).Scan(&half); err != nil {
		t.Fatal(err)
	}
	if half != 0 {
		t.Errorf("%d events without their delivery after kill -9: a batch was half-written", half)
	}
	missing := 0
	for id := range acked {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM deliveries WHERE event_id = ?`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d acknowledged events lost (or without their one delivery)", missing, len(acked))
	}
	// Events may exist that were committed but not acknowledged (the
	// kill fell between the commit and the answer), never the reverse.
	if stored < len(acked) {
		t.Errorf("%d events stored, fewer than the %d acknowledged", stored, len(acked))
	}
	t.Logf("%d acknowledged before kill -9, %d stored, none half-written", len(acked), stored)
}
