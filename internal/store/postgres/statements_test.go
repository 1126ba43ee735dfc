package postgres_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/ledger"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/postgres"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
)

// TestStatementBudgetBatched: the statements the PostgreSQL store sends
// for a batch of events — its ingest, its outcomes, its round of the log —
// as a budget per event that fails when it rises (internal/gateway's
// statement tests do the same for SQLite).
// PostgreSQL's CPU bounds the gateway on it, and each statement costs it a
// parse of the message, a plan or a cached plan's check, an executor's
// start and end, whatever its rows.
//
// For 40 events: the ingest sends 5 statements for the batch, Finish 1,
// the log's round 15 (3 of them the sweep for rows inserted with triggers
// off, which a new database's first round runs). Each budget is a little
// over the measured figure, so that a statement per event more fails it;
// the figures before the set-based statements are in BENCHMARKS.md
// (stop 27).
func TestStatementBudgetBatched(t *testing.T) {
	t.Parallel()
	tr := &statementCounter{}
	s, err := postgres.Open(t.Context(), pgtest.DSN(t), postgres.Options{MaxConns: testConns, Tracer: tr})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 40
	evs := make([]store.NewEvent, n)
	for i := range evs {
		evs[i] = newEvent("orders", fmt.Sprint("evt_", i), "shop")
		evs[i].Lease = []time.Duration{time.Minute}
	}

	before := tr.snapshot()
	res, err := s.Ingest(t.Context(), evs)
	if err != nil {
		t.Fatal(err)
	}
	ingest := tr.snapshot().minus(before)
	var outs []store.Outcome
	for i, r := range res {
		if r.Err != nil || r.Duplicate || len(r.Claims) != 1 {
			t.Fatalf("event %d: %+v, want new and claimed at ingest", i, r)
		}
		d := r.Claims[0].Delivery
		outs = append(outs, store.Outcome{DeliveryID: d.ID, Attempt: d.AttemptCount, Status: anyhook.StatusDelivered,
			Result: anyhook.Attempt{Number: d.AttemptCount, StartedAt: time.Now(), StatusCode: 200}})
	}

	before = tr.snapshot()
	if lost, err := s.Finish(t.Context(), outs); err != nil || len(lost) != 0 {
		t.Fatalf("Finish: lost %v, %v", lost, err)
	}
	finish := tr.snapshot().minus(before)

	before = tr.snapshot()
	if logged, err := ledger.NewSequencer(s, ledger.SequencerOptions{}).Once(t.Context()); err != nil || logged != n {
		t.Fatalf("the log's round logged %d (%v), want %d", logged, err, n)
	}
	log := tr.snapshot().minus(before)

	for _, b := range []struct {
		what   string
		got    statementCounts
		budget float64 // statements per event
	}{
		{"ingest", ingest, 0.15},
		{"finish", finish, 0.05},
		{"the log's round", log, 0.4},
	} {
		per := float64(b.got.total()) / n
		t.Logf("%s, %d events in one batch: %d statements, %.3f per event:\n%s", b.what, n, b.got.total(), per, b.got)
		if per > b.budget {
			t.Errorf("%s: %.3f statements per event in a batch of %d, over the budget of %g:\n%s", b.what, per, n, b.budget, b.got)
		}
	}
}

// statementCounter is a pgx tracer that counts the statements sent, alone
// or in a batch, by their text.
type statementCounter struct {
	mu sync.Mutex
	n  map[string]int
}

var spaces = regexp.MustCompile(`\s+`)

func (c *statementCounter) add(sql string) {
	sql = spaces.ReplaceAllString(strings.TrimSpace(sql), " ")
	if len(sql) > 70 {
		sql = sql[:70] + "…"
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[sql]++
}

func (c *statementCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.add(d.SQL)
	return ctx
}

func (c *statementCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *statementCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	return ctx
}

func (c *statementCounter) TraceBatchQuery(_ context.Context, _ *pgx.Conn, d pgx.TraceBatchQueryData) {
	c.add(d.SQL)
}

func (c *statementCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData) {}

func (c *statementCounter) snapshot() statementCounts {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.n)
}

type statementCounts map[string]int

func (s statementCounts) minus(o statementCounts) statementCounts {
	d := statementCounts{}
	for k, v := range s {
		if v -= o[k]; v != 0 {
			d[k] = v
		}
	}
	return d
}

func (s statementCounts) total() int {
	n := 0
	for _, v := range s {
		n += v
	}
	return n
}

func (s statementCounts) String() string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(s)) {
		fmt.Fprintf(&b, "  %4d  %s\n", s[k], k)
	}
	return b.String()
}
