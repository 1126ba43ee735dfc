package postgres_test

import (
	"cmp"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/postgres"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
)

// TestPipelinedIngestMatchesItemByItem: the one-statement ingest
// (insertEvents) records a batch exactly as the item-by-item path does —
// every column, NULL or not, each delivery's status and claim, duplicates
// found in the batch and in the table, staleness, the version marks and
// the log's queue (filled by a statement trigger, migration 13) —
// and it takes the batch rather than leaving it to the other path, in one
// statement or, when the batch's bodies are too large for one, in one per
// event.
func TestPipelinedIngestMatchesItemByItem(t *testing.T) {
	t.Parallel()
	at := time.Now().UTC().Truncate(time.Microsecond)
	ev := func(id, key, content string) store.NewEvent {
		return store.NewEvent{
			Event: anyhook.Event{ID: id, Source: "shop", DedupKey: key, ReceivedAt: at, Method: "POST", Path: "/webhooks/shop",
				Header: http.Header{"Content-Type": {"application/json"}, "X-Id": {id}}, Body: []byte(`{"id":"` + id + `"}`)},
			ContentKey: content,
		}
	}
	dests := func(ne store.NewEvent, lease time.Duration, names ...string) store.NewEvent {
		ne.Destinations = names
		ne.Lease = make([]time.Duration, len(names))
		for i := range names {
			ne.Lease[i] = lease
		}
		return ne
	}
	object := func(ne store.NewEvent, obj, version string, skip bool) store.NewEvent {
		ne.Event.Object, ne.Event.Version, ne.StaleSkip = obj, version, skip
		return ne
	}
	base := []store.NewEvent{
		dests(ev("00000000-0000-7000-8000-000000000001", "evt_old", "c_old"), 0, "billing"),
		object(ev("00000000-0000-7000-8000-000000000002", "", ""), "obj_1", "5", false),
		object(ev("00000000-0000-7000-8000-000000000003", "", ""), "obj_3", "4", false),
	}

	full := dests(ev("00000000-0000-7000-8000-000000000010", "evt_a", "ca"), time.Minute, "billing", "audit", "paused")
	full.Lease[1] = 0 // audit is not claimed at ingest
	full.Event.Type, full.Event.RemoteAddr = "charge.succeeded", "192.0.2.7:5000"
	full.Event.Verification = anyhook.Verification{Method: anyhook.VerifySignature, Scheme: "stripe v1", Secret: 1}
	bare := ev("00000000-0000-7000-8000-000000000011", "", "")
	bare.Event.Body, bare.Event.NotRouted, bare.Event.Origin = nil, []string{"audit", "billing"}, anyhook.OriginBackfill
	bare.Event.Verification = anyhook.Verification{Method: anyhook.VerifyNone, Scheme: "unsigned (signature: none)", Secret: -1}
	batch := []store.NewEvent{
		full,
		bare,
		dests(ev("00000000-0000-7000-8000-000000000012", "evt_a", ""), time.Minute, "billing"),                          // the first's duplicate, in the batch
		dests(ev("00000000-0000-7000-8000-000000000013", "evt_new", "c_old"), time.Minute, "billing"),                   // a stored event's, by content
		dests(ev("00000000-0000-7000-8000-000000000014", "evt_old", ""), time.Minute, "billing"),                        // a stored event's, by dedup key
		dests(object(ev("00000000-0000-7000-8000-000000000015", "", ""), "obj_1", "3", true), time.Minute, "billing"),   // stale, skipped
		dests(object(ev("00000000-0000-7000-8000-000000000016", "", ""), "obj_2", "7", false), time.Minute, "billing"),  // raises a new mark
		dests(object(ev("00000000-0000-7000-8000-000000000017", "", ""), "obj_3", "2", false), -time.Second, "billing"), // stale, flagged; a lease already expired
		// One content key, two dedup keys, the later one first: the first
		// in the batch is the event on either path.
		dests(ev("00000000-0000-7000-8000-000000000018", "evt_z", "c_same"), time.Minute, "billing"),
		dests(ev("00000000-0000-7000-8000-000000000019", "evt_y", "c_same"), time.Minute, "billing"),
		// A chain: the second shares the first's content key, the third
		// the second's dedup key. The second is the first's duplicate;
		// the third is new, since the second never held its key.
		dests(ev("00000000-0000-7000-8000-00000000001a", "evt_k1", "c_k1"), time.Minute, "billing"),
		dests(ev("00000000-0000-7000-8000-00000000001b", "evt_k2", "c_k1"), time.Minute, "billing"),
		dests(ev("00000000-0000-7000-8000-00000000001c", "evt_k2", "c_k2"), time.Minute, "billing"),
	}

	// record records batch item by item, or pipelined with the batch in
	// one insert statement, or in one per event (split).
	record := func(pipelined, split bool) (results []string, stored string) {
		dsn := pgtest.DSN(t)
		tr := &statementCounter{}
		s, err := postgres.Open(t.Context(), dsn, postgres.Options{MaxConns: testConns, Tracer: tr})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if split {
			s.SetStatementBytes(1)
		}
		if _, err := s.Ingest(t.Context(), base); err != nil {
			t.Fatal(err)
		}
		if err := s.SetPaused(t.Context(), "paused", true); err != nil {
			t.Fatal(err)
		}
		var res []store.IngestResult
		before := tr.snapshot()
		if pipelined {
			var ok bool
			res, ok, err = s.IngestPipelined(t.Context(), batch)
			if !ok {
				t.Fatalf("the pipelined ingest left the batch to the item-by-item path (err %v)", err)
			}
		} else {
			res, err = s.IngestItems(t.Context(), batch)
		}
		if err != nil {
			t.Fatalf("ingest: %v", err)
		}
		if pipelined {
			inserts := 0
			for q, n := range tr.snapshot().minus(before) {
				if strings.HasPrefix(q, "WITH t AS (SELECT clock_timestamp() AS at), i AS") {
					inserts += n
				}
			}
			if want := map[bool]int{false: 1, true: len(batch)}[split]; inserts != want {
				t.Fatalf("the batch went in %d insert statements, want %d (split %v)", inserts, want, split)
			}
		}
		for i, r := range res {
			var claims []string
			for _, c := range r.Claims {
				d := c.Delivery
				claims = append(claims, fmt.Sprintf("%s %s attempt %d lease %v stale %v", d.Destination, d.Status, d.AttemptCount, d.LeaseUntil.Sub(d.NextAttemptAt), d.Stale))
			}
			results = append(results, fmt.Sprintf("%d: %s dup %v stale %v err %v claims %q", i, r.ID, r.Duplicate, r.Stale, r.Err, claims))
		}
		var b strings.Builder
		for _, ne := range append(slices.Clone(base), batch...) {
			e, err := s.Event(t.Context(), ne.Event.ID)
			if err != nil {
				fmt.Fprintf(&b, "%s: %v\n", ne.Event.ID, err)
				continue
			}
			fmt.Fprintf(&b, "%s %s key %q at %v %s %s %v body %q type %q not routed %q object %q version %q stale %v dups %d from %q %+v origin %q\n",
				e.ID, e.Source, e.DedupKey, e.ReceivedAt.UTC(), e.Method, e.Path, e.Header, e.Body, e.Type, e.NotRouted,
				e.Object, e.Version, e.Stale, e.Duplicates, e.RemoteAddr, e.Verification, e.Origin)
			ds := slices.Clone(e.Deliveries)
			slices.SortFunc(ds, func(a, b anyhook.Delivery) int { return strings.Compare(a.Destination, b.Destination) })
			for _, d := range ds {
				fmt.Fprintf(&b, "  %s %s stale %v attempt %d leased %v claimed %v\n", d.Destination, d.Status, d.Stale, d.AttemptCount,
					!d.LeaseUntil.IsZero(), !d.ClaimedAt.IsZero())
			}
		}
		b.WriteString(query[string](t, dsn, `SELECT string_agg(source || ' ' || object || ' ' || version, ', ' ORDER BY source, object) FROM versions`))
		b.WriteString("\nqueued for the log: " + query[string](t, dsn, `SELECT string_agg(event_id, ' ' ORDER BY event_id) FROM ledger_pending`))
		return results, b.String()
	}
	wantRes, want := record(false, false)
	for _, split := range []bool{false, true} {
		gotRes, got := record(true, split)
		if !slices.Equal(gotRes, wantRes) {
			t.Errorf("results differ (split %v):\npipelined:\n%s\nitem by item:\n%s", split, strings.Join(gotRes, "\n"), strings.Join(wantRes, "\n"))
		}
		if got != want {
			t.Errorf("stored differ (split %v):\npipelined:\n%s\nitem by item:\n%s", split, got, want)
		}
	}
	t.Logf("results:\n%s\nstored:\n%s", strings.Join(wantRes, "\n"), want)
}

