package sqlite_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/store"
)

// BenchmarkSQLAPI prices database/sql itself, against a lower-level API
// of the same driver.
// Both sub-benchmarks run the same prepared statements of an event's
// lifecycle in the same pure-Go driver (modernc.org/sqlite), on the
// floor's cut-down schema (openFloorDB: events, deliveries, attempts; not
// the store's), in batches of 14 events (what ingest's group commit forms
// under anyhook bench's load): a transaction inserting each event and its
// delivery, then one marking the deliveries done and inserting their
// attempts.
//
//   - api=database/sql: through *sql.DB, a transaction's Tx.Stmt of
//     statements prepared once, as the store runs its hot statements;
//   - api=driver: through the driver's own interfaces under database/sql
//     (driver.Conn, its Tx, driver.StmtExecContext with NamedValues), on
//     the same connection, so without database/sql's pool, locks, argument
//     conversion and Result.
//
// sync=full commits durably (WAL, synchronous=FULL), as ingest does;
// sync=off leaves out fsync and its kernel time, which varies more than
// the difference sought. One op is one event: ns/op, B/op and allocs/op
// are per event, and include the benchmark's own work (ids, dedup keys,
// the arguments), so only the difference between the two APIs is
// database/sql's. Compare cpu-µs/event (this process's getrusage, user
// and system); events/s and the batch percentiles (batch-p50-ms,
// batch-p99-ms: one batch's two commits) swing with the disk. -count
// repeats each sub-benchmark back to back; to interleave the rounds:
//
//	for i in 1 2 3; do for s in full off; do
//		go test ./internal/store/sqlite -run '^$' -bench "SQLAPI/sync=$s" -benchtime 20000x -benchmem
//	done; done
func BenchmarkSQLAPI(b *testing.B) {
	for _, sync := range []string{"full", "off"} {
		for _, api := range []string{"database/sql", "driver"} {
			b.Run(fmt.Sprintf("sync=%s/api=%s", sync, api), func(b *testing.B) { benchSQLAPI(b, sync, api) })
		}
	}
}

// The lifecycle's statements, in the order run takes them.
var apiStatements = []string{
	`INSERT INTO events VALUES (?, 'generic', ?, ?, ?, ?) ON CONFLICT DO NOTHING`,
	`INSERT INTO deliveries VALUES (?, ?, 'sink', 'delivering', 0)`,
	`UPDATE deliveries SET status = 'delivered' WHERE id = ?`,
	`INSERT INTO attempts VALUES (?, 1, 200)`,
}

// execer runs one of apiStatements (by its index) with args in the
// current transaction.
type execer interface {
	begin(ctx context.Context) error
	exec(ctx context.Context, stmt int, args ...any) error
	commit() error
	rollback() error
}

func benchSQLAPI(b *testing.B, sync, api string) {
	const batch = 14
	db := openFloorDB(b, sync)
	ctx := b.Context()
	ids := make([]string, batch)
	body := floorBody()
	// lifecycle records n events, their deliveries and their outcomes
	// through x.
	lifecycle := func(x execer, n int) error {
		if err := x.begin(ctx); err != nil {
			return err
		}
		for i := range n {
			ids[i] = store.NewID()
			if err := x.exec(ctx, 0, ids[i], rand.Text(), time.Now().UnixMicro(), floorHeaders, body); err != nil {
				return err
			}
			if err := x.exec(ctx, 1, ids[i], ids[i]); err != nil {
				return err
			}
		}
		if err := x.commit(); err != nil {
			return err
		}
		if err := x.begin(ctx); err != nil {
			return err
		}
		for _, id := range ids[:n] {
			if err := x.exec(ctx, 2, id); err != nil {
				return err
			}
			if err := x.exec(ctx, 3, id); err != nil {
				return err
			}
		}
		return x.commit()
	}
	measure := func(x execer) error {
		return measureFloorErr(b, batch, func(n int) error {
			err := lifecycle(x, n)
			if err != nil {
				x.rollback() // the transaction left open, if any
			}
			return err
		})
	}
	through := measureSQL
	if api == "driver" {
		through = measureDriver
	}
	if err := through(ctx, db, measure); err != nil {
		b.Fatal(err)
	}
	var events, delivered, attempts int
	if err := db.QueryRow(`SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM deliveries WHERE status = 'delivered'),
		(SELECT count(*) FROM attempts)`).Scan(&events, &delivered, &attempts); err != nil {
		b.Fatal(err)
	}
	if events != b.N || delivered != b.N || attempts != b.N {
		b.Fatalf("%d events, %d delivered deliveries and %d attempts recorded for %d events", events, delivered, attempts, b.N)
	}
}

// sqlExecer runs the statements through database/sql, as the store does.
type sqlExecer struct {
	db    *sql.DB
	stmts []*sql.Stmt
	tx    *sql.Tx
	txs   []*sql.Stmt // stmts, lent to tx
}

func measureSQL(ctx context.Context, db *sql.DB, measure func(execer) error) error {
	x := &sqlExecer{db: db}
	defer func() {
		for _, st := range x.stmts {
			st.Close()
		}
	}()
	for _, q := range apiStatements {
		st, err := db.PrepareContext(ctx, q)
		if err != nil {
			return err
		}
		x.stmts = append(x.stmts, st)
	}
	return measure(x)
}

func (x *sqlExecer) begin(ctx context.Context) error {
	tx, err := x.db.BeginTx(ctx, nil)
	x.tx, x.txs = tx, make([]*sql.Stmt, len(x.stmts))
	return err
}

func (x *sqlExecer) exec(ctx context.Context, i int, args ...any) error {
	if x.txs[i] == nil {
		x.txs[i] = x.tx.StmtContext(ctx, x.stmts[i])
	}
	_, err := x.txs[i].ExecContext(ctx, args...)
	return err
}

func (x *sqlExecer) commit() error { return x.tx.Commit() }

func (x *sqlExecer) rollback() error {
	if x.tx == nil {
		return nil
	}
	return x.tx.Rollback()
}

// driverExecer runs the statements through the driver's interfaces, on
// db's one connection, inside sql.Conn.Raw (the only place it may be
// used).
type driverExecer struct {
	conn  driver.Conn
	stmts []driver.Stmt
	tx    driver.Tx
	args  []driver.NamedValue
}

func measureDriver(ctx context.Context, db *sql.DB, measure func(execer) error) error {
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return c.Raw(func(dc any) error {
		x := &driverExecer{conn: dc.(driver.Conn)}
		defer func() {
			for _, st := range x.stmts {
				st.Close()
			}
		}()
		for _, q := range apiStatements {
			st, err := x.conn.(driver.ConnPrepareContext).PrepareContext(ctx, q)
			if err != nil {
				return err
			}
			x.stmts = append(x.stmts, st)
		}
		return measure(x)
	})
}

func (x *driverExecer) begin(ctx context.Context) error {
	tx, err := x.conn.(driver.ConnBeginTx).BeginTx(ctx, driver.TxOptions{})
	x.tx = tx
	return err
}

func (x *driverExecer) exec(ctx context.Context, i int, args ...any) error {
	x.args = x.args[:0]
	for k, a := range args {
		x.args = append(x.args, driver.NamedValue{Ordinal: k + 1, Value: a})
	}
	_, err := x.stmts[i].(driver.StmtExecContext).ExecContext(ctx, x.args)
	return err
}

func (x *driverExecer) commit() error { return x.tx.Commit() }

func (x *driverExecer) rollback() error {
	if x.tx == nil {
		return nil
	}
	return x.tx.Rollback()
}
