package sqlite_test

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
	"github.com/anyhook/anyhook/internal/store/storetest"
)

// TestPlansUseIndexes: the list queries whose filter must not read every
// event walk their index, in the lists' order where they page: SQLite's
// plan (EXPLAIN QUERY PLAN, the same without statistics on an empty file
// as on a filled one) names the index and neither a full SCAN of the table
// nor a temporary B-tree for the order. The figures on a filled store are
// in BENCHMARKS.md ("The read side at scale").
func TestPlansUseIndexes(t *testing.T) {
	t.Parallel()
	_, path := openFile(t) // applies the migrations
	db := readOnly(t, path)
	exact := sqlstore.NewWhere(sqlstore.SQLite)
	exact.AddType("events.type", "Invoice.Paid")
	exact.AddString("events.id < ?", "01a2")
	both := sqlstore.NewWhere(sqlstore.SQLite)
	both.AddString("events.source = ?", "generic")
	both.AddType("events.type", "Push")
	both.AddString("events.id < ?", "01a2")
	from, to := sqlstore.TypeRange("invoice.*")
	for _, c := range []struct {
		name, sql, index string
		args             []any
	}{
		{"a glob's types, one seek each", sqlstore.SQLite.TypesQuery(), "events_type", []any{from, to, to}},
		{"one type newest first", `SELECT id FROM events` + exact.String() + ` ORDER BY events.id DESC LIMIT 51`, "events_type", exact.Args()},
		{"a source and a type newest first", `SELECT id FROM events` + both.String() + ` ORDER BY events.id DESC LIMIT 51`, "events_source_type", both.Args()},
	} {
		plan := explain(t, db, c.sql, c.args...)
		if !strings.Contains(plan, c.index) || strings.Contains(plan, "SCAN events\n") || strings.HasSuffix(plan, "SCAN events") ||
			strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("%s: want %s, no SCAN events, no TEMP B-TREE:\n%s", c.name, c.index, plan)
		}
	}
}

// TestPlanProviderIDWithoutSource: a provider event id without a source
// is looked up in events_dedup once for each source, the sources found by
// one index seek each: no step of the plan reads all the events.
func TestPlanProviderIDWithoutSource(t *testing.T) {
	t.Parallel()
	s, path := openFile(t)
	db := readOnly(t, path)
	for _, f := range []store.EventFilter{{Q: "evt_1"}, {Q: "evt_1", Since: planSince}, {Q: "evt_1", Status: anyhook.StatusDead}} {
		q, args, err := sqlite.EventsSQL(s, t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		plan := explain(t, db, q, args...)
		outer, _, _ := strings.Cut(plan, "\n")
		if outer != "SEARCH events USING INDEX events_dedup (source=? AND dedup_key=?)" ||
			strings.Contains(plan, "SCAN events") || !strings.Contains(plan, "events_source (source>?)") {
			t.Errorf("%+v: want events_dedup searched by source and id, the sources by seeks:\n%s", f, plan)
		}
	}
}

// TestPlansClaimPending: claims read only the pending deliveries
// (deliveries_due holds no others since 0063), the ordered claim's blocked
// objects the destination's in flight and held too, each through an index:
// no step reads every delivery, or a destination's history.
func TestPlansClaimPending(t *testing.T) {
	t.Parallel()
	_, path := openFile(t)
	db := readOnly(t, path)
	for _, c := range []struct {
		name, sql string
		args      []any
		want      []string
	}{
		{"claim", sqlite.ClaimQuery, []any{1, 1, 1, "d", 1, 10},
			[]string{"SEARCH deliveries USING INDEX deliveries_due (destination=? AND next_attempt_at<?)"}},
		{"ordered claim's candidates", sqlite.OrderCandidates, []any{"d", "d", 1, "d", 1, 10}, []string{
			"SEARCH deliveries USING INDEX deliveries_destination_status (destination=? AND status=?)",
			"SEARCH deliveries USING INDEX deliveries_due (destination=? AND next_attempt_at>?)",
			"SEARCH d USING INDEX deliveries_due (destination=? AND next_attempt_at<?)"}},
	} {
		plan := explain(t, db, c.sql, c.args...)
		for _, w := range c.want {
			if !strings.Contains(plan, w) {
				t.Errorf("%s: want %q:\n%s", c.name, w, plan)
			}
		}
		if strings.Contains(plan, "SCAN deliveries") || strings.Contains(plan, "SCAN d\n") || strings.HasSuffix(plan, "SCAN d") {
			t.Errorf("%s: a step scans the deliveries:\n%s", c.name, plan)
		}
	}
}

// explain is q's EXPLAIN QUERY PLAN, a step a line.
func explain(t *testing.T, db *sql.DB, q string, args ...any) string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), `EXPLAIN QUERY PLAN `+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var lines []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		lines = append(lines, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, "\n")
}

