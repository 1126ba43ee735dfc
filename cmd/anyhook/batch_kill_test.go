package main

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/anyhook/anyhook/internal/testkit/testwait"
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

// TestKillKeepsRecordedOutcomes: outcomes commit without waiting for fsync
// (the SQLite store's Finish), and kill -9 loses none of them — a commit
// is in the operating system's hands once it returns. While deliveries
// are still being recorded, the test reads which are delivered, kills the
// gateway at once, and reads the file as the kill left it: every one it
// saw delivered still is.
func TestKillKeepsRecordedOutcomes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg, _ := sqliteGateway(t, dir)
	p := start(t, cfg)
	const n = 300
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				sendEvent(p.url, fmt.Sprintf("evt_outcome_%d", i))
			}
		})
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "anyhook.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	delivered := func() map[string]bool {
		rows, err := db.Query(`SELECT id FROM deliveries WHERE status = 'delivered'`)
		if err != nil {
			return nil
		}
		defer rows.Close()
		ids := map[string]bool{}
		for rows.Next() {
			var id string
			if rows.Scan(&id) == nil {
				ids[id] = true
			}
		}
		return ids
	}
	var seen map[string]bool
	testwait.For(t, "a third of the outcomes recorded", func() bool {
		seen = delivered()
		return len(seen) >= n/3
	})
	p.kill()
	wg.Wait()
	after := delivered()
	lost := 0
	for id := range seen {
		if !after[id] {
			lost++
		}
	}
	if lost > 0 || after == nil {
		t.Errorf("%d of %d outcomes seen recorded before kill -9 are gone after it", lost, len(seen))
	}
	t.Logf("%d outcomes recorded before kill -9, %d after", len(seen), len(after))
}
