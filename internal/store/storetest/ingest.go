package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

func testIngestRecordsExactBytes(t *testing.T, s store.Store) {
	ne := newEvent("stripe", "evt_1", "billing", "audit")
	ne.Event.Body = []byte{0xff, 0x00, '{', 0xfe, '\n'} // not UTF-8, with a NUL
	ne.Event.Header = http.Header{"Stripe-Signature": {"t=1,v1=ab"}, "X-Multi": {"1", "2"}, "X-Latin1": {"caf\xe9 \x00:"}, "X-Empty": {""}}
	res := ingest(t, s, ne)
	if res[0].ID != ne.Event.ID || res[0].Duplicate {
		t.Fatalf("result = %+v, want new event %s", res[0], ne.Event.ID)
	}
	ev := event(t, s, ne.Event.ID)
	if string(ev.Body) != string(ne.Event.Body) {
		t.Errorf("body = %q, want %q", ev.Body, ne.Event.Body)
	}
	if !slices.Equal(ev.Header["X-Multi"], []string{"1", "2"}) || ev.Header.Get("Stripe-Signature") != "t=1,v1=ab" ||
		ev.Header.Get("X-Latin1") != "caf\xe9 \x00:" || len(ev.Header["X-Empty"]) != 1 || len(ev.Header) != 4 {
		t.Errorf("headers = %v", ev.Header)
	}
	if ev.Source != "stripe" || ev.DedupKey != "evt_1" || ev.Method != "POST" || ev.Path != "/webhooks/stripe" {
		t.Errorf("event = %+v", ev)
	}
	if !ev.ReceivedAt.Equal(received) {
		t.Errorf("received_at = %v, want %v", ev.ReceivedAt, received)
	}
	if len(ev.Deliveries) != 2 {
		t.Fatalf("deliveries = %d, want 2", len(ev.Deliveries))
	}
	for _, d := range ev.Deliveries {
		if d.Status != anyhook.StatusPending || d.Replay || d.AttemptCount != 0 || d.EventID != ev.ID {
			t.Errorf("delivery = %+v", d)
		}
	}
	if _, err := s.Event(ctx(t), "no-such-id"); !errors.Is(err, anyhook.ErrNotFound) {
		t.Errorf("Event(unknown) err = %v, want ErrNotFound", err)
	}
}

func testDuplicateReturnsOriginal(t *testing.T, s store.Store) {
	first := ingest(t, s, newEvent("stripe", "evt_1", "billing"))[0]
	for range 3 {
		again := ingest(t, s, newEvent("stripe", "evt_1", "billing"))[0]
		if !again.Duplicate || again.ID != first.ID {
			t.Fatalf("second ingest = %+v, want duplicate of %s", again, first.ID)
		}
	}
	ev := event(t, s, first.ID)
	if len(ev.Deliveries) != 1 {
		t.Errorf("deliveries = %d, want 1", len(ev.Deliveries))
	}
	if ev.Duplicates != 3 {
		t.Errorf("duplicates = %d, want 3", ev.Duplicates)
	}
}

func testDuplicateInOneBatch(t *testing.T, s store.Store) {
	res := ingest(t, s, newEvent("stripe", "evt_1", "billing"), newEvent("stripe", "evt_2", "billing"), newEvent("stripe", "evt_1", "billing"))
	if res[0].Duplicate || res[1].Duplicate || !res[2].Duplicate || res[2].ID != res[0].ID {
		t.Fatalf("results = %+v", res)
	}
	evs, _, err := s.ListEvents(ctx(t), store.EventFilter{})
	if err != nil || len(evs) != 2 {
		t.Fatalf("ListEvents = %d events, %v; want 2", len(evs), err)
	}
}

func testNoDedupKeyAlwaysNew(t *testing.T, s store.Store) {
	bare := newEvent("demo", "", "echo")
	bare.Event.Header, bare.Event.Body = nil, nil // nothing but the request line
	a := ingest(t, s, bare)[0]
	b := ingest(t, s, newEvent("demo", "", "echo"))[0]
	if a.Duplicate || b.Duplicate || a.ID == b.ID {
		t.Fatalf("a = %+v, b = %+v; want two new events", a, b)
	}
}