// TestListFiltersBothWays: the lists' filters that select few rows answer
// the same whether the store reads and sorts them (a few rows, the default
// for this small store) or walks its index in order (forced here: no
// filter counts as few).
func TestListFiltersBothWays(t *testing.T) {
	t.Parallel()
	for _, few := range []int{0, 1 << 30} {
		s, _ := openFile(t)
		sqlite.SetFewRows(s, few)
		storetest.ListFilters(t, s)
		s, _ = openFile(t)
		sqlite.SetFewRows(s, few)
		storetest.ListStatusSourceType(t, s)
	}
}

// TestWindowPlansRareFilters: a time window over a filter selecting few
// rows (a type no event has, the held queue, a quiet destination) reads
// those few through their index and sorts them, rather than walking the
// window's time index, which reads every row of a long window to find
// none. When the filter selects many (no filter counts as few here) the
// time index is walked in order, not every row of a common status (which
// reads all those after a window far back). An exact provider event id
// reads its few events first, whatever the status, and so does a source
// or a type with few events.
func TestWindowPlansRareFilters(t *testing.T) {
	t.Parallel()
	s, path := openFile(t) // empty: every filter selects few
	db := readOnly(t, path)
	for _, c := range []struct {
		name      string
		ev        *store.EventFilter
		dl        *store.DeliveryFilter
		few, many string // the index of the outer loop
	}{
		{"events of a type, since", &store.EventFilter{Type: "nothing.here", Since: planSince}, nil,
			"events_type", "events_received"},
		{"events in a status, until", &store.EventFilter{Status: anyhook.StatusDelivered, Until: planSince}, nil,
			"deliveries_status_event", "events_received"},
		{"events in a status, by provider id", &store.EventFilter{Status: anyhook.StatusDelivered, Q: "evt_1"}, nil,
			"events_dedup", "events_dedup"},
		{"events in a status, by provider id, since", &store.EventFilter{Status: anyhook.StatusDead, Q: "evt_1", Since: planSince}, nil,
			"events_dedup", "events_dedup"},
		{"events in a status of a quiet source", &store.EventFilter{Status: anyhook.StatusDelivered, Source: "quiet"}, nil,
			"events_source", "deliveries_status_event"},
		{"events in a status of a rare type", &store.EventFilter{Status: anyhook.StatusDead, Type: "nothing.here"}, nil,
			"events_type", "deliveries_status_event"},
		{"events of a quiet source, since", &store.EventFilter{Source: "quiet", Since: planSince}, nil,
			"events_source", "events_received"},
		{"held deliveries, since", nil, &store.DeliveryFilter{Status: anyhook.StatusHeld, Since: planSince},
			"deliveries_status", "deliveries_created"},
		{"a destination's deliveries, until", nil, &store.DeliveryFilter{Destination: "quiet", Until: planSince},
			"deliveries_destination", "deliveries_created"},
	} {
		for _, few := range []bool{true, false} {
			want := fewOrMany(s, few, c.few, c.many)
			var q string
			var args []any
			var err error
			if c.ev != nil {
				q, args, err = sqlite.EventsSQL(s, t.Context(), *c.ev)
			} else {
				q, args, err = sqlite.DeliveriesSQL(s, t.Context(), *c.dl)
			}
			if err != nil {
				t.Fatal(err)
			}
			plan := explain(t, db, q, args...)
			outer, _, _ := strings.Cut(plan, "\n")
			if !strings.Contains(outer, want) || strings.HasPrefix(outer, "SCAN") {
				t.Errorf("%s (few %v): want the outer loop on %s:\n%s", c.name, few, want, plan)
			}
		}
	}
}

