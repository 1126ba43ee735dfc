package postgres_test

import (
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/storetest"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
)

// TestMigrate6EmptiesTheQueues is the SQLite test of the same name: an
// upgrade takes out of the dead and held queues what a person had dealt
// with (replayed later, discarded), and gives a marked delivery its
// resolution.
func TestMigrate6EmptiesTheQueues(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	c, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := c.Exec(t.Context(), q, args...); err != nil {
			t.Fatalf("%.80s: %v", q, err)
		}
	}
	// The schema of version 5, as that binary left it.
	exec(`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
	for v, name := range []string{"0001_init", "0002_ledger", "0003_deliveries_status_event", "0004_content_key", "0005_ledger_keys"} {
		ddl, err := os.ReadFile("migrations/" + name + ".sql")
		if err != nil {
			t.Fatal(err)
		}
		exec(string(ddl))
		exec(`INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, v+1, name)
	}
	t0 := time.Now().Add(-time.Hour)
	at := func(us int) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }
	exec(`INSERT INTO events (id, source, received_at, method, path, headers, body) VALUES ('e1', 'stripe', $1, 'POST', '/webhooks/stripe', '', '{}')`, t0)
	for _, d := range []struct {
		id, dest, status, note string
		replay                 bool
		created, updated       time.Time
	}{
		{"d1", "billing", "dead", "discarded by an operator at 2026-01-01T00:00:00Z", false, t0, at(10)},
		{"d2", "crm", "dead", "", false, t0, at(10)},
		{"d3", "crm", "delivered", "", true, at(20), at(30)}, // replayed d2 after it died
		{"d4", "vault", "delivered", "marked delivered by an operator at 2026-01-01T00:00:00Z", false, t0, at(10)},
		{"d5", "audit", "dead", "", false, t0, at(10)},
		{"d6", "charges", "held", "", false, t0, at(50)},
		{"d7", "charges", "delivered", "", true, at(20), at(30)}, // replayed before d6 was held
	} {
		exec(`INSERT INTO deliveries (id, event_id, destination, status, replay, next_attempt_at, created_at, updated_at, note)
			VALUES ($1, 'e1', $2, $3, $4, $5, $6, $5, $7)`, d.id, d.dest, d.status, d.replay, d.updated, d.created, d.note)
	}
	// Another source's event to one of those destinations: each delivery
	// gets its own event's source (migration 0039).
	exec(`INSERT INTO events (id, source, received_at, method, path, headers, body) VALUES ('e2', 'github', $1, 'POST', '/webhooks/github', '', '{}')`, t0)
	exec(`INSERT INTO deliveries (id, event_id, destination, status, replay, next_attempt_at, created_at, updated_at, note)
		VALUES ('d8', 'e2', 'billing', 'delivered', false, $1, $1, $1, '')`, t0)
	// An attempt recorded before outcomes were kept (migration 20).
	exec(`INSERT INTO attempts (delivery_id, number, started_at, duration_us, status_code, error) VALUES ('d5', 1, $1, 0, 500, 'HTTP 500')`, at(0))
	c.Close(t.Context())

	s := openDSN(t, dsn)
	storetest.CheckMigration6(t, s)
	storetest.CheckMigrationSource(t, s)
	// The new status passes the CHECK; a made-up one does not.
	if _, err := s.Resolve(t.Context(), "d5", "discard", store.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	if !query[bool](t, dsn, `SELECT status = 'resolved' FROM deliveries WHERE id = 'd5'`) {
		t.Fatal("d5 not resolved")
	}
	c, err = pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(t.Context())
	if _, err := c.Exec(t.Context(), `UPDATE deliveries SET status = 'gone' WHERE id = 'd5'`); err == nil {
		t.Fatal("the status CHECK let 'gone' through")
	}
}

// TestMigrateDeliveriesType is the SQLite test of the same name: an
// upgrade gives every delivery its event's type (migration 0043), with the
// table's indexes dropped for the fill and built again.
func TestMigrateDeliveriesType(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s := openDSN(t, dsn)
	ids := storetest.SeedStatusSourceType(t, s)
	indexes := `SELECT string_agg(indexdef, E'\n' ORDER BY indexname) FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'deliveries'`
	before := query[string](t, dsn, indexes)
	s.Close()
	c, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DROP INDEX deliveries_status_source_type`, `ALTER TABLE deliveries DROP COLUMN type`,
		`DELETE FROM schema_migrations WHERE version = 43`} {
		if _, err := c.Exec(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	c.Close(t.Context())
	s = openDSN(t, dsn)
	storetest.CheckStatusSourceType(t, s, ids)
	if after := query[string](t, dsn, indexes); after != before {
		t.Errorf("deliveries' indexes after the upgrade:\n%s\nwant\n%s", after, before)
	}
}