func testDedupScopedToSource(t *testing.T, s store.Store) {
	a := ingest(t, s, newEvent("one", "k", "d"))[0]
	b := ingest(t, s, newEvent("two", "k", "d"))[0]
	if a.Duplicate || b.Duplicate {
		t.Fatalf("same key in two sources deduplicated: %+v %+v", a, b)
	}
}

// withContent gives ne a content key: the hash of its signed content.
func withContent(ne store.NewEvent, key string) store.NewEvent {
	ne.ContentKey = key
	return ne
}

// A replayed request with a fresh (unsigned) id header: a new dedup key,
// the same content key. It is a duplicate of the original, answered with
// the original's id, and creates no delivery.
func testContentKeyDuplicate(t *testing.T, s store.Store) {
	first := ingest(t, s, withContent(newEvent("github", "1:delivery-a", "ci"), "c1"))[0]
	for i, key := range []string{"1:delivery-b", "2:delivery-a", ""} {
		again := ingest(t, s, withContent(newEvent("github", key, "ci"), "c1"))[0]
		if !again.Duplicate || again.ID != first.ID {
			t.Fatalf("replay %d (dedup key %q) = %+v, want a duplicate of %s", i, key, again, first.ID)
		}
	}
	ev := event(t, s, first.ID)
	if len(ev.Deliveries) != 1 || ev.Duplicates != 3 || ev.DedupKey != "1:delivery-a" {
		t.Fatalf("original: %d deliveries, %d duplicates, key %q; want 1, 3, 1:delivery-a", len(ev.Deliveries), ev.Duplicates, ev.DedupKey)
	}
	// The same content in another source is another event; so is other
	// content in this one; a content key without a dedup key works alone.
	if r := ingest(t, s, withContent(newEvent("github-2", "1:delivery-b", "ci-2"), "c1"))[0]; r.Duplicate {
		t.Fatalf("content key deduplicated across sources: %+v", r)
	}
	if r := ingest(t, s, withContent(newEvent("github", "1:delivery-c", "ci"), "c2"))[0]; r.Duplicate {
		t.Fatalf("other content = %+v, want a new event", r)
	}
	a := ingest(t, s, withContent(newEvent("twilio", "", "sms"), "c3"))[0]
	b := ingest(t, s, withContent(newEvent("twilio", "", "sms"), "c3"))[0]
	if a.Duplicate || !b.Duplicate || b.ID != a.ID {
		t.Fatalf("content key alone: %+v then %+v, want new then its duplicate", a, b)
	}
	claims := claim(t, s, "ci", 10, time.Minute)
	if len(claims) != 2 {
		t.Fatalf("%d deliveries to ci, want 2 (the original and the other content)", len(claims))
	}
}

// An event is a duplicate when either key matches: a provider retry (same
// id, its content key unchanged or not) and a replay (same content, fresh
// id). When the keys name two different events, the dedup key's wins.
func testEitherKeyDuplicate(t *testing.T, s store.Store) {
	a := ingest(t, s, withContent(newEvent("shopify", "ev-a", "app"), "ca"))[0]
	b := ingest(t, s, withContent(newEvent("shopify", "ev-b", "app"), "cb"))[0]
	for _, tc := range []struct {
		name, key, content, want string
	}{
		{"same id, other content", "ev-a", "cx", a.ID},
		{"same id, no content key", "ev-a", "", a.ID},
		{"same content, other id", "ev-y", "ca", a.ID},
		{"id of one, content of the other", "ev-b", "ca", b.ID},
	} {
		r := ingest(t, s, withContent(newEvent("shopify", tc.key, "app"), tc.content))[0]
		if !r.Duplicate || r.ID != tc.want {
			t.Errorf("%s: %+v, want a duplicate of %s", tc.name, r, tc.want)
		}
	}
	if n := len(claim(t, s, "app", 10, time.Minute)); n != 2 {
		t.Fatalf("%d deliveries, want 2", n)
	}
	// A duplicate took neither key: the stored keys are the originals'.
	if ev := event(t, s, a.ID); ev.DedupKey != "ev-a" || ev.Duplicates != 3 {
		t.Fatalf("original: key %q, %d duplicates; want ev-a, 3", ev.DedupKey, ev.Duplicates)
	}
	if evs, _, _ := s.ListEvents(ctx(t), store.EventFilter{Q: "ev-y"}); len(evs) != 0 {
		t.Fatalf("a duplicate's dedup key was recorded: %+v", evs)
	}
}

