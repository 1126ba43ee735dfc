package postgres_test

import (
	"context"
	"crypto/rand"
	"errors"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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

// Small pools: the tests run in parallel against one server, and other
// packages' tests share it.
const testConns = 4

func openDSN(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(t.Context(), dsn, postgres.Options{MaxConns: testConns})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func open(t *testing.T) store.Store { return openDSN(t, pgtest.DSN(t)) }

func TestConformance(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, open)
}

func newEvent(source, key string, dests ...string) store.NewEvent {
	return store.NewEvent{
		Event: anyhook.Event{
			ID: store.NewID(), Source: source, DedupKey: key, ReceivedAt: time.Now(),
			Method: "POST", Path: "/webhooks/" + source,
			Header: http.Header{"Content-Type": {"application/json"}},
			Body:   []byte(`{"id":"` + key + `"}`),
		},
		Destinations: dests,
	}
}

func query[T any](t *testing.T, dsn, sql string) T {
	t.Helper()
	c, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var v T
	if err := c.QueryRow(t.Context(), sql).Scan(&v); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return v
}

func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	const n = 8
	stores := make([]*postgres.Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = postgres.Open(t.Context(), dsn, postgres.Options{MaxConns: 2}) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Open %d: %v", i, err)
			continue
		}
		stores[i].Close()
	}
	files, err := filepath.Glob("migrations/*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations: %v, %v", files, err)
	}
	if got := query[int64](t, dsn, `SELECT count(*) FROM schema_migrations`); got != int64(len(files)) {
		t.Fatalf("schema_migrations has %d rows, want %d (each migration applied once)", got, len(files))
	}
	if got := query[int64](t, dsn, `SELECT count(*) FROM pg_tables WHERE tablename = 'events'`); got != 1 {
		t.Fatalf("%d events tables", got)
	}
}

func TestSchemaNewerThanBinary(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	openDSN(t, dsn).Close()
	query[int](t, dsn, `INSERT INTO schema_migrations (version, name) VALUES (999, '0999_future.sql') RETURNING version`)
	_, err := postgres.Open(t.Context(), dsn, postgres.Options{MaxConns: 1})
	if err == nil || !strings.Contains(err.Error(), "newer than this binary") {
		t.Fatalf("Open on a newer schema: err = %v, want one saying the schema is newer", err)
	}
	if errors.Is(err, anyhook.ErrUnavailable) {
		t.Fatalf("a newer schema is not unavailability: %v", err)
	}
}

// A command that only reads opens the store with NoUpgrade: an empty
// database is refused, and so is a schema a migration behind, naming it;
// both are left as they were.
func TestSchemaOlderRefusedWithoutUpgrade(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	// A database without a store is not given one.
	if _, err := postgres.Open(t.Context(), dsn, postgres.Options{MaxConns: 1, NoUpgrade: true}); !errors.Is(err, sqlstore.ErrNoStore) {
		t.Fatalf("Open with NoUpgrade on an empty database: err = %v, want ErrNoStore", err)
	}
	if got := query[int64](t, dsn, `SELECT count(*) FROM pg_tables WHERE tablename = 'schema_migrations'`); got != 0 {
		t.Fatalf("a refused Open left %d schema_migrations tables", got)
	}
	openDSN(t, dsn).Close()
	name := query[string](t, dsn, `DELETE FROM schema_migrations WHERE version = (SELECT max(version) FROM schema_migrations) RETURNING name`)
	_, err := postgres.Open(t.Context(), dsn, postgres.Options{MaxConns: 1, NoUpgrade: true})
	if !errors.Is(err, sqlstore.ErrUpgradeRefused) || !strings.Contains(err.Error(), name) {
		t.Fatalf("Open with NoUpgrade on a schema without %s: err = %v, want ErrUpgradeRefused naming it", name, err)
	}
	if got := query[int64](t, dsn, `SELECT count(*) FROM schema_migrations WHERE name = '`+name+`'`); got != 0 {
		t.Errorf("%s recorded %d times after a refused Open, want 0", name, got)
	}
}

func TestOpenUnreachable(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now
	_, err = postgres.Open(t.Context(), "postgres://postgres@"+addr+"/anyhook?sslmode=disable&connect_timeout=10", postgres.Options{})
	if !errors.Is(err, anyhook.ErrUnavailable) {
		t.Fatalf("Open(unreachable) err = %v, want ErrUnavailable", err)
	}
	if msg := err.Error(); !strings.Contains(msg, addr) || strings.Contains(msg, "\n") {
		t.Fatalf("error %q should be one line naming %s", msg, addr)
	}
	if _, err := postgres.Open(t.Context(), "postgres://%zz", postgres.Options{}); !errors.Is(err, anyhook.ErrInvalid) {
		t.Fatalf("Open(bad url) err = %v, want ErrInvalid", err)
	}
}

