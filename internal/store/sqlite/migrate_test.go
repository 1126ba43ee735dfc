package sqlite_test

import (
	"database/sql"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/store/storetest"
)

// TestMigrate6EmptiesTheQueues: an upgrade takes out of the dead and held
// queues what earlier versions left there although a person had dealt
// with it: a delivery a later replay of its event and destination took
// over, and a discarded one (found by its note); a marked delivery gets
// its resolution. Anything else stays.
func TestMigrate6EmptiesTheQueues(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "anyhook.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%.80s: %v", q, err)
		}
	}
	// The schema of version 5, as that binary left it.
	exec(`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`)
	for v, name := range []string{"0001_init", "0002_ledger", "0003_deliveries_status_event", "0004_content_key", "0005_ledger_keys"} {
		ddl, err := os.ReadFile("migrations/" + name + ".sql")
		if err != nil {
			t.Fatal(err)
		}
		exec(string(ddl))
		exec(`INSERT INTO schema_migrations VALUES (?, 1)`, v+1)
	}
	t0 := time.Now().Add(-time.Hour).UnixMicro()
	exec(`INSERT INTO events (id, source, received_at, method, path, headers, body) VALUES ('e1', 'stripe', ?, 'POST', '/webhooks/stripe', x'', x'7b7d')`, t0)
	for _, d := range []struct {
		id, dest, status, note string
		replay                 bool
		created, updated       int64
	}{
		{"d1", "billing", "dead", "discarded by an operator at 2026-01-01T00:00:00Z", false, t0, t0 + 10},
		{"d2", "crm", "dead", "", false, t0, t0 + 10},
		{"d3", "crm", "delivered", "", true, t0 + 20, t0 + 30}, // replayed d2 after it died
		{"d4", "vault", "delivered", "marked delivered by an operator at 2026-01-01T00:00:00Z", false, t0, t0 + 10},
		{"d5", "audit", "dead", "", false, t0, t0 + 10},
		{"d6", "charges", "held", "", false, t0, t0 + 50},
		{"d7", "charges", "delivered", "", true, t0 + 20, t0 + 30}, // replayed before d6 was held
	} {
		exec(`INSERT INTO deliveries (id, event_id, destination, status, replay, next_attempt_at, created_at, updated_at, note)
			VALUES (?, 'e1', ?, ?, ?, ?, ?, ?, ?)`, d.id, d.dest, d.status, d.replay, d.updated, d.created, d.updated, d.note)
	}
	// Another source's event to one of those destinations: each delivery
	// gets its own event's source (migration 0039).
	exec(`INSERT INTO events (id, source, received_at, method, path, headers, body) VALUES ('e2', 'github', ?, 'POST', '/webhooks/github', x'', x'7b7d')`, t0)
	exec(`INSERT INTO deliveries (id, event_id, destination, status, replay, next_attempt_at, created_at, updated_at, note)
		VALUES ('d8', 'e2', 'billing', 'delivered', 0, ?, ?, ?, '')`, t0, t0, t0)
	// An attempt recorded before outcomes were kept (migration 20).
	exec(`INSERT INTO attempts (delivery_id, number, started_at, duration_us, status_code, error) VALUES ('d5', 1, ?, 0, 500, 'HTTP 500')`, t0)
	db.Close()

	s, err := sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckMigration6(t, s)
	storetest.CheckMigrationSource(t, s)
}

// TestMigrateDeliveriesType: an upgrade gives every delivery its event's
// type (migration 0043), a replay's too, so that the lists of a status, a
// source and a type that read the deliveries' own find what they found
// before.
func TestMigrateDeliveriesType(t *testing.T) {
	t.Parallel()
	s, path := openFile(t)
	ids := storetest.SeedStatusSourceType(t, s)
	s.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP INDEX deliveries_status_source_type`, `ALTER TABLE deliveries DROP COLUMN type`,
		`DELETE FROM schema_migrations WHERE version = 43`} {
		if _, err := db.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s, err = sqlite.Open(t.Context(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetest.CheckStatusSourceType(t, s, ids)
}

// TestLastDeliveredIsTheLatestFinish: a destination's last success is when
// its latest delivery finished, not when its newest one did (an older one
// retried can finish later): kept by the counters since 0063, and filled
// by the migration from the deliveries of a store that had none.
func TestLastDeliveredIsTheLatestFinish(t *testing.T) {
	t.Parallel()
	s, path := openFile(t)
	ctx := t.Context()
	for _, k := range []string{"k1", "k2"} {
		ne := store.NewEvent{Event: anyhook.Event{ID: store.NewID(), Source: "s", DedupKey: k, ReceivedAt: time.Now(),
			Method: "POST", Path: "/webhooks/s", Body: []byte(`{}`)}, Destinations: []string{"d"}}
		if res, err := s.Ingest(ctx, []store.NewEvent{ne}); err != nil || res[0].Err != nil {
			t.Fatal(err, res)
		}
	}
	cs, err := s.Claim(ctx, "d", 2, time.Hour)
	if err != nil || len(cs) != 2 {
		t.Fatalf("claimed %d: %v", len(cs), err)
	}
	var before time.Time
	for _, c := range []store.Claim{cs[1], cs[0]} { // the newer first
		before = time.Now()
		time.Sleep(2 * time.Millisecond)
		out := store.Outcome{DeliveryID: c.Delivery.ID, Attempt: c.Delivery.AttemptCount, Status: anyhook.StatusDelivered,
			Result: anyhook.Attempt{Number: c.Delivery.AttemptCount, StartedAt: time.Now(), StatusCode: 200}}
		if _, err := s.Finish(ctx, []store.Outcome{out}); err != nil {
			t.Fatal(err)
		}
	}
	last := func(s *sqlite.Store) time.Time {
		t.Helper()
		qs, err := s.QueueStats(ctx, []string{"d"})
		if err != nil {
			t.Fatal(err)
		}
		return qs.LastDelivered["d"]
	}
	got := last(s)
	if got.Before(before) {
		t.Errorf("last delivered %v, before the older delivery finished (%v)", got, before)
	}
	s.Close()

	// The schema before 0063: no last_at, its triggers, the full index.
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP TRIGGER delivery_counts_insert`, `DROP TRIGGER delivery_counts_update`,
		`ALTER TABLE delivery_counts DROP COLUMN last_at`,
		`DROP INDEX deliveries_due`, `CREATE INDEX deliveries_due ON deliveries (destination, status, next_attempt_at)`,
		`DELETE FROM schema_migrations WHERE version = 63`} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()
	s, err = sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if again := last(s); !again.Equal(got) {
		t.Errorf("after the migration, last delivered %v, want %v", again, got)
	}
}
