package postgres_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/postgres"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
	"github.com/anyhook/anyhook/internal/store/storetest"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
)

// TestPlansUseIndexes: the list queries whose filter must not read every
// event can use their index. With sequential scans and sorts priced out
// (enable_seqscan, enable_sort off), a query the index cannot answer —
// an expression or collation that does not match it — still plans a Seq
// Scan or a Sort, and fails here; the figures on a filled store are in
// BENCHMARKS.md ("The read side at scale").
func TestPlansUseIndexes(t *testing.T) {
	t.Parallel()
	conn := planConn(t)
	exact := sqlstore.NewWhere(sqlstore.Postgres)
	exact.AddType("type", "Invoice.Paid")
	exact.AddString("id < ?", "01a2")
	from, to := sqlstore.TypeRange("invoice.*")
	// A status over a window, as listEvents asks it: in receive time
	// order (store.EventsByTime), the window's end a seek, every event
	// probed for a delivery in the status. In id order it walked every
	// newer event first.
	inStatus := store.EventFilter{Status: "delivered", Until: time.Now()}
	statusOrder := ` ORDER BY id DESC`
	if store.EventsByTime(inStatus) {
		statusOrder = ` ORDER BY received_at DESC, id DESC`
	}
	for _, c := range []struct {
		name, sql, index string
		args             []any
	}{
		{"a glob's types, one seek each", sqlstore.Postgres.TypesQuery(), "events_type", []any{from, to, to}},
		{"one type newest first", `SELECT id FROM events` + exact.String() + ` ORDER BY id DESC LIMIT 51`, "events_type", exact.Args()},
		{"events until a time, newest first", `SELECT id FROM events WHERE received_at < $1 ORDER BY received_at DESC, id DESC LIMIT 51`,
			"events_received", []any{time.Now()}},
		{"deliveries until a time, newest first", `SELECT d.id FROM deliveries d WHERE d.created_at < $1` + sqlstore.DeliveryOrder(store.DeliveryFilter{Until: time.Now()}) + ` LIMIT 51`,
			"deliveries_created", []any{time.Now()}},
		{"events in a status until a time, newest first", `SELECT id FROM events WHERE EXISTS (SELECT 1 FROM deliveries d
			WHERE d.event_id = events.id AND d.status = $1) AND received_at < $2` + statusOrder + ` LIMIT 51`,
			"events_received", []any{string(inStatus.Status), inStatus.Until}},
	} {
		plan := explain(t, conn, c.sql, c.args)
		// An Incremental Sort (ties of the time, presorted by it) reads no
		// more than the page; a Sort reads everything first.
		fullSort := sortNode.MatchString(plan)
		if !strings.Contains(plan, c.index) || strings.Contains(plan, "Seq Scan") || fullSort {
			t.Errorf("%s: want %s, no Seq Scan, no Sort:\n%s", c.name, c.index, plan)
		}
	}
}

// TestPlanSourceAndType: a source and a type are one seek of
// events_source_type, whatever their counts: with events_type alone, a
// source and a type each common but never together walked every event of
// the type to find none (3.7 s at ten million). On an empty table the
// planner may as well take events_type and filter the source, so the plan
// is asked without it (dropped in a transaction that is rolled back).
func TestPlanSourceAndType(t *testing.T) {
	t.Parallel()
	conn := planConn(t)
	tx, err := conn.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(t.Context()))
	if _, err := tx.Exec(t.Context(), `DROP INDEX events_type`); err != nil {
		t.Fatal(err)
	}
	both := sqlstore.NewWhere(sqlstore.Postgres)
	both.AddString("source = ?", "generic")
	both.AddType("type", "Push")
	both.AddString("id < ?", "01a2")
	rows, err := tx.Query(t.Context(), `EXPLAIN SELECT id FROM events`+both.String()+` ORDER BY id DESC LIMIT 51`, both.Args()...)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	plan := strings.Join(lines, "\n")
	if !strings.Contains(plan, "events_source_type") || strings.Contains(plan, "Filter:") || sortNode.MatchString(plan) {
		t.Errorf("want one seek of events_source_type, no Filter, no Sort:\n%s", plan)
	}
}