func TestConnectionLoss(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgtest.DSN(t))
	if err != nil {
		t.Fatal(err)
	}
	server := u.Host
	p := pgtest.Proxy(t, server)
	u.Host = p.Addr()
	s, err := postgres.Open(t.Context(), u.String(), postgres.Options{MaxConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := t.Context()
	if _, err := s.Ingest(ctx, []store.NewEvent{newEvent("stripe", "before", "billing")}); err != nil {
		t.Fatalf("Ingest before the outage: %v", err)
	}

	p.Cut()
	if _, err := s.Ingest(ctx, []store.NewEvent{newEvent("stripe", "during", "billing")}); !errors.Is(err, anyhook.ErrUnavailable) {
		t.Fatalf("Ingest during the outage: err = %v, want ErrUnavailable", err)
	}
	if _, err := s.Claim(ctx, "billing", 10, time.Minute); !errors.Is(err, anyhook.ErrUnavailable) {
		t.Fatalf("Claim during the outage: err = %v, want ErrUnavailable", err)
	}
	if err := s.Ping(ctx); !errors.Is(err, anyhook.ErrUnavailable) {
		t.Fatalf("Ping during the outage: err = %v, want ErrUnavailable", err)
	}

	// Back up: the pool drops its dead connections as it meets them (at
	// most one per failed call) and the store resumes by itself.
	p.Restore()
	var res []store.IngestResult
	for try := 0; ; try++ {
		res, err = s.Ingest(ctx, []store.NewEvent{newEvent("stripe", "after", "billing")})
		if err == nil {
			break
		}
		if !errors.Is(err, anyhook.ErrUnavailable) || try > testConns {
			t.Fatalf("Ingest after the outage (try %d): %v", try, err)
		}
	}
	if res[0].Err != nil || res[0].Duplicate {
		t.Fatalf("after the outage: %+v", res[0])
	}
	if evs, _, err := s.ListEvents(ctx, store.EventFilter{Q: "during"}); err != nil || len(evs) != 0 {
		t.Fatalf("a failed ingest left %d events (%v)", len(evs), err)
	}

	s.Close()
	if _, err := s.Ingest(ctx, []store.NewEvent{newEvent("stripe", "closed", "billing")}); !errors.Is(err, anyhook.ErrUnavailable) {
		t.Fatalf("Ingest on a closed store: err = %v, want ErrUnavailable", err)
	}
}

// Two stores on one database behave like two gateway processes.
func TestTwoProcesses(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	a, b := openDSN(t, dsn), openDSN(t, dsn)
	procs := []store.Store{a, b}

	const n = 40
	results := make([]store.IngestResult, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var res []store.IngestResult
			res, errs[i] = procs[i%2].Ingest(context.Background(), []store.NewEvent{newEvent("stripe", "evt_same", "billing")})
			if errs[i] == nil {
				results[i] = res[0]
			}
		})
	}
	wg.Wait()
	newOnes := 0
	for i, r := range results {
		if errs[i] != nil || r.Err != nil {
			t.Fatalf("ingest %d: %v %v", i, errs[i], r.Err)
		}
		if !r.Duplicate {
			newOnes++
		}
	}
	if newOnes != 1 {
		t.Fatalf("%d new events from %d identical ingests in two processes", newOnes, n)
	}

	var batch []store.NewEvent
	for i := range 50 {
		batch = append(batch, newEvent("stripe", "evt_"+strconv.Itoa(i), "billing"))
	}
	if _, err := a.Ingest(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	storetest.ClaimEachOnce(t, procs, "billing", 6, 5, 51)
}