// Two items of one batch with one content key and different dedup keys
// (a request and its replay committed together) yield one event; both
// are answered its id.
func testContentKeyInOneBatch(t *testing.T, s store.Store) {
	res := ingest(t, s,
		withContent(newEvent("github", "1:d-1", "ci"), "c1"),
		withContent(newEvent("github", "1:d-2", "ci"), "c1"),
		withContent(newEvent("github", "1:d-3", "ci"), "c3"))
	if res[0].Duplicate || !res[1].Duplicate || res[1].ID != res[0].ID || res[2].Duplicate {
		t.Fatalf("results = %+v; want new, duplicate of the first, new", res)
	}
	// Whichever of two batch-mates a backend records first is the event;
	// the other is its duplicate.
	res = ingest(t, s,
		withContent(newEvent("github", "1:d-9", "ci"), "c9"),
		withContent(newEvent("github", "1:d-8", "ci"), "c9"))
	if res[0].ID != res[1].ID || res[0].Duplicate == res[1].Duplicate {
		t.Fatalf("results = %+v; want one event and its duplicate", res)
	}
	if evs, _, err := s.ListEvents(ctx(t), store.EventFilter{}); err != nil || len(evs) != 3 {
		t.Fatalf("ListEvents = %d events, %v; want 3", len(evs), err)
	}
	if n := len(claim(t, s, "ci", 10, time.Minute)); n != 3 {
		t.Fatalf("%d deliveries, want 3", n)
	}
}

// Concurrent replays of one request, each with a fresh id header: one
// event, whatever the interleaving (on PostgreSQL the content index makes
// the later inserts wait for the first transaction).
func testConcurrentContentKeyIngest(t *testing.T, s store.Store) {
	ingestOneAtOnce(t, s, 20, func(i int) store.NewEvent {
		return withContent(newEvent("github", fmt.Sprintf("1:delivery-%d", i), "ci"), "c-race")
	})
}

func testConcurrentIdenticalIngest(t *testing.T, s store.Store) {
	ingestOneAtOnce(t, s, 50, func(int) store.NewEvent { return newEvent("stripe", "evt_race", "billing") })
}

// ingestOneAtOnce ingests n events (the ith is ne(i)) from n goroutines
// at once, each in a batch of its own, and checks that they make one
// event: one is new, every answer carries its id, and it has one delivery
// and n-1 duplicates. It returns the answers, in order.
func ingestOneAtOnce(t *testing.T, s store.Store, n int, ne func(i int) store.NewEvent) []store.IngestResult {
	t.Helper()
	var wg sync.WaitGroup
	results := make([]store.IngestResult, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			res, err := s.Ingest(context.Background(), []store.NewEvent{ne(i)})
			if err == nil {
				results[i] = res[0]
				err = res[0].Err
			}
			errs[i] = err
		})
	}
	wg.Wait()
	var ids []string
	for i, r := range results {
		if errs[i] != nil {
			t.Fatalf("ingest %d: %v", i, errs[i])
		}
		if !r.Duplicate {
			ids = append(ids, r.ID)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("%d new events from %d concurrent ingests of one, want 1", len(ids), n)
	}
	for _, r := range results {
		if r.ID != ids[0] {
			t.Fatalf("an ingest answered %s, want %s", r.ID, ids[0])
		}
	}
	if ev := event(t, s, ids[0]); len(ev.Deliveries) != 1 || ev.Duplicates != int64(n-1) {
		t.Fatalf("deliveries = %d, duplicates = %d; want 1, %d", len(ev.Deliveries), ev.Duplicates, n-1)
	}
	return results
}