// TestPlanStatusSourceType: the events of a source and a type with a
// delivery dead, held or resolved read deliveries_status_source_type, by
// the three and the event (0043): probing each of the pair's events for a
// delivery in the status read them all to find a pair with none (2.7 s
// at ten million events). Sequential scans and sorts are priced out as
// in TestPlansUseIndexes.
func TestPlanStatusSourceType(t *testing.T) {
	t.Parallel()
	conn := planConn(t)
	for _, f := range []store.EventFilter{
		{Status: anyhook.StatusDead, Source: "shopify", Type: "Push"},
		{Status: anyhook.StatusDead, Source: "shopify", Type: "push", Cursor: "01a2"},
		{Status: anyhook.StatusHeld, Source: "shopify", Type: "push", Since: time.Now().Add(-time.Hour)},
	} {
		q, args := postgres.EventsSQL(f, nil)
		plan := explain(t, conn, q, args)
		if !regexp.MustCompile(`deliveries_status_source_type on deliveries d .*\n.*Index Cond: .*status = .*source = .*lower`).MatchString(plan) ||
			strings.Contains(plan, "Seq Scan") {
			t.Errorf("%+v: want deliveries_status_source_type by the type, no Seq Scan:\n%s", f, plan)
		}
	}
}

// sortNode is a plan's Sort node (not an Incremental Sort, nor a Sort Key).
var sortNode = regexp.MustCompile(`(?m)^\s*(->\s+)?Sort\s+\(`)

// TestListFilters: the lists' windows and rare filters page through
// exactly what they select (storetest.ListFilters), as on SQLite.
func TestListFilters(t *testing.T) {
	t.Parallel()
	storetest.ListFilters(t, open(t))
	// The events of a source and type in a status over a window: their
	// few ids read first, and (none few) each event probed.
	for _, few := range []int{0, -1} {
		s := openDSN(t, pgtest.DSN(t))
		s.SetFewShown(few)
		storetest.ListStatusSourceType(t, s)
	}
}

// TestPlansDeliveriesSource: the deliveries list filtered by source, as
// ListDeliveries asks it, reads the deliveries alone and walks an index on
// their source in the list's order: with a destination, that index's
// (destination, source) range, not every delivery of the destination
// probing each one's event (0.8 to 2.2 s at 300K events for a source that
// never sent to it). Sequential scans and sorts are priced out as in
// TestPlansUseIndexes.
func TestPlansDeliveriesSource(t *testing.T) {
	t.Parallel()
	conn := planConn(t)
	for _, c := range []struct {
		name, index string
		f           store.DeliveryFilter
	}{
		{"a destination's of a source", "deliveries_destination_source", store.DeliveryFilter{Destination: "billing", Source: "github"}},
		{"a destination's of a source, after a cursor", "deliveries_destination_source",
			store.DeliveryFilter{Destination: "billing", Source: "github", Cursor: "01a2"}},
		{"a source's", "deliveries_source", store.DeliveryFilter{Source: "github"}},
		{"a source's, after a cursor", "deliveries_source", store.DeliveryFilter{Source: "github", Cursor: "01a2"}},
	} {
		q, args := postgres.DeliveriesSQL(c.f, nil)
		plan := explain(t, conn, q, args)
		if !strings.Contains(plan, " "+c.index+" ") || strings.Contains(plan, "events") || strings.Contains(plan, "Seq Scan") ||
			sortNode.MatchString(plan) {
			t.Errorf("%s: want %s, no events, no Seq Scan, no Sort:\n%s", c.name, c.index, plan)
		}
	}
}

// TestPlansPendingStatus: events pending (never tried) or retrying, as
// ListEvents asks them, probe the index of their own part of the stored
// 'pending' deliveries. Through deliveries_status_event, which holds both
// parts, a list of the part that has none walked every event probing the
// other part's deliveries: 0.7 s at ten million events, thousands
// retrying and none new. Sequential scans and sorts are priced out as in
// TestPlansUseIndexes.
func TestPlansPendingStatus(t *testing.T) {
	t.Parallel()
	conn := planConn(t)
	for status, index := range map[string]string{"pending": "deliveries_untried", "retrying": "deliveries_retrying"} {
		for _, f := range []store.EventFilter{{Status: anyhook.DeliveryStatus(status)}, {Status: anyhook.DeliveryStatus(status), Cursor: "01a2"}} {
			for _, dests := range [][]string{{"billing"}, {"billing", "ledger"}} {
				q, args := postgres.EventsSQL(f, dests)
				plan := explain(t, conn, q, args)
				if !strings.Contains(plan, " "+index+" ") || strings.Contains(plan, "Seq Scan") || sortNode.MatchString(plan) {
					t.Errorf("%+v, of %v: want %s, no Seq Scan, no Sort:\n%s", f, dests, index, plan)
				}
			}
		}
	}
}

