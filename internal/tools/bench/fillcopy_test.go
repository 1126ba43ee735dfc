package bench

import (
	"database/sql"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anyhook/anyhook/internal/testkit/pgtest"
)

// A fill past --written copies the written events in SQL: the store then
// holds the copies with their deliveries, attempts and replays, every id
// once, and its counters (kept by the tables' triggers, and the activity
// the copy adds) equal what counting the rows gives.
func TestCopyFill(t *testing.T) {
	t.Parallel()
	for name, dsn := range map[string]func(t *testing.T) string{
		"sqlite":   func(t *testing.T) string { return "sqlite:" + filepath.Join(t.TempDir(), "fill.db") },
		"postgres": func(t *testing.T) string { return pgtest.DSN(t) },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dsn := dsn(t)
			o := &fillOptions{events: 2500, written: 1000, database: dsn, batch: 250, bodySize: 64}
			if _, _, err := fill(t.Context(), o, t.Logf); err != nil {
				t.Fatal(err)
			}
			db, _, err := openCopyDB(dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			one := func(q string) int64 {
				t.Helper()
				var n int64
				if err := db.QueryRowContext(t.Context(), q).Scan(&n); err != nil {
					t.Fatalf("%s: %v", q, err)
				}
				return n
			}
			// 1,000 written less 18 duplicates, then 1,500 copies of them.
			if got, want := one(`SELECT count(*) FROM events`), int64(982+1500); got != want {
				t.Errorf("%d events, want %d", got, want)
			}
			if n := one(`SELECT count(*) FROM events WHERE dedup_key LIKE '%~1'`); n != 982 {
				t.Errorf("%d first copies, want 982", n)
			}
			// Each event's copy has as many deliveries, attempts and
			// replays as its original.
			for _, q := range []string{
				`SELECT count(*) FROM deliveries d JOIN events e ON e.id = d.event_id WHERE e.dedup_key LIKE '%~1'`,
				`SELECT count(*) FROM attempts a JOIN deliveries d ON d.id = a.delivery_id JOIN events e ON e.id = d.event_id WHERE e.dedup_key LIKE '%~1'`,
				`SELECT count(*) FROM actions a JOIN events e ON e.id = a.event_id WHERE e.dedup_key LIKE '%~1'`,
			} {
				orig := one(strings.ReplaceAll(q, `LIKE '%~1'`, `NOT LIKE '%~%'`))
				if copied := one(q); copied != orig || orig == 0 {
					t.Errorf("%s: %d copied, %d originals", q, copied, orig)
				}
			}
			// 3% stay retrying on both stores: on SQLite, whose clock is
			// the spread's, a later batch must not find them due.
			retrying := one(`SELECT count(*) FROM deliveries WHERE status = 'pending' AND attempt_count > 0`)
			if all := one(`SELECT count(*) FROM deliveries`); retrying*100 < 2*all {
				t.Errorf("%d of %d deliveries retrying, want about 3%%", retrying, all)
			}
			// A copied delivery keeps its source (copied as a column like
			// any other), its event's (migration 0039).
			if n := one(`SELECT count(*) FROM deliveries d JOIN events e ON e.id = d.event_id WHERE d.source <> e.source OR d.source = ''`); n != 0 {
				t.Errorf("%d deliveries without their event's source", n)
			}
			counts := `SELECT count(*) FROM (SELECT destination, CASE WHEN status = 'pending' AND attempt_count > 0 THEN 'retrying' ELSE status END AS s, count(*) AS n
				FROM deliveries GROUP BY 1, 2) r
				FULL JOIN (SELECT destination, status AS s, sum(n) AS n FROM delivery_counts GROUP BY 1, 2 HAVING sum(n) <> 0) c
				ON c.destination = r.destination AND c.s = r.s WHERE r.n IS NULL OR c.n IS NULL OR r.n <> c.n`
			if n := one(counts); n != 0 {
				t.Errorf("%d (destination, status) counters differ from the rows", n)
			}
			delivered := `SELECT sum(n) FROM activity WHERE kind = 'delivered'`
			if got, want := one(delivered), one(`SELECT count(*) FROM deliveries WHERE status = 'delivered' AND resolution <> 'marked_delivered'`); got != want {
				t.Errorf("activity says %d delivered, the rows %d", got, want)
			}
			if got, want := one(`SELECT sum(n) FROM activity WHERE kind = 'received'`), one(`SELECT count(*) FROM events`); got != want {
				t.Errorf("activity says %d received, the rows %d", got, want)
			}
			if n := one(`SELECT count(*) FROM versions WHERE object LIKE '%~1'`); n == 0 {
				t.Error("the copies' objects have no versions")
			}
			// Resumed (--written 0): the copies made are skipped and
			// counted, the rest made.
			if err := copyFill(t.Context(), dsn, "", 2000, 300, t.Logf); err != nil {
				t.Fatal(err)
			}
			if got, want := one(`SELECT count(*) FROM events`), int64(982+2000); got != want {
				t.Errorf("after a resumed copy of 2,000: %d events, want %d", got, want)
			}
			// The copy dropped indexes and built them again: the store has
			// every index a store just migrated has.
			fresh := dsn
			if name == "sqlite" {
				fresh = "sqlite:" + filepath.Join(t.TempDir(), "fresh.db")
			} else {
				fresh = pgtest.DSN(t)
			}
			var clock atomic.Int64
			st, err := openFill(t.Context(), fresh, &clock)
			if err != nil {
				t.Fatal(err)
			}
			st.Close()
			fdb, d, err := openCopyDB(fresh)
			if err != nil {
				t.Fatal(err)
			}
			defer fdb.Close()
			if got, want := indexDefs(t, db, d), indexDefs(t, fdb, d); got != want {
				t.Errorf("indexes after the copy:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

// indexDefs lists a store's indexes and their definitions, one a line.
func indexDefs(t *testing.T, db *sql.DB, d copyDialect) string {
	t.Helper()
	q := `SELECT name || ' ' || coalesce(sql, '') FROM sqlite_master WHERE type = 'index' ORDER BY name`
	if d.postgres {
		q = `SELECT indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname = current_schema() ORDER BY indexname`
	}
	rows, err := db.QueryContext(t.Context(), q)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var b strings.Builder
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		b.WriteString(s + "\n")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