// TestTwoProcessesInOrder: claimers of two stores on one database race
// for the deliveries of a destination with order: per_object; no object
// ever has two deliveries claimed at once, and each object's go in
// version order, though they were recorded newest first.
func TestTwoProcessesInOrder(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	a, b := openDSN(t, dsn), openDSN(t, dsn)
	const objects, versions = 6, 8
	var batch []store.NewEvent
	for o := range objects {
		for v := versions; v >= 1; v-- {
			obj, ver := "in_"+strconv.Itoa(o), strconv.Itoa(v)
			ne := newEvent("stripe", obj+"_"+ver, "billing")
			ne.Event.Object, ne.Event.Version = obj, ver
			batch = append(batch, ne)
		}
	}
	if _, err := a.Ingest(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	storetest.ClaimInOrderRace(t, []store.Store{a, b}, "billing", 8, objects, versions)
}

// TestRescuersDuringConfigChange: two processes rescue at once during a
// rolling config change; b (the old config) does not know charges, a (the
// new one) holds its claims. While b's rescue is in progress, holding the
// claims it handles, a must still rescue charges: b leaves charges' claims
// alone and must not lock them either. (It locked every expired claim, so
// a's FOR UPDATE SKIP LOCKED skipped charges' and nobody rescued it that
// round; found by the model test's two racing rescuers.)
func TestRescuersDuringConfigChange(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	a := openDSN(t, dsn)
	inside, release := make(chan struct{}), make(chan struct{})
	hook := &pgtest.OnCommit{Fn: func() { close(inside); <-release }}
	b, err := postgres.Open(t.Context(), dsn, postgres.Options{MaxConns: testConns, Tracer: hook})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })

	if _, err := a.Ingest(t.Context(), []store.NewEvent{newEvent("stripe", "evt_1", "charges"), newEvent("stripe", "evt_2", "billing")}); err != nil {
		t.Fatal(err)
	}
	claims := map[string]string{}
	for _, dest := range []string{"charges", "billing"} {
		cs, err := a.Claim(t.Context(), dest, 1, -time.Hour) // expired at once
		if err != nil || len(cs) != 1 {
			t.Fatalf("Claim(%s) = %d, %v", dest, len(cs), err)
		}
		claims[dest] = cs[0].Delivery.ID
	}

	var bds []anyhook.Delivery
	var berr error
	done := make(chan struct{})
	hook.Armed.Store(true)
	go func() {
		defer close(done)
		bds, berr = b.Rescue(context.Background(), func(dest string) (store.StaleRule, bool) {
			return store.StaleRule{Policy: anyhook.Reclaim}, dest == "billing"
		})
	}()
	<-inside // b has done its rescue and is about to commit
	ads, aerr := a.Rescue(t.Context(), func(dest string) (store.StaleRule, bool) {
		return store.StaleRule{Policy: anyhook.Hold}, dest == "charges"
	})
	close(release)
	<-done
	if berr != nil || len(bds) != 1 || bds[0].ID != claims["billing"] || bds[0].Status != anyhook.StatusPending {
		t.Fatalf("b rescued %+v, %v; want billing's claim reclaimed", bds, berr)
	}
	if aerr != nil || len(ads) != 1 || ads[0].ID != claims["charges"] || ads[0].Status != anyhook.StatusHeld {
		t.Fatalf("a rescued %+v, %v while b was rescuing; want charges' claim held", ads, aerr)
	}
}

// A value PostgreSQL refuses — a NUL byte in a text column, an index row
// over the btree's maximum — fails its own item only, as invalid, not the
// batch and not as unavailability. The fields a request controls never get
// here (store.CheckEvent refuses them first); the source name, from the
// configuration, does, so it stands in for whatever else might.
func TestUnstorableItemIsolated(t *testing.T) {
	t.Parallel()
	s := open(t)
	nul := newEvent("stripe\x00", "evt_nul", "billing")
	nul.Event.Path = "/webhooks/stripe"
	var long strings.Builder
	for i := 0; long.Len() < 3000; i++ {
		long.WriteString(rand.Text()) // random: no compression brings it under the limit
	}
	wide := newEvent(long.String(), "evt_wide", "billing")
	res, err := s.Ingest(t.Context(), []store.NewEvent{newEvent("stripe", "ok1", "billing"), nul, wide, newEvent("stripe", "ok2", "billing")})
	if err != nil {
		t.Fatalf("Ingest: %v", err)
	}
	if res[0].Err != nil || res[3].Err != nil {
		t.Fatalf("good items failed: %+v", res)
	}
	if !errors.Is(res[1].Err, anyhook.ErrInvalid) || !strings.Contains(res[1].Err.Error(), "22021") {
		t.Fatalf("NUL item err = %v, want ErrInvalid (22021)", res[1].Err)
	}
	if !errors.Is(res[2].Err, anyhook.ErrInvalid) || !strings.Contains(res[2].Err.Error(), "54000") {
		t.Fatalf("index row too large: err = %v, want ErrInvalid (54000)", res[2].Err)
	}
	if _, err := s.Finish(t.Context(), []store.Outcome{{DeliveryID: "x", Attempt: 1, Status: anyhook.StatusHeld}}); !errors.Is(err, anyhook.ErrInvalid) {
		t.Fatalf("Finish with status held: err = %v, want ErrInvalid", err)
	}
}