// TestPlansPausedByName: the lists of a status derived from the pause
// compare the deliveries' destination with the held-back destinations'
// names, read first, never probing the destinations table row by row: a
// paused list reads the held-back destinations' deliveries through an
// index on the destination. With a per-row probe, events paused of a
// source that never sent to the paused destination walked all of that
// source's events (1.0 s at a million events), and deliveries paused of a
// source over a window its whole window (459 ms). Sequential scans and
// sorts are priced out as in TestPlansUseIndexes.
func TestPlansPausedByName(t *testing.T) {
	t.Parallel()
	conn := planConn(t)
	held := []string{"ci"}
	since := time.Now().Add(-31 * 24 * time.Hour)
	for _, st := range []anyhook.DeliveryStatus{anyhook.StatusPaused, anyhook.StatusPending, anyhook.StatusRetrying} {
		for _, f := range []store.DeliveryFilter{{Status: st}, {Status: st, Source: "stripe", Since: since}} {
			q, args := postgres.DeliveriesSQL(f, held)
			plan := explain(t, conn, q, args)
			if strings.Contains(plan, "destinations") || strings.Contains(plan, "Seq Scan") {
				t.Errorf("deliveries %+v: want no destinations, no Seq Scan:\n%s", f, plan)
			}
			// (Over a window, which one depends on the store's statistics.)
			if st == anyhook.StatusPaused && f.Since.IsZero() && !strings.Contains(plan, "deliveries_destination_") {
				t.Errorf("deliveries %+v: want an index on the destination:\n%s", f, plan)
			}
		}
		for _, f := range []store.EventFilter{{Status: st}, {Status: st, Source: "stripe"}} {
			q, args := postgres.EventsSQL(f, held)
			plan := explain(t, conn, q, args)
			if strings.Contains(plan, "destinations") || strings.Contains(plan, "Seq Scan") {
				t.Errorf("events %+v: want no destinations, no Seq Scan:\n%s", f, plan)
			}
		}
	}
}