func testBatchItemFailureIsolated(t *testing.T, s store.Store) {
	good1 := newEvent("stripe", "evt_a", "billing")
	bad := newEvent("stripe", "evt_b", "billing")
	good2 := newEvent("stripe", "evt_c", "billing")
	bad.Event.ID = good1.Event.ID // primary key clash: this item alone must fail
	res, err := s.Ingest(ctx(t), []store.NewEvent{good1, bad, good2})
	if err != nil {
		t.Fatalf("Ingest: %v", err)
	}
	if res[0].Err != nil || res[2].Err != nil {
		t.Fatalf("good items failed: %+v", res)
	}
	if res[1].Err == nil {
		t.Fatalf("clashing item succeeded: %+v", res[1])
	}
	event(t, s, good2.Event.ID)
	if evs, _, _ := s.ListEvents(ctx(t), store.EventFilter{Q: "evt_b"}); len(evs) != 0 {
		t.Fatalf("failed item left an event behind: %+v", evs)
	}
}

func versioned(key, object, version string, skip bool) store.NewEvent {
	ne := newEvent("shop", key, "d")
	ne.Event.Object, ne.Event.Version, ne.StaleSkip = object, version, skip
	return ne
}

func testStaleness(t *testing.T, s store.Store) {
	r2 := ingest(t, s, versioned("e2", "order-1", "2", true))[0]
	r1 := ingest(t, s, versioned("e1", "order-1", "1", true))[0]
	r2b := ingest(t, s, versioned("e2b", "order-1", "2", true))[0]
	r10 := ingest(t, s, versioned("e10", "order-1", "10", true))[0] // numeric, not lexical
	other := ingest(t, s, versioned("o1", "order-2", "1", true))[0]
	if r2.Stale || !r1.Stale || r2b.Stale || r10.Stale || other.Stale {
		t.Fatalf("stale flags: v2=%v v1=%v v2again=%v v10=%v other=%v", r2.Stale, r1.Stale, r2b.Stale, r10.Stale, other.Stale)
	}
	if d := event(t, s, r1.ID).Deliveries[0]; d.Status != anyhook.StatusSkipped {
		t.Fatalf("stale delivery = %s, want skipped", d.Status)
	}
	if ev := event(t, s, r1.ID); !ev.Stale || ev.Object != "order-1" || ev.Version != "1" {
		t.Fatalf("stale event = %+v", ev)
	}
	if d := event(t, s, r2b.ID).Deliveries[0]; d.Status != anyhook.StatusPending {
		t.Fatalf("equal version delivery = %s, want pending", d.Status)
	}
	t1 := ingest(t, s, versioned("t1", "cust", "2026-01-02T00:00:00Z", true))[0]
	t0 := ingest(t, s, versioned("t0", "cust", "2026-01-01T23:00:00-02:00", true))[0] // later instant
	if t1.Stale || t0.Stale {
		t.Fatalf("RFC 3339 compared as text: %v %v", t1.Stale, t0.Stale)
	}
}

func testStaleDeliver(t *testing.T, s store.Store) {
	ingest(t, s, versioned("e2", "order-1", "2", false))
	r1 := ingest(t, s, versioned("e1", "order-1", "1", false))[0]
	d := event(t, s, r1.ID).Deliveries[0]
	if !r1.Stale || d.Status != anyhook.StatusPending || !d.Stale {
		t.Fatalf("stale: deliver: result %+v, delivery %+v", r1, d)
	}
}

func testConcurrentVersionsKeepMax(t *testing.T, s store.Store) {
	const n = 50
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			v := strconv.Itoa(i + 1)
			if _, err := s.Ingest(context.Background(), []store.NewEvent{versioned("v"+v, "obj", v, true)}); err != nil {
				t.Errorf("Ingest: %v", err)
			}
		})
	}
	wg.Wait()
	if r := ingest(t, s, versioned("probe-max", "obj", strconv.Itoa(n), true))[0]; r.Stale {
		t.Fatalf("version %d is stale after the concurrent run", n)
	}
	if r := ingest(t, s, versioned("probe-below", "obj", strconv.Itoa(n-1), true))[0]; !r.Stale {
		t.Fatalf("version %d not stale: the mark is below the max %d", n-1, n)
	}
}