// TestIngestLocksTakesEveryLock: the one statement that locks a batch's
// keys and marks (ingestLocks) takes a lock for each of them, held to the
// end of the transaction, in the order of its arrays (by class, then key).
func TestIngestLocksTakesEveryLock(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	openDSN(t, dsn).Close()
	evs := []store.NewEvent{newEvent("shop", "evt_1"), newEvent("shop", "evt_2"), newEvent("shop", "evt_1"), newEvent("shop", "evt_3")}
	evs[1].ContentKey = "c2"
	evs[3].Event.Object, evs[3].Event.Version = "order_1", "1"
	sql, args := postgres.IngestLocks(evs)
	if sql == "" {
		t.Fatal("no lock statement for a batch with keys")
	}
	a, b := connect(t, dsn), connect(t, dsn)
	run(t, a, `BEGIN`)
	run(t, a, sql, args...)
	type lock struct{ class, key int32 }
	var held []lock
	rows, err := a.Query(t.Context(), `SELECT classid::int4, objid::int4 FROM pg_locks
		WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND objsubid = 2 AND granted ORDER BY classid::int4, objid::int4`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var l lock
		if err := rows.Scan(&l.class, &l.key); err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	classes, keys := args[0].([]int32), args[1].([]int32)
	var want []lock
	for i := range classes {
		want = append(want, lock{classes[i], keys[i]})
	}
	order := func(x, y lock) int { return cmp.Or(cmp.Compare(x.class, y.class), cmp.Compare(x.key, y.key)) }
	// evt_1 twice is one lock: three dedup keys, a content key, a mark.
	if len(want) != 5 || !slices.IsSortedFunc(want, order) {
		t.Fatalf("locks asked for = %v, want 5 in (class, key) order", want)
	}
	slices.SortFunc(held, order)
	if !slices.Equal(held, want) {
		t.Fatalf("the transaction holds the advisory locks %v, want %v", held, want)
	}
	for _, l := range want {
		var got bool
		if err := b.QueryRow(t.Context(), `SELECT pg_try_advisory_xact_lock($1, $2)`, l.class, l.key).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got {
			t.Errorf("another session took lock %v while the ingest transaction held it", l)
		}
	}
	run(t, a, `COMMIT`)
}
