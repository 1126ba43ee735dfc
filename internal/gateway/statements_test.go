package gateway_test

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"modernc.org/sqlite"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/store"
	sqlitestore "github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/sqlitewrap"
)

// The store's cost per delivered event, as a budget that fails when it
// rises: a statement, a transaction or a row more per event is a cost
// every event pays. Events go one at a time — each is delivered before
// the next is sent — so that nothing is batched: the count is the
// unbatched worst case, and steady from run to run. Under load the group
// committer, the claims and the sequencer share their statements among
// many events.
//
// The log is sequenced once, at Stop (SequenceInterval: an hour): its
// rounds run ten times a second on SQLite, and how many ran during the test
// would depend on the machine's speed. What is counted is the log's work
// for these 40 events, in one round, and the same on any machine. So is
// the incident recorder's (IncidentInterval: an hour): its writes each
// second put a slow machine over the transactions' budget (2.62 per
// event, 0.35 of them its own, on a loaded CI run).
//
// Per event now: INSERT events, the paused check (once per ingest batch),
// INSERT deliveries, the outcome UPDATE, INSERT attempts, and the log's
// share of its multi-row inserts. Each budget sits under the measured
// figure + 0.5, so that one more statement, transaction or row per event
// fails; the figures and their history are in BENCHMARKS.md ("Statements
// per delivered event").
//
// Lower a budget when a change lowers the count; raise one only with a
// measured reason.
const (
	// Exec and Query calls, direct or prepared, but the log's. 5.4–5.65
	// measured: an event claimed by the dispatcher rather than at ingest
	// (when its ingest commits before the last outcome freed the slot,
	// which ingest's turn first on the writer makes likelier) adds a
	// claim and an event read, so the count moves with timing.
	budgetStatements    = 6.0
	budgetLogStatements = 1   // the log's (statements on ledger_* tables)
	budgetTransactions  = 2.5 // BEGIN … COMMIT
	budgetRows          = 7.5 // rows inserted, updated or deleted
	// The counters' triggers: per delivered event a delivery counted
	// (delivering when claimed at ingest, else pending and then moved to
	// delivering, two rows), moved to delivered (two rows), events
	// received and deliveries delivered by the minute: 5 to 7, as timing
	// gives the dispatcher a share of the claims (0.28 an event, 5.58
	// rows, in a CI run beside other work).
	budgetCounterRows = 6.0
	// Outcomes commit without waiting for fsync (the store's Finish): two
	// PRAGMA synchronous around each outcome's own commit, 2.05 per event
	// one at a time (the last outcomes, at Stop, in a commit of their
	// own); 1.65–1.8 since an outcome may ride along with the next
	// event's ingest, which syncs. Not among the statements: they touch
	// no table.
	budgetSyncSettings = 2.5
)

func TestStatementBudgetPerDeliveredEvent(t *testing.T) {
	t.Parallel()
	c := newCounts()
	name := fmt.Sprintf("sqlite-counting-%d", drivers.Add(1)) // -count=N registers N
	sql.Register(name, &countingDriver{c: c})
	st, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlitestore.Options{Driver: name})
	if err != nil {
		t.Fatal(err)
	}
	sk := sinktest.New(t)
	base, g := gatewaytest.Start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:anyhook.db
admin_token: test-token
delivery: {poll_interval: 1h}   # new events wake the workers: no idle polls counted
log: {checkpoint_interval: 1h}  # one checkpoint, at Stop
sources:
  orders:
    provider: generic
    signature: none
    id: json:id
destinations:
  shop:
    url: %s/hooks
    sources: [orders]