// testConcurrentOneObjectNoDeadlock runs concurrent batches that share one
// object and overlap in their keys (each batch repeats keys of others and
// of itself), as identical and retried requests do on several connections
// or processes: every item succeeds (a deadlock fails one with
// ErrUnavailable) and each key makes one event.
func testConcurrentOneObjectNoDeadlock(t *testing.T, s store.Store) {
	const writers, rounds = 8, 6
	var mu sync.Mutex
	ids := map[string]string{}
	for r := range rounds {
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				var batch []store.NewEvent
				for k := range 4 {
					n := r*2 + (w+k)%5
					batch = append(batch, versioned(fmt.Sprintf("evt_%d", n), "hot", strconv.Itoa(n), false))
				}
				batch = append(batch, batch[0]) // a copy within the batch too
				res, err := s.Ingest(context.WithoutCancel(ctx(t)), batch)
				if err != nil {
					t.Errorf("round %d writer %d: Ingest: %v", r, w, err)
					return
				}
				mu.Lock()
				defer mu.Unlock()
				for i, x := range res {
					key := batch[i].Event.DedupKey
					if x.Err != nil {
						t.Errorf("round %d writer %d: %s: %v", r, w, key, x.Err)
						continue
					}
					if prev, ok := ids[key]; ok && prev != x.ID {
						t.Errorf("%s recorded twice: %s and %s", key, prev, x.ID)
					}
					ids[key] = x.ID
				}
			})
		}
		wg.Wait()
	}
	evs, _, err := s.ListEvents(ctx(t), store.EventFilter{Source: "shop", Limit: 500})
	if err != nil || len(evs) != len(ids) {
		t.Fatalf("ListEvents = %d events, %v; want %d", len(evs), err, len(ids))
	}
}

// testConcurrentContentKeysNoDeadlock: events that reach a source under
// two dedup keys with one content key (one GitHub event through a
// repository hook and an organization hook, a GitLab project and group
// hook), in concurrent batches that pair them crosswise — one batch holds
// hook a's copy of event i and hook b's of event j, another hook a's of j
// and hook b's of i — as several processes receive them; every third round
// the events also carry ordering marks. Every item succeeds (on PostgreSQL
// the crosswise keys deadlocked, failing one with ErrUnavailable after the
// deadlock detector's wait) and each key makes one event.
func testConcurrentContentKeysNoDeadlock(t *testing.T, s store.Store) {
	const pairs, rounds = 2, 30
	var mu sync.Mutex
	ids := map[string]string{} // key (content key, else dedup key) → event id
	for r := range rounds {
		var wg sync.WaitGroup
		start := make(chan struct{})
		for p := range pairs {
			for _, x := range [2][2]int{{0, 1}, {1, 0}} {
				i, j := 2*p+x[0], 2*p+x[1]
				item := func(hook string, n int) store.NewEvent {
					ne := withContent(newEvent("github", fmt.Sprintf("%s:r%d-e%d", hook, r, n), "ci"), fmt.Sprintf("c-r%d-e%d", r, n))
					if r%3 == 0 {
						ne.Event.Object, ne.Event.Version = fmt.Sprintf("obj-%d", n), strconv.Itoa(r)
					}
					return ne
				}
				// Unrelated events in between (their keys sort between
				// the hooks'), so that each transaction holds its first
				// content key a few round trips before it asks for the
				// second.
				batch := []store.NewEvent{item("a", i), item("b", j)}
				for f := range 3 {
					batch = append(batch, newEvent("github", fmt.Sprintf("ab:r%d-e%d-e%d-%d", r, i, j, f), "ci"))
				}
				wg.Go(func() {
					<-start
					res, err := s.Ingest(context.WithoutCancel(ctx(t)), batch)
					if err != nil {
						t.Errorf("round %d: Ingest: %v", r, err)
						return
					}
					mu.Lock()
					defer mu.Unlock()
					for k, x := range res {
						key := cmp.Or(batch[k].ContentKey, batch[k].Event.DedupKey)
						if x.Err != nil {
							t.Errorf("round %d: %s: %v", r, batch[k].Event.DedupKey, x.Err)
							continue
						}
						if prev, ok := ids[key]; ok && prev != x.ID {
							t.Errorf("%s recorded twice: %s and %s", key, prev, x.ID)
						}
						ids[key] = x.ID
					}
				})
			}
		}
		close(start)
		wg.Wait()
	}
	distinct := map[string]bool{}
	for _, id := range ids {
		distinct[id] = true
	}
	if want := rounds * pairs * 2 * 4; len(distinct) != want || len(ids) != want {
		t.Errorf("%d events for %d keys; want %d", len(distinct), len(ids), want)
	}
}