// TestSessionDefaults: the store's connections run without JIT
// compilation and without parallel workers, both of which cost the lists
// more than their queries at ten million events, unless the DSN asks.
func TestSessionDefaults(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	sep := "?"
	if strings.Contains(dsn, "?") {
		sep = "&"
	}
	for _, c := range []struct{ name, def, asked string }{
		{"jit", "off", "on"},
		{"max_parallel_workers_per_gather", "0", "2"},
	} {
		for want, dsn := range map[string]string{c.def: dsn, c.asked: dsn + sep + c.name + "=" + c.asked} {
			got, err := openDSN(t, dsn).Setting(t.Context(), c.name)
			if err != nil || got != want {
				t.Errorf("%s: %s = %q, %v; want %q", dsn, c.name, got, err, want)
			}
		}
	}
}

// TestCancelledQueryStops: a query whose context ends stops in the server
// too, as when a dashboard's client gives up on a slow list: a
// connection merely closed would leave the server running it to its end.
// (pgx sends a cancel request before it closes the connection; this
// keeps that so.)
func TestCancelledQueryStops(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s := openDSN(t, dsn)
	running := `SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'SELECT pg_sleep%' AND state = 'active'`
	ctx, cancel := context.WithCancel(t.Context())
	slept := make(chan error, 1)
	go func() { slept <- s.Sleep(ctx, time.Minute) }()
	for i := 0; query[int64](t, dsn, running) != 1; i++ { // the test sees it run
		if i == 100 {
			t.Fatal("the sleep never showed in pg_stat_activity")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	if err := <-slept; err == nil {
		t.Fatal("a minute's sleep ended without error when its context did")
	}
	// Uncancelled, the sleep would run its whole minute. Polled, not
	// timed.
	for i := 0; query[int64](t, dsn, running) != 0; i++ {
		if i == 100 {
			t.Fatal("the cancelled query still runs in the server 20 s later")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// The store's connections still work.
	if err := s.Sleep(t.Context(), 0); err != nil {
		t.Fatal(err)
	}
}

// TestMigrateLastDelivered: 0062 fills each destination's last success
// from its delivered deliveries, on a store that kept none.
func TestMigrateLastDelivered(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s := openDSN(t, dsn)
	ne := store.NewEvent{Event: anyhook.Event{ID: store.NewID(), Source: "s", DedupKey: "k", ReceivedAt: time.Now(),
		Method: "POST", Path: "/webhooks/s", Body: []byte(`{}`)}, Destinations: []string{"d"}}
	if res, err := s.Ingest(t.Context(), []store.NewEvent{ne}); err != nil || res[0].Err != nil {
		t.Fatal(err, res)
	}
	cs, err := s.Claim(t.Context(), "d", 1, time.Hour)
	if err != nil || len(cs) != 1 {
		t.Fatalf("claimed %d: %v", len(cs), err)
	}
	out := store.Outcome{DeliveryID: cs[0].Delivery.ID, Attempt: cs[0].Delivery.AttemptCount, Status: anyhook.StatusDelivered,
		Result: anyhook.Attempt{Number: cs[0].Delivery.AttemptCount, StartedAt: time.Now(), StatusCode: 200}}
	if _, err := s.Finish(t.Context(), []store.Outcome{out}); err != nil {
		t.Fatal(err)
	}
	want := query[time.Time](t, dsn, `SELECT next_attempt_at FROM deliveries WHERE status = 'delivered'`)
	s.Close()
	// The store before 0062: no last_at.
	c, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Exec(t.Context(), `ALTER TABLE delivery_counts DROP COLUMN last_at; DELETE FROM schema_migrations WHERE version = 62`)
	c.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	qs, err := openDSN(t, dsn).QueueStats(t.Context(), []string{"d"})
	if err != nil {
		t.Fatal(err)
	}
	if got := qs.LastDelivered["d"]; !got.Equal(want) {
		t.Errorf("after 0062, last delivered %v, want %v", got, want)
	}
	// A process of an older build folds the counters without last_at:
	// the newest delivered delivery's stands in.
	query[int](t, dsn, `WITH u AS (UPDATE delivery_counts SET last_at = NULL RETURNING 1) SELECT count(*)::int FROM u`)
	if qs, err = openDSN(t, dsn).QueueStats(t.Context(), []string{"d"}); err != nil {
		t.Fatal(err)
	}
	if got := qs.LastDelivered["d"]; !got.Equal(want) {
		t.Errorf("counters without last_at: last delivered %v, want %v", got, want)
	}
}