`, sk.URL), gateway.Options{Store: st, SequenceInterval: time.Hour, IncidentInterval: time.Hour})
	send := func(id string) {
		t.Helper()
		req, err := http.NewRequest("POST", base+"/webhooks/orders", strings.NewReader(`{"id":"`+id+`","total":12}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		a := do(t, req)
		if a.Code != 200 || a.Status != "accepted" {
			t.Fatalf("%s: %+v", id, a)
		}
	}
	send("warm")
	sk.Wait(t, 1)

	const n = 40
	before := c.snapshot()
	for i := range n {
		send(fmt.Sprintf("evt_%d", i))
		sk.Wait(t, 2+i)
	}
	// Stop writes what is left: the last outcomes, the last sequencing
	// and checkpoint.
	if err := g.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	d := c.snapshot().minus(before)
	per := func(v int64) float64 { return float64(v) / n }
	event, log := d.statements()
	t.Logf("per delivered event, one at a time: %.2f statements (%.2f of them the log's), %.2f transactions, %.2f rows written, %.2f settings of the sync level\nstatements:%s\nrows written:%s",
		per(event+log), per(log), per(d.transactions), per(d.rowTotal()), per(d.syncSettings()), perEvent(d.queries, n), perEvent(d.rows, n))
	for _, b := range []struct {
		what   string
		got    float64
		budget float64
	}{
		{"statements (ingest and delivery)", per(event), budgetStatements},
		{"statements of the log", per(log), budgetLogStatements},
		{"transactions", per(d.transactions), budgetTransactions},
		{"rows written", per(d.rowTotal()), budgetRows},
		{"rows the counters' triggers wrote", per(d.counterRows()), budgetCounterRows},
		{"settings of the sync level", per(d.syncSettings()), budgetSyncSettings},
	} {
		if b.got > b.budget {
			t.Errorf("%s per delivered event: %.2f, over the budget of %g", b.what, b.got, b.budget)
		}
	}

	// Outcomes commit without waiting for fsync, and nothing else does:
	// an event, its deliveries, a claim and the log commit on the
	// connection that syncs, so a 2xx follows a durable commit.
	c.mu.Lock()
	unsynced := maps.Clone(c.unsynced)
	c.mu.Unlock()
	for k, v := range unsynced {
		_, table, _ := strings.Cut(k, " ")
		if k != "update deliveries" && k != "insert attempts" && !counterTables[table] {
			t.Errorf("%d rows %q through a connection that does not sync at commit: only outcomes may", v, k)
		}
	}
	// Outcomes that ride along with an ingest commit synced; the others
	// must come this way, or the check above sees nothing. Every outcome
	// is written, one way or the other.
	if unsynced["update deliveries"] == 0 || unsynced["insert attempts"] == 0 {
		t.Errorf("outcomes through the connection that does not sync: %v; want some outcome updates and attempts", unsynced)
	}
	if got := d.rows["attempts"]; got < n {
		t.Errorf("%d attempts recorded for %d delivered events", got, n)
	}
	// By statement too: a claim also updates deliveries, and it precedes
	// a send, so it must sync; only Finish's statements may run unsynced.
	c.mu.Lock()
	unsyncedStmts := maps.Clone(c.unsyncedStmts)
	c.mu.Unlock()
	for q, v := range unsyncedStmts {
		if !strings.HasPrefix(q, "UPDATE deliveries SET status = v.column2") && !strings.HasPrefix(q, "INSERT INTO attempts ") {
			t.Errorf("%d times through a connection that does not sync at commit, a statement not of an outcome: %.80q", v, q)
		}
	}
}

// TestStatementBudgetBatched counts the store's statements per event when
// a batch holds many: an ingest batch's deliveries and a
// Finish's outcome updates and attempts go in multi-row statements, so
// that under load an event costs about one statement of ingest (its own
// insert) and a fraction of one for its outcome. Measured: 42 statements
// for 40 events (40 event inserts, deliveries in 32 + 8), 4 for 40
// outcomes (updates and attempts, 32 + 8 each); before: 5 and 2 per event.
func TestStatementBudgetBatched(t *testing.T) {
	t.Parallel()
	c := newCounts()
	name := fmt.Sprintf("sqlite-counting-%d", drivers.Add(1))
	sql.Register(name, &countingDriver{c: c})
	st, err := sqlitestore.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlitestore.Options{Driver: name})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const n = 40
	now := time.Now()
	evs := make([]store.NewEvent, n)
	for i := range evs {
		evs[i] = store.NewEvent{Event: anyhook.Event{ID: store.NewID(), Source: "orders", DedupKey: fmt.Sprint("evt_", i), ReceivedAt: now,
			Method: "POST", Path: "/webhooks/orders", Body: []byte(`{}`)}, Destinations: []string{"shop"}}
	}
	before := c.snapshot()
	res, err := st.Ingest(t.Context(), evs)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || r.Duplicate {
			t.Fatalf("event %d: %+v", i, r)
		}
	}
	ingest := c.snapshot().minus(before)
	cs, err := st.Claim(t.Context(), "shop", n, time.Hour)
	if err != nil || len(cs) != n {
		t.Fatalf("claimed %d of %d: %v", len(cs), n, err)
	}
	outs := make([]store.Outcome, n)
	for i, cl := range cs {
		a := cl.Delivery.AttemptCount
		outs[i] = store.Outcome{DeliveryID: cl.Delivery.ID, Attempt: a, Status: anyhook.StatusDelivered,
			Result: anyhook.Attempt{Number: a, StartedAt: now, StatusCode: 200}}
	}
	before = c.snapshot()
	if lost, err := st.Finish(t.Context(), outs); err != nil || len(lost) != 0 {
		t.Fatalf("Finish: lost %v, %v", lost, err)
	}
	finish := c.snapshot().minus(before)
	for _, b := range []struct {
		what   string
		d      countSnapshot
		budget float64 // statements per event
	}{
		{"ingest", ingest, 1.25},
		{"finish", finish, 0.25},
	} {
		got, _ := b.d.statements()
		t.Logf("%s, %d in one batch: %.3f statements and %.2f rows written per event\nstatements:%s", b.what, n,
			float64(got)/n, float64(b.d.rowTotal())/n, perEvent(b.d.queries, n))
		if rows := b.d.rowTotal(); rows != 2*n {
			t.Errorf("%s wrote %d rows for %d events, want %d (a row of its own and a delivery or attempt)", b.what, rows, n, 2*n)
		}
		if rows := b.d.counterRows(); rows > 3*n {
			t.Errorf("%s's counters wrote %d rows for %d events, want at most %d (a count per delivery moved, one per minute's transition)", b.what, rows, n, 3*n)
		}
		if per := float64(got) / n; per > b.budget {
			t.Errorf("%s: %.3f statements per event in a batch of %d, over the budget of %g", b.what, per, n, b.budget)
		}
	}
}