// explain is the plan of q.
func explain(t *testing.T, conn *pgx.Conn, q string, args []any) string {
	t.Helper()
	rows, err := conn.Query(t.Context(), `EXPLAIN `+q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// planConn is a connection to a migrated database on which sequential
// scans and sorts are priced out: a plan that still has one has no index
// to use.
func planConn(t *testing.T) *pgx.Conn {
	t.Helper()
	dsn := pgtest.DSN(t)
	openDSN(t, dsn) // applies the migrations
	conn := connect(t, dsn)
	if _, err := conn.Exec(t.Context(), `SET enable_seqscan = off; SET enable_sort = off`); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestPlansHeldBackDestinations: once a destination is paused or its
// breaker trips, the planner knows how few destinations are held back.
// The destinations table is tiny and autovacuum analyzes it only after
// 50 changes: without statistics the planner took its one row for dozens
// (a page's worth), all held back, so "NOT held back" (status=pending,
// status=retrying) looked like it kept no delivery, and the events list
// read every retrying delivery and probed its event: 150 ms at 300,000
// events with one destination paused, 2.5 ms once analyzed.
func TestPlansHeldBackDestinations(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s := openDSN(t, dsn)
	conn := connect(t, dsn)
	estimate := func() string {
		plan := explain(t, conn, `SELECT 1 FROM destinations ps WHERE `+sqlstore.HeldBack("ps."), nil)
		return regexp.MustCompile(`rows=(\d+)`).FindStringSubmatch(plan)[1]
	}
	if err := s.SetPaused(t.Context(), "billing", true); err != nil {
		t.Fatal(err)
	}
	if got := estimate(); got != "1" {
		t.Errorf("one destination paused: the planner estimates %s held back, want 1", got)
	}
	if _, err := s.TripBreaker(t.Context(), "ci", time.Now(), "failing", time.Now().Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if got := estimate(); got != "2" {
		t.Errorf("one paused, one tripped: the planner estimates %s held back, want 2", got)
	}
	// A store whose table was never analyzed since its rows came (paused
	// before this was done) is analyzed when it is opened.
	if _, err := conn.Exec(t.Context(), `INSERT INTO destinations (name, paused) VALUES ('ledger', true), ('crm', true)`); err != nil {
		t.Fatal(err)
	}
	openDSN(t, dsn)
	var rows float64
	if err := conn.QueryRow(t.Context(), `SELECT reltuples FROM pg_class WHERE oid = 'destinations'::regclass`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 4 {
		t.Errorf("four rows, the store opened again: the statistics count %v, want 4", rows)
	}
}

// TestPlansPausedOfASource: on a store whose routes send each source to
// some destinations only, the paused deliveries of a source that no route
// sends to the paused destination are found (none) through the index on
// (destination, source), not by walking the window; and the pending ones
// of a source that sends only to it through its pending deliveries. The planner needs
// the statistics of migration 0041: multiplying the shares of the status,
// the destination and the source, it took them for thousands and walked
// every delivery of the window (1.1 s at a million events).
func TestPlansPausedOfASource(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s := openDSN(t, dsn)
	// 6,000 events delivered, then 400 pending: stripe's to billing,
	// github's to ci.
	var batch []store.NewEvent
	for i := range 6400 {
		src, dest := "stripe", "billing"
		if i%2 == 1 {
			src, dest = "github", "ci"
		}
		batch = append(batch, store.NewEvent{Event: anyhook.Event{ID: store.NewID(), Source: src, DedupKey: fmt.Sprint("evt_", i),
			ReceivedAt: time.Now(), Method: "POST", Path: "/webhooks/" + src, Body: []byte(`{}`)}, Destinations: []string{dest}})
		if len(batch) < 400 {
			continue
		}
		if _, err := s.Ingest(t.Context(), batch); err != nil {
			t.Fatal(err)
		}
		batch = batch[:0]
		for _, d := range []string{"billing", "ci"} {
			if i >= 6000 {
				break
			}
			cs, err := s.Claim(t.Context(), d, 1000, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			outs := make([]store.Outcome, len(cs))
			for k, c := range cs {
				outs[k] = store.Outcome{DeliveryID: c.Delivery.ID, Attempt: c.Delivery.AttemptCount, Status: anyhook.StatusDelivered,
					Result: anyhook.Attempt{Number: c.Delivery.AttemptCount, StartedAt: time.Now(), StatusCode: 200, Outcome: anyhook.OutcomeAnswered}}
			}
			if _, err := s.Finish(t.Context(), outs); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.SetPaused(t.Context(), "ci", true); err != nil {
		t.Fatal(err)
	}
	conn := connect(t, dsn)
	if _, err := conn.Exec(t.Context(), `ANALYZE deliveries`); err != nil { // as autovacuum would
		t.Fatal(err)
	}
	since := time.Now().Add(-31 * 24 * time.Hour)
	q, args := postgres.DeliveriesSQL(store.DeliveryFilter{Status: anyhook.StatusPaused, Source: "stripe", Since: since}, []string{"ci"})
	if plan := explain(t, conn, q, args); !strings.Contains(plan, "deliveries_destination_source") {
		t.Errorf("deliveries paused of stripe over a month: want deliveries_destination_source:\n%s", plan)
	}
	// Every pending delivery of github is held back: pending of github
	// reads pending deliveries only, not all of a window's.
	for _, f := range []store.DeliveryFilter{{Status: anyhook.StatusPending, Source: "github"}, {Status: anyhook.StatusPending, Source: "github", Since: since}} {
		q, args := postgres.DeliveriesSQL(f, []string{"ci"})
		if plan := explain(t, conn, q, args); !strings.Contains(plan, "deliveries_pending_source") && !strings.Contains(plan, "deliveries_untried") {
			t.Errorf("deliveries %+v, ci held back: want an index of the pending deliveries only:\n%s", f, plan)
		}
	}
}

// TestHeldBackLists: as on SQLite (storetest.HeldBackLists).
func TestHeldBackLists(t *testing.T) {
	t.Parallel()
	for _, few := range []int{-1, 1 << 30} { // by one query; by ids first
		s := openDSN(t, pgtest.DSN(t))
		s.SetFewShown(few)
		storetest.HeldBackLists(t, s)
	}
}

// TestHeldBackRace: storetest.HeldBackRace.
func TestHeldBackRace(t *testing.T) {
	t.Parallel()
	storetest.HeldBackRace(t, open(t), 1000)
}

// TestMigrationsAnalyzeNoSmallTable: the migrations analyze no table
// while it is small. A table never analyzed is planned as ten pages at
// least; one analyzed as what it held then, so a plan made while it is
// small scans it whole, and PostgreSQL keeps such a plan per connection
// (a prepared statement's generic plan, a foreign key's check) while the
// table grows, until autovacuum analyzes it again. Deliveries analyzed
// empty by 0041 and 0043 made each attempt's check on its delivery scan
// every delivery: 300–600 µs of PostgreSQL's time per event in the bench
// (BENCHMARKS.md, "The cause: deliveries analyzed while empty"). Tables
// that hold a row or a few for good (the destinations, analyzed on open;
// the log's state; the migrations applied) are scanned rightly.
func TestMigrationsAnalyzeNoSmallTable(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s := openDSN(t, dsn)
	conn := connect(t, dsn)
	// What autovacuum analyzed since is not the migrations' doing.
	rows, err := conn.Query(t.Context(), `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		JOIN pg_stat_user_tables u ON u.relid = c.oid
		WHERE n.nspname = current_schema() AND c.relkind = 'r' AND c.reltuples >= 0
			AND c.relname NOT IN ('destinations', 'ledger_state', 'schema_migrations')
			AND u.last_autoanalyze IS NULL AND u.last_autovacuum IS NULL
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	analyzed, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(analyzed) > 0 {
		t.Errorf("tables a fresh store's migrations analyzed: %v", analyzed)
	}
	// The plan the attempts' foreign key checks each row with, as it
	// is kept: generic.
	if _, err := conn.Exec(t.Context(), `SET plan_cache_mode = force_generic_plan;
		PREPARE fk (text) AS SELECT 1 FROM ONLY deliveries x WHERE id = $1 FOR KEY SHARE OF x`); err != nil {
		t.Fatal(err)
	}
	if plan := explain(t, conn, `EXECUTE fk ('x')`, nil); !strings.Contains(plan, "Index Scan") {
		t.Errorf("the attempts' foreign-key check on a fresh store does not seek the delivery:\n%s", plan)
	}

	// The guard of 0041 and 0043, run again: a store upgraded with a few
	// deliveries is left unanalyzed; one of ten pages or more is analyzed.
	guards := regexp.MustCompile(`(?s)DO \$\$ BEGIN\s+IF pg_relation_size.*?END \$\$;`)
	var guard string
	for _, f := range []string{"0041_deliveries_routes.sql", "0043_deliveries_type.sql"} {
		b, err := os.ReadFile(filepath.Join("migrations", f))
		if err != nil {
			t.Fatal(err)
		}
		g := guards.FindString(string(b))
		if g == "" || guard != "" && g != guard {
			t.Fatalf("%s: its ANALYZE is not guarded as 0041's: %q", f, g)
		}
		guard = g
	}
	reltuples := func() float64 {
		var n float64
		if err := conn.QueryRow(t.Context(), `SELECT reltuples FROM pg_class WHERE oid = 'deliveries'::regclass`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	ingest := func(n int) {
		batch := make([]store.NewEvent, n)
		for i := range batch {
			batch[i] = newEvent("stripe", store.NewID(), "charges")
		}
		if _, err := s.Ingest(t.Context(), batch); err != nil {
			t.Fatal(err)
		}
	}
	ingest(20)
	if _, err := conn.Exec(t.Context(), guard); err != nil {
		t.Fatal(err)
	}
	if n := reltuples(); n >= 0 {
		t.Errorf("20 deliveries: the guard analyzed them (%v rows)", n)
	}
	for i := 0; i < 10; i++ {
		ingest(100)
	}
	if _, err := conn.Exec(t.Context(), guard); err != nil {
		t.Fatal(err)
	}
	if n := reltuples(); n < 1000 {
		t.Errorf("1,020 deliveries: the guard left the statistics at %v rows", n)
	}
}