// TestWindowPlansPaused: paused (pending deliveries of a held-back
// destination) counts as few when few pending deliveries are paused, not
// when few are pending: walking the window probed every event in it (27 s
// at 1M events with none paused). With no destination held back, paused
// needs no query at all.
func TestWindowPlansPaused(t *testing.T) {
	t.Parallel()
	s, path := openFile(t)
	ne := store.NewEvent{Event: anyhook.Event{ID: store.NewID(), Source: "s", DedupKey: "k", ReceivedAt: time.Now(),
		Method: "POST", Path: "/webhooks/s", Body: []byte(`{}`)}, Destinations: []string{"d", "e"}}
	if res, err := s.Ingest(t.Context(), []store.NewEvent{ne}); err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	evf := store.EventFilter{Status: anyhook.StatusPaused, Since: planSince}
	dlf := store.DeliveryFilter{Status: anyhook.StatusPaused, Since: planSince}
	if q, _, err := sqlite.EventsSQL(s, t.Context(), evf); q != "" || err != nil {
		t.Errorf("events paused, none held back: %q, %v; want no query", q, err)
	}
	if q, _, err := sqlite.DeliveriesSQL(s, t.Context(), dlf); q != "" || err != nil {
		t.Errorf("deliveries paused, none held back: %q, %v; want no query", q, err)
	}
	if err := s.SetPaused(t.Context(), "e", true); err != nil {
		t.Fatal(err)
	}
	sqlite.SetFewRows(s, 2) // two pending deliveries are not few; one paused is
	db := readOnly(t, path)
	evq, evargs, err := sqlite.EventsSQL(s, t.Context(), evf)
	if err != nil {
		t.Fatal(err)
	}
	dq, dargs, err := sqlite.DeliveriesSQL(s, t.Context(), dlf)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, q string
		args    []any
	}{{"events", evq, evargs}, {"deliveries", dq, dargs}} {
		plan := explain(t, db, c.q, c.args...)
		// (A correlated subquery on destinations is the shown status of
		// each row read.)
		if outer, _, _ := strings.Cut(plan, "\n"); !strings.Contains(outer, "SEARCH d USING") || !strings.Contains(outer, "destination=?") {
			t.Errorf("%s paused since: want the outer loop on the paused destination's deliveries:\n%s", c.name, plan)
		}
	}
}

// TestPlansDeliveriesSource: the deliveries list filtered by source walks
// an index on the delivery's source, in the list's order (no temporary
// B-tree), whether the store counts the source's deliveries as few or
// not: with a destination that index's (destination, source) range, not
// every delivery of the destination probing each one's event (0.9 to 5.4
// s at 1M events for a source that never sent to it); alone or with a
// status, the source's, unless the source has few in the status (none
// dead, say): those are read through their own index (0043) and sorted.
// A source's time window reads its few deliveries and sorts them, or
// walks the window's index when they are many.
func TestPlansDeliveriesSource(t *testing.T) {
	t.Parallel()
	s, path := openFile(t)
	db := readOnly(t, path)
	for _, c := range []struct {
		name      string
		f         store.DeliveryFilter
		few, many string // the index of the outer loop
	}{
		{"a destination's of a source", store.DeliveryFilter{Destination: "billing", Source: "github"},
			"deliveries_destination_source", "deliveries_destination_source"},
		{"a destination's of a source, after a cursor", store.DeliveryFilter{Destination: "billing", Source: "github", Cursor: "01a2"},
			"deliveries_destination_source", "deliveries_destination_source"},
		{"a source's", store.DeliveryFilter{Source: "github"}, "deliveries_source", "deliveries_source"},
		{"a source's in a status", store.DeliveryFilter{Source: "github", Status: anyhook.StatusDead},
			"deliveries_status_source_type", "deliveries_source"},
		{"a destination's of a source in a status", store.DeliveryFilter{Destination: "billing", Source: "github", Status: anyhook.StatusDead},
			"deliveries_status_source_type", "deliveries_destination_source"},
		{"a source's, since", store.DeliveryFilter{Source: "github", Since: planSince}, "deliveries_source", "deliveries_created"},
		{"a destination's of a source, since", store.DeliveryFilter{Destination: "billing", Source: "github", Since: planSince},
			"deliveries_destination_source", "deliveries_created"},
	} {
		for _, few := range []bool{true, false} {
			want := fewOrMany(s, few, c.few, c.many)
			q, args, err := sqlite.DeliveriesSQL(s, t.Context(), c.f)
			if err != nil {
				t.Fatal(err)
			}
			plan := explain(t, db, q, args...)
			outer, _, _ := strings.Cut(plan, "\n")
			sorts := store.DeliveriesByTime(c.f) && want != "deliveries_created" || want == "deliveries_status_source_type"
			if !strings.Contains(outer, "USING INDEX "+want+" ") || strings.HasPrefix(outer, "SCAN") ||
				strings.Contains(plan, " e USING") || strings.Contains(plan, "SCAN e") || strings.Contains(plan, "TEMP B-TREE") != sorts {
				t.Errorf("%s (few %v): want the outer loop on %s, no events, a sort %v:\n%s", c.name, few, want, sorts, plan)
			}
		}
	}
}