var drivers atomic.Int64

// counts is what the store asked of SQLite.
type counts struct {
	transactions atomic.Int64
	mu           sync.Mutex
	queries      map[string]int64 // statement text → times run
	rows         map[string]int64 // table → rows inserted, updated or deleted
	// unsynced counts the rows written through connections that do not
	// sync at commit (synchronous=NORMAL), by operation and table;
	// unsyncedStmts the statements run through them, by text.
	unsynced      map[string]int64
	unsyncedStmts map[string]int64
}

func newCounts() *counts {
	return &counts{queries: map[string]int64{}, rows: map[string]int64{}, unsynced: map[string]int64{}, unsyncedStmts: map[string]int64{}}
}

// ranOn counts query, run on conn, and apart when conn does not sync at
// commit (the settings of the sync level aside).
func (c *counts) ranOn(conn *countingConn, query string) {
	c.mu.Lock()
	c.queries[query]++
	if conn.unsynced && !isSyncSetting(query) {
		c.unsyncedStmts[query]++
	}
	c.mu.Unlock()
}

type countSnapshot struct {
	transactions int64
	queries      map[string]int64
	rows         map[string]int64
}

func (c *counts) snapshot() countSnapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	return countSnapshot{c.transactions.Load(), maps.Clone(c.queries), maps.Clone(c.rows)}
}

func (s countSnapshot) minus(o countSnapshot) countSnapshot {
	sub := func(a, b map[string]int64) map[string]int64 {
		d := map[string]int64{}
		for k, v := range a {
			if v -= b[k]; v != 0 {
				d[k] = v
			}
		}
		return d
	}
	return countSnapshot{s.transactions - o.transactions, sub(s.queries, o.queries), sub(s.rows, o.rows)}
}

// statements counts the statements run, those of the tamper-evident log
// apart: a statement whose own tables (outside its subqueries) are
// ledger_* ones. (The delivery's read of the event looks into
// ledger_entries in a subquery: it is not the log's.) The settings of the
// connection's sync level are not counted (syncSettings).
func (s countSnapshot) statements() (event, log int64) {
	for q, v := range s.queries {
		// The WAL copy runs on a timer off the commit path: how many fall
		// to an event depends on how long the event took, not on the
		// statements it needs.
		if isSyncSetting(q) || strings.HasPrefix(q, "PRAGMA wal_checkpoint") {
			continue
		}
		if strings.Contains(outermost(q), "ledger_") {
			log += v
		} else {
			event += v
		}
	}
	return event, log
}

// syncSettings counts the PRAGMA synchronous statements run: the store
// sets its writer connection to NORMAL for each outcome's commit and back
// to FULL after it (they touch no table).
func (s countSnapshot) syncSettings() int64 {
	var n int64
	for q, v := range s.queries {
		if isSyncSetting(q) {
			n += v
		}
	}
	return n
}

func isSyncSetting(q string) bool { return strings.HasPrefix(q, "PRAGMA synchronous") }

