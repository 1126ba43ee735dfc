package inbox_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook/inbox"
	"github.com/anyhook/anyhook/inbox/inboxdriver"
	"github.com/anyhook/anyhook/inbox/inboxsql"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
)

// BenchmarkPoolSizing measures what the size of a database/sql pool does to
// Apply's latency when many deliveries arrive at once (as when a gateway
// drains a backlog): 64 goroutines run b.N Apply calls, each inserting a
// row and reading a count in its transaction. It reports the latency
// percentiles of one Apply, and how many connections the pool closed
// because its idle limit was full (each one is reopened later: the churn
// behind database/sql's default of 2 idle connections).
//
//	go test -run '^$' -bench PoolSizing -benchtime 3000x ./inbox
//
// The figures in docs/inbox.md ("Pool sizing") come from this benchmark;
// there is no threshold to pass.
func BenchmarkPoolSizing(b *testing.B) {
	const workers = 64
	pools := []struct {
		name       string
		open, idle int // 0: database/sql's default (unlimited open, 2 idle)
	}{
		{"default", 0, 0},
		{"open16", 16, 0},
		{"open16-idle16", 16, 16},
		{"open4-idle4", 4, 4},
	}
	dbs := []struct {
		name    string
		driver  string
		dialect inboxdriver.Dialect
		dsn     func(testing.TB) string
	}{
		{"postgres", "pgx", inboxsql.Postgres, func(tb testing.TB) string { return pgtest.DSN(tb) }},
		{"sqlite", "sqlite", inboxsql.SQLite, func(tb testing.TB) string {
			return "file:" + filepath.Join(tb.TempDir(), "bench.db") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(60000)&_pragma=synchronous(NORMAL)"
		}},
	}
	for _, d := range dbs {
		for _, p := range pools {
			b.Run(d.name+"/"+p.name, func(b *testing.B) {
				db, err := sql.Open(d.driver, d.dsn(b))
				if err != nil {
					b.Fatal(err)
				}
				defer db.Close()
				if p.open > 0 {
					db.SetMaxOpenConns(p.open)
				}
				if p.idle > 0 {
					db.SetMaxIdleConns(p.idle)
				}
				ctx := context.Background()
				ib, err := inbox.New(inboxsql.New(db, d.dialect), inbox.Config{InFlightWait: time.Minute})
				if err != nil {
					b.Fatal(err)
				}
				if err := ib.Migrate(ctx); err != nil {
					b.Fatal(err)
				}
				if _, err := db.Exec(`CREATE TABLE orders (id TEXT PRIMARY KEY, status TEXT NOT NULL)`); err != nil {
					b.Fatal(err)
				}
				insert, count := `INSERT INTO orders (id, status) VALUES ($1, 'paid')`, `SELECT count(*) FROM orders WHERE status = $1`
				if d.dialect == inboxsql.SQLite {
					insert, count = `INSERT INTO orders (id, status) VALUES (?, 'paid')`, `SELECT count(*) FROM orders WHERE status = ?`
				}
				ids := make(chan string, b.N)
				for i := range b.N {
					ids <- fmt.Sprintf("evt_%d", i)
				}
				close(ids)
				lat := make([]time.Duration, 0, b.N)
				var mu sync.Mutex
				var wg sync.WaitGroup
				b.ResetTimer()
				start := time.Now()
				for range workers {
					wg.Go(func() {
						for id := range ids {
							t0 := time.Now()
							_, err := ib.Apply(ctx, "orders", inbox.Event{ID: id}, func(ctx context.Context, tx *sql.Tx) error {
								if _, err := tx.ExecContext(ctx, insert, id); err != nil {
									return err
								}
								var n int
								return tx.QueryRowContext(ctx, count, "paid").Scan(&n)
							})
							d := time.Since(t0)
							if err != nil {
								b.Error(err)
								return
							}
							mu.Lock()
							lat = append(lat, d)
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				if len(lat) == 0 {
					return
				}
				slices.Sort(lat)
				pct := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Microseconds()) / 1000 }
				b.ReportMetric(pct(0.50), "p50-ms")
				b.ReportMetric(pct(0.99), "p99-ms")
				b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
				b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "applies/s")
				b.ReportMetric(float64(db.Stats().MaxIdleClosed), "idle-closed")
			})
		}
	}
}