// fewOrMany makes the store count a filter's rows as few (up to 2,000) or
// never few, and returns the index expected then.
func fewOrMany(s *sqlite.Store, few bool, fewIndex, manyIndex string) string {
	if few {
		sqlite.SetFewRows(s, 2000)
		return fewIndex
	}
	sqlite.SetFewRows(s, 0)
	return manyIndex
}

// planSince is a window's edge for the plans: only EXPLAIN reads it, so
// any fixed instant does (it stands for no "now").
var planSince = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// readOnly opens the store's file read-only, for EXPLAIN QUERY PLAN.
func readOnly(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// TestWindowPlanSourceAndType: a source and a type each with many events
// but none together, over a window, read through events_source_type (one
// seek, none found): the window's time index read every event before it,
// the type's index every event of the type (3.7 s at ten million events
// on PostgreSQL, the same walk here).
func TestWindowPlanSourceAndType(t *testing.T) {
	t.Parallel()
	s, path := openFile(t)
	for i, e := range []struct{ source, typ string }{{"generic", "invoice.paid"}, {"generic", "invoice.paid"}, {"stripe", "push"}, {"stripe", "push"}} {
		ne := store.NewEvent{Event: anyhook.Event{ID: store.NewID(), Source: e.source, Type: e.typ, DedupKey: fmt.Sprint("k", i), ReceivedAt: time.Now(),
			Method: "POST", Path: "/webhooks/" + e.source, Body: []byte(`{}`)}}
		if res, err := s.Ingest(t.Context(), []store.NewEvent{ne}); err != nil || res[0].Err != nil {
			t.Fatal(err, res)
		}
	}
	sqlite.SetFewRows(s, 2) // two events of a source, or of a type, are many
	db := readOnly(t, path)
	for _, f := range []store.EventFilter{
		{Source: "generic", Type: "push", Until: time.Now()},
		{Source: "generic", Type: "push", Status: anyhook.StatusDead, Since: planSince},
	} {
		q, args, err := sqlite.EventsSQL(s, t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		if plan := explain(t, db, q, args...); !strings.Contains(plan, "events_source_type") {
			t.Errorf("events %+v: want events_source_type:\n%s", f, plan)
		}
	}
}

// TestPlansStatusSourceType: the events of a source (and a type) with a
// delivery dead, held or resolved read the deliveries' own partial index
// of the three (0043): for an exact type without a window in the list's order,
// whether few or many; else when few, read and sorted; when many, the
// status's index in event order (or the window's). Walking the status's
// deliveries read every one of them, probing its event, to find a pair
// with none.
func TestPlansStatusSourceType(t *testing.T) {
	t.Parallel()
	s, path := openFile(t)
	for i := range 3 { // more events of the pair than few (below)
		ne := store.NewEvent{Event: anyhook.Event{ID: store.NewID(), Source: "shopify", Type: "push", DedupKey: fmt.Sprint("k", i), ReceivedAt: time.Now(),
			Method: "POST", Path: "/webhooks/shopify", Body: []byte(`{}`)}}
		if res, err := s.Ingest(t.Context(), []store.NewEvent{ne}); err != nil || res[0].Err != nil {
			t.Fatal(err, res)
		}
	}
	db := readOnly(t, path)
	for _, c := range []struct {
		name      string
		f         store.EventFilter
		few, many string // the index of the outer loop
		sorts     bool   // when few
	}{
		{"dead of a source and a type", store.EventFilter{Status: anyhook.StatusDead, Source: "shopify", Type: "Push"},
			"deliveries_status_source_type (status=? AND source=? AND <expr>=?)", "deliveries_status_source_type (status=? AND source=? AND <expr>=?)", false},
		{"dead of a source", store.EventFilter{Status: anyhook.StatusDead, Source: "shopify"},
			"deliveries_status_source_type (status=? AND source=?)", "deliveries_status_event", true},
		{"dead of a source and a type, since", store.EventFilter{Status: anyhook.StatusDead, Source: "shopify", Type: "push", Since: planSince},
			"deliveries_status_source_type (status=? AND source=? AND <expr>=?)", "events_received", true},
		// Not a status of the partial index: the status's own, in order.
		{"delivered of a source and a type", store.EventFilter{Status: anyhook.StatusDelivered, Source: "shopify", Type: "push"},
			"deliveries_status_event", "deliveries_status_event", false},
	} {
		for _, few := range []int{2, 0} { // dead: none, fewer than 2; 0: nothing is few
			sqlite.SetFewRows(s, few)
			want, sorts := c.few, c.sorts
			if few == 0 {
				want, sorts = c.many, false
			}
			q, args, err := sqlite.EventsSQL(s, t.Context(), c.f)
			if err != nil {
				t.Fatal(err)
			}
			plan := explain(t, db, q, args...)
			outer, _, _ := strings.Cut(plan, "\n")
			// (A sort of the last term only orders ties of receive time.)
			sorted := strings.Contains(plan, "TEMP B-TREE FOR GROUP BY") || strings.Contains(plan, "TEMP B-TREE FOR ORDER BY")
			if !strings.Contains(outer, want) || sorted != sorts {
				t.Errorf("%s (few %d): want the outer loop on %s, a sort %v:\n%s", c.name, few, want, sorts, plan)
			}
		}
	}
}

// TestPlansDerivedStatus: events pending (never tried), retrying or
// paused walk the named destinations' stored pending deliveries in
// deliveries_waiting (of a source: deliveries_waiting_source), migration
// 0040, which holds the attempt count the list tests. Through
// deliveries_status_event, which holds every pending delivery, a list of a
// part that has none read every pending delivery's row to find none: 73
// ms at a million events, pending with none new; 36 ms for the paused
// events of a source never sent to the paused destination.
func TestPlansDerivedStatus(t *testing.T) {
	t.Parallel()
	s, path := openFile(t)
	seedShown(t, s) // a delivery shown in each status: else no query
	if err := s.SetPaused(t.Context(), "ci", true); err != nil {
		t.Fatal(err)
	}
	sqlite.SetFewRows(s, 0) // a source has many events
	db := readOnly(t, path)
	for _, st := range []anyhook.DeliveryStatus{anyhook.StatusPending, anyhook.StatusRetrying, anyhook.StatusPaused} {
		for _, f := range []store.EventFilter{{Status: st}, {Status: st, Source: "stripe"}, {Status: st, Cursor: "01a2"}} {
			q, args, err := sqlite.EventsSQL(s, t.Context(), f)
			if err != nil {
				t.Fatal(err)
			}
			index := "deliveries_waiting "
			if f.Source != "" {
				index = "deliveries_waiting_source "
			}
			if plan := explain(t, db, q, args...) + " "; !strings.Contains(plan, " "+index) {
				t.Errorf("events %+v: want %s:\n%s", f, index, plan)
			}
		}
	}
}

// TestPlansDeliveriesRareDerivedStatus: the deliveries of a source in a
// derived status (pending: never tried; retrying) that few deliveries are
// in must not walk every delivery of the source: on a million-event fill
// (no untried delivery, 45,828 retrying) GET
// /api/deliveries?status=pending&source=stripe read all 510,296 of
// stripe's deliveries to answer none (0.4 s in sqlite3, 0.8-3 s served).
// A derived status's few rows are read through its partial index: so is
// the list without a source (pending walked all 45,828 pending
// deliveries to find none untried: 78-136 ms).
func TestPlansDeliveriesRareDerivedStatus(t *testing.T) {
	t.Parallel()
	s, path := openFile(t)
	ne := store.NewEvent{Event: anyhook.Event{ID: store.NewID(), Source: "stripe", DedupKey: "k", ReceivedAt: time.Now(),
		Method: "POST", Path: "/webhooks/stripe", Body: []byte(`{}`)}, Destinations: []string{"d", "e"}}
	if res, err := s.Ingest(t.Context(), []store.NewEvent{ne}); err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	for _, dest := range []string{"d", "e"} {
		cs, err := s.Claim(t.Context(), dest, 1, time.Minute)
		if err != nil || len(cs) != 1 {
			t.Fatalf("claim %s: %v %d", dest, err, len(cs))
		}
		if _, err := s.Finish(t.Context(), []store.Outcome{{DeliveryID: cs[0].Delivery.ID, Attempt: cs[0].Delivery.AttemptCount, Status: anyhook.StatusDelivered,
			Result: anyhook.Attempt{Number: 1, StartedAt: time.Now(), StatusCode: 200, Outcome: anyhook.OutcomeAnswered}}}); err != nil {
			t.Fatal(err)
		}
	}
	// Another source's deliveries, untried and retrying (else the counters
	// answer none without a query); of stripe none is pending or retrying.
	// ci held back: one untried and one retrying, g's.
	seedShown(t, s)
	if err := s.SetPaused(t.Context(), "ci", true); err != nil {
		t.Fatal(err)
	}
	sqlite.SetFewRows(s, 2) // the source's two deliveries are many; none pending or retrying is few
	db := readOnly(t, path)
	for _, st := range []anyhook.DeliveryStatus{anyhook.StatusPending, anyhook.StatusRetrying} {
		for _, f := range []store.DeliveryFilter{{Status: st, Source: "stripe"}, {Status: st}, {Status: st, Since: time.Now().Add(-time.Hour)}} {
			q, args, err := sqlite.DeliveriesSQL(s, t.Context(), f)
			if err != nil {
				t.Fatal(err)
			}
			index := "deliveries_waiting "
			if f.Source != "" {
				index = "deliveries_waiting_source "
			}
			plan := explain(t, db, q, args...)
			if outer, _, _ := strings.Cut(plan, "\n"); !strings.Contains(outer+" ", " "+index) {
				t.Errorf("deliveries %+v, none %s: want the outer loop on %s, the status's few rows:\n%s", f, st, index, plan)
			}
		}
	}
}

// TestHeldBackLists: the lists of a status derived from a pause select
// what each delivery's shown status does (storetest.HeldBackLists),
// whether the store reads and sorts the rows or walks its index in order.
func TestHeldBackLists(t *testing.T) {
	t.Parallel()
	for _, few := range []int{0, 1 << 30} {
		s, _ := openFile(t)
		sqlite.SetFewRows(s, few)
		storetest.HeldBackLists(t, s)
	}
}

// TestPlansPausedSeveralHeld: with several destinations held back, the
// paused events walk each one's deliveries in deliveries_waiting newest
// first, a page's worth each. Comparing the destination with the names
// in one IN walked all their paused deliveries, joined every one to its
// event and grouped them in a temporary B-tree to find the newest page:
// 0.7-1.1 s for /api/events?status=paused at 300,000 events with two
// destinations holding 25,700 deliveries back, where one took 3 ms.
func TestPlansPausedSeveralHeld(t *testing.T) {
	t.Parallel()
	s, path := openFile(t)
	seedShown(t, s) // ci's deliveries shown paused: else no query
	if err := s.SetPaused(t.Context(), "ci", true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TripBreaker(t.Context(), "billing", time.Now(), "test", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	sqlite.SetFewRows(s, 0)
	db := readOnly(t, path)
	for _, f := range []store.EventFilter{{Status: anyhook.StatusPaused}, {Status: anyhook.StatusPaused, Source: "stripe"},
		{Status: anyhook.StatusPaused, Cursor: "01a2"}, {Status: anyhook.StatusPaused, Type: "push"}} {
		q, args, err := sqlite.EventsSQL(s, t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		if plan := explain(t, db, q, args...); !strings.Contains(plan, "deliveries_waiting") || strings.Contains(plan, "TEMP B-TREE FOR GROUP BY") {
			t.Errorf("events %+v: want deliveries_waiting walked in order, no TEMP B-TREE FOR GROUP BY:\n%s\n%s", f, q, plan)
		}
	}
}

// TestHeldBackRace: storetest.HeldBackRace.
func TestHeldBackRace(t *testing.T) {
	t.Parallel()
	s, _ := openFile(t)
	storetest.HeldBackRace(t, s, 1000)
}