// outermost is q without its parenthesised parts.
func outermost(q string) string {
	var b strings.Builder
	depth := 0
	for _, r := range q {
		switch {
		case r == '(':
			depth++
		case r == ')':
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// rowTotal counts the rows the store's statements wrote, without those
// the counters' triggers wrote with them (counterRows).
func (s countSnapshot) rowTotal() int64 {
	var n int64
	for t, v := range s.rows {
		if !counterTables[t] {
			n += v
		}
	}
	return n
}

// counterTables are the tables the database's triggers keep in the
// transaction of the rows they count (the overview's counters).
var counterTables = map[string]bool{"delivery_counts": true, "activity": true}

// counterRows counts the rows the counters' triggers wrote.
func (s countSnapshot) counterRows() int64 {
	var n int64
	for t, v := range s.rows {
		if counterTables[t] {
			n += v
		}
	}
	return n
}

// perEvent lists m's counts per event, largest first.
func perEvent(m map[string]int64, n int) string {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b string) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "\n  %5.2f  %s", float64(m[k])/float64(n), strings.Join(strings.Fields(k), " "))
	}
	return b.String()
}

// countingDriver is the real SQLite driver with a count of the statements
// run through it and, by SQLite's pre-update hook, of the rows each
// statement writes, per table.
type countingDriver struct {
	c *counts
}

func (d *countingDriver) Open(name string) (driver.Conn, error) {
	sc, err := sqlitewrap.Open(name)
	if err != nil {
		return nil, err
	}
	h, ok := sc.(sqlite.HookRegisterer)
	if !ok {
		sc.Close()
		return nil, fmt.Errorf("counting driver: %T lacks the pre-update hook", sc)
	}
	cc := &countingConn{Conn: sc, c: d.c}
	h.RegisterPreUpdateHook(func(u sqlite.SQLitePreUpdateData) {
		d.c.mu.Lock()
		d.c.rows[u.TableName]++
		if cc.unsynced {
			d.c.unsynced[preUpdateOps[u.Op]+" "+u.TableName]++
		}
		d.c.mu.Unlock()
	})
	return cc, nil
}

// preUpdateOps names SQLite's operation codes (sqlite3.h).
var preUpdateOps = map[int32]string{9: "delete", 18: "insert", 23: "update"}

type countingConn struct {
	sqlitewrap.Conn
	c *counts
	// unsynced: the last PRAGMA synchronous run on the connection set
	// NORMAL (commits do not wait for fsync). Written and read under c.mu.
	unsynced bool
}

func (c *countingConn) Prepare(query string) (driver.Stmt, error) {
	return c.PrepareContext(context.Background(), query)
}

func (c *countingConn) PrepareContext(ctx context.Context, query string) (driver.Stmt, error) {
	s, err := c.Conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	cs, ok := s.(countedStmt)
	if !ok {
		s.Close()
		return nil, fmt.Errorf("counting driver: %T lacks the context methods", s)
	}
	return &countingStmt{cs, query, c.c, c}, nil
}

func (c *countingConn) Begin() (driver.Tx, error) {
	return c.BeginTx(context.Background(), driver.TxOptions{})
}

func (c *countingConn) BeginTx(ctx context.Context, opts driver.TxOptions) (driver.Tx, error) {
	c.c.transactions.Add(1)
	return c.Conn.BeginTx(ctx, opts)
}

func (c *countingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	c.c.ranOn(c, query)
	if level, ok := strings.CutPrefix(query, "PRAGMA synchronous = "); ok {
		c.c.mu.Lock()
		c.unsynced = level == "NORMAL"
		c.c.mu.Unlock()
	}
	return c.Conn.ExecContext(ctx, query, args)
}

func (c *countingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	c.c.ranOn(c, query)
	return c.Conn.QueryContext(ctx, query, args)
}

type countedStmt interface {
	driver.Stmt
	driver.StmtExecContext
	driver.StmtQueryContext
}

type countingStmt struct {
	countedStmt
	query string
	c     *counts
	conn  *countingConn
}

func (s *countingStmt) ExecContext(ctx context.Context, args []driver.NamedValue) (driver.Result, error) {
	s.c.ranOn(s.conn, s.query)
	return s.countedStmt.ExecContext(ctx, args)
}

func (s *countingStmt) QueryContext(ctx context.Context, args []driver.NamedValue) (driver.Rows, error) {
	s.c.ranOn(s.conn, s.query)
	return s.countedStmt.QueryContext(ctx, args)
}