// testStalenessInBatches: the version guard holds for events recorded in
// one batch — of distinct objects (PostgreSQL reads their marks at once)
// and of one object twice (recorded item by item) — and a duplicate in a
// batch never moves a mark.
func testStalenessInBatches(t *testing.T, s store.Store) {
	ingest(t, s, versioned("a5", "order-a", "5", false), versioned("b5", "order-b", "5", false))
	res := ingest(t, s,
		versioned("a4", "order-a", "4", false), // stale
		versioned("b6", "order-b", "6", false), // raises b
		versioned("c1", "order-c", "1", false), // new object
		versioned("a5", "order-a", "9", false), // a duplicate of a5: must not raise a to 9
	)
	if !res[0].Stale || res[1].Stale || res[2].Stale || !res[3].Duplicate {
		t.Fatalf("results = %+v; want a4 stale, b6 and c1 fresh, a5 a duplicate", res)
	}
	res = ingest(t, s,
		versioned("a6", "order-a", "6", false),  // fresh: a is still 5
		versioned("b5b", "order-b", "5", false), // stale: b is 6
		versioned("c0", "order-c", "0", false),  // stale: c is 1
	)
	if res[0].Stale || !res[1].Stale || !res[2].Stale {
		t.Fatalf("results = %+v; want a6 fresh, b5b and c0 stale", res)
	}
	// One object twice in a batch (PostgreSQL records such a batch item by
	// item, in key order, so which of the two came first is the store's
	// choice): the mark ends at the higher version.
	res = ingest(t, s, versioned("a8", "order-a", "8", false), versioned("a7", "order-a", "7", false), versioned("a8", "order-a", "8", false))
	if res[0].Stale || !res[2].Duplicate {
		t.Fatalf("results = %+v; want a8 fresh, then a duplicate", res)
	}
	if r := ingest(t, s, versioned("a7b", "order-a", "7", false))[0]; !r.Stale {
		t.Fatalf("a7b = %+v; want stale behind 8", r)
	}
}

// testDuplicateInBatchKeepsMark: a duplicate of an object's event with a
// higher version, batched with events of other objects (PostgreSQL records
// such a batch pipelined, its marks read before the inserts), neither
// raises the mark nor is reported stale, and concurrent batches of one
// object leave the mark at the highest version recorded.
func testDuplicateInBatchKeepsMark(t *testing.T, s store.Store) {
	ingest(t, s, versioned("a5", "order-a", "5", false))
	res := ingest(t, s, versioned("a5", "order-a", "9", false), versioned("b1", "order-b", "1", false))
	if !res[0].Duplicate || res[0].Stale || res[1].Stale || res[1].Duplicate {
		t.Fatalf("results = %+v; want a duplicate of a5, then b1 fresh", res)
	}
	if r := ingest(t, s, versioned("a7", "order-a", "7", false), versioned("b0", "order-b", "0", false)); r[0].Stale || !r[1].Stale {
		t.Fatalf("results = %+v; want a7 fresh (the duplicate did not raise a to 9), b0 stale", r)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Go(func() {
			v := strconv.Itoa(10 + i)
			_, err := s.Ingest(ctx(t), []store.NewEvent{versioned("c"+v, "order-c", v, false), versioned("d"+v, "order-d"+v, "1", false)})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if r := ingest(t, s, versioned("c49b", "order-c", "49", false), versioned("c48b", "order-c", "48", false))[0]; r.Stale {
		t.Fatalf("c49b = %+v; want fresh at the highest version, 49", r)
	}
	if r := ingest(t, s, versioned("c48c", "order-c", "48", false))[0]; !r.Stale {
		t.Fatalf("c48c = %+v; want stale behind 49", r)
	}
}
