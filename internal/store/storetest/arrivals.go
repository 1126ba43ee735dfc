package storetest

import (
	"bytes"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// runArrivals holds a backend to what it records of each request beyond
// the event itself: how it was verified, where it came from, and the
// arrivals of its duplicates, bounded per event.
func runArrivals(t *testing.T, open Open) {
	runTable(t, []named[storeTest]{
		{"VerificationRecorded", testVerificationRecorded},
		{"ArrivalsRecorded", testArrivalsRecorded},
		{"ArrivalsBounded", testArrivalsBounded},
		{"ArrivalsInOneBatch", testArrivalsInOneBatch},
		{"ConcurrentDuplicateArrivals", testConcurrentDuplicateArrivals},
		{"ArrivalHeadersCut", testArrivalHeadersCut},
		{"ArrivalBodyConflict", testArrivalBodyConflict},
	}, withStore(open))
}

func testVerificationRecorded(t *testing.T, s store.Store) {
	signed := newEvent("stripe", "evt_v1", "billing")
	signed.Event.RemoteAddr = "203.0.113.7:41234"
	signed.Event.Verification = anyhook.Verification{Method: anyhook.VerifySignature, Scheme: "stripe v1", Secret: 1}
	none := newEvent("orders", "", "billing")
	none.Event.Verification = anyhook.Verification{Method: anyhook.VerifyNone, Scheme: "unsigned (signature: none)", Secret: -1}
	old := newEvent("stripe", "evt_v0", "billing") // as recorded before verifications were
	res := ingest(t, s, signed, none, old)
	want := map[string]anyhook.Event{
		res[0].ID: {RemoteAddr: "203.0.113.7:41234", Verification: signed.Event.Verification},
		res[1].ID: {Verification: none.Event.Verification},
		res[2].ID: {Verification: anyhook.Verification{Secret: -1}},
	}
	for id, w := range want {
		ev := event(t, s, id)
		if ev.RemoteAddr != w.RemoteAddr || ev.Verification != w.Verification {
			t.Errorf("Event(%s): remote %q, verification %+v; want %q, %+v", id, ev.RemoteAddr, ev.Verification, w.RemoteAddr, w.Verification)
		}
	}
	evs, _, err := s.ListEvents(ctx(t), store.EventFilter{})
	if err != nil || len(evs) != 3 {
		t.Fatalf("ListEvents: %d, %v", len(evs), err)
	}
	for _, ev := range evs {
		if w := want[ev.ID]; ev.RemoteAddr != w.RemoteAddr || ev.Verification != w.Verification {
			t.Errorf("listed %s: remote %q, verification %+v; want %q, %+v", ev.ID, ev.RemoteAddr, ev.Verification, w.RemoteAddr, w.Verification)
		}
	}
}

// dupOf is another request carrying the event of ne (same keys), arriving
// later from another address with other headers.
func dupOf(ne store.NewEvent, n int) store.NewEvent {
	d := ne
	d.Event.ID = store.NewID()
	d.Event.ReceivedAt = ne.Event.ReceivedAt.Add(time.Duration(n) * time.Second)
	d.Event.RemoteAddr = fmt.Sprintf("198.51.100.%d:443", n)
	d.Event.Header = ne.Event.Header.Clone()
	d.Event.Header.Set("X-Retry-Count", fmt.Sprint(n))
	return d
}

func testArrivalsRecorded(t *testing.T, s store.Store) {
	orig := newEvent("shopify", "wh_1", "billing")
	orig.ContentKey = "ck_1"
	orig.Event.RemoteAddr = "198.51.100.0:443"
	id := ingest(t, s, orig)[0].ID
	byKey := dupOf(orig, 1)
	byContent := dupOf(orig, 2) // a resend under a fresh id header
	byContent.Event.DedupKey = "wh_2"
	byContent.Event.Header.Set("X-Shopify-Webhook-Id", "wh_2")
	byContent.Event.Header.Del("X-Test")
	third := dupOf(orig, 3)
	for _, d := range []store.NewEvent{byKey, byContent, third} {
		if r := ingest(t, s, d)[0]; !r.Duplicate || r.ID != id {
			t.Fatalf("ingest of a duplicate = %+v, want duplicate of %s", r, id)
		}
	}
	ev := event(t, s, id)
	if ev.Duplicates != 3 || ev.RemoteAddr != "198.51.100.0:443" {
		t.Fatalf("event: duplicates %d, remote %q", ev.Duplicates, ev.RemoteAddr)
	}
	if len(ev.Arrivals) != 3 {
		t.Fatalf("arrivals = %+v, want 3", ev.Arrivals)
	}
	for i, d := range []store.NewEvent{byKey, byContent, third} {
		a := ev.Arrivals[i]
		if a.Seq != i+1 || !a.ReceivedAt.Equal(d.Event.ReceivedAt) || a.RemoteAddr != d.Event.RemoteAddr || a.HeaderCut ||
			!equalHeader(a.Header, d.Event.Header) {
			t.Errorf("arrival %d = %+v, want seq %d at %v from %s with %v", i, a, i+1, d.Event.ReceivedAt, d.Event.RemoteAddr, d.Event.Header)
		}
	}
	diff := store.HeaderDiff(ev.Header, ev.Arrivals[1].Header, false)
	var names []string
	for _, c := range diff {
		names = append(names, c.Name)
	}
	if !slices.Equal(names, []string{"X-Retry-Count", "X-Shopify-Webhook-Id", "X-Test"}) {
		t.Errorf("diff of the content-key duplicate = %+v", diff)
	}
	// Lists do not carry arrivals.
	evs, _, err := s.ListEvents(ctx(t), store.EventFilter{})
	if err != nil || len(evs) != 1 || evs[0].Arrivals != nil {
		t.Errorf("ListEvents = %+v, %v", evs, err)
	}
}

func equalHeader(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

func testArrivalsBounded(t *testing.T, s store.Store) {
	orig := newEvent("stripe", "evt_storm", "billing")
	id := ingest(t, s, orig)[0].ID
	n := store.MaxArrivals + 5
	for i := 1; i <= n; i++ {
		ingest(t, s, dupOf(orig, i))
	}
	ev := event(t, s, id)
	if ev.Duplicates != int64(n) || len(ev.Arrivals) != store.MaxArrivals {
		t.Fatalf("duplicates %d (want %d), arrivals %d (want %d)", ev.Duplicates, n, len(ev.Arrivals), store.MaxArrivals)
	}
	for i, a := range ev.Arrivals {
		// The first ones are kept.
		if a.Seq != i+1 || a.Header.Get("X-Retry-Count") != fmt.Sprint(i+1) {
			t.Fatalf("arrival %d = seq %d, retry %s", i, a.Seq, a.Header.Get("X-Retry-Count"))
		}
	}
	if len(ev.Deliveries) != 1 {
		t.Errorf("deliveries = %d, want 1", len(ev.Deliveries))
	}
}

func testArrivalsInOneBatch(t *testing.T, s store.Store) {
	orig := newEvent("stripe", "evt_batch", "billing")
	res := ingest(t, s, orig, dupOf(orig, 1), dupOf(orig, 2))
	if res[0].Duplicate || !res[1].Duplicate || !res[2].Duplicate {
		t.Fatalf("results = %+v", res)
	}
	ev := event(t, s, res[0].ID)
	if ev.Duplicates != 2 || len(ev.Arrivals) != 2 || ev.Arrivals[0].Seq != 1 || ev.Arrivals[1].Seq != 2 {
		t.Fatalf("duplicates %d, arrivals %+v", ev.Duplicates, ev.Arrivals)
	}
	addrs := []string{ev.Arrivals[0].RemoteAddr, ev.Arrivals[1].RemoteAddr}
	slices.Sort(addrs)
	if !slices.Equal(addrs, []string{"198.51.100.1:443", "198.51.100.2:443"}) {
		t.Errorf("arrivals from %v", addrs)
	}
}

// testConcurrentDuplicateArrivals: duplicates of one event recorded at
// once (on PostgreSQL, in concurrent transactions) are each counted, and
// the first MaxArrivals are each itemised once, under distinct numbers.
func testConcurrentDuplicateArrivals(t *testing.T, s store.Store) {
	orig := newEvent("stripe", "evt_hot", "billing")
	id := ingest(t, s, orig)[0].ID
	n := store.MaxArrivals + 10
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 1; i <= n; i++ {
		wg.Go(func() {
			res, err := s.Ingest(ctx(t), []store.NewEvent{dupOf(orig, i)})
			switch {
			case err != nil:
				errs <- err
			case res[0].Err != nil:
				errs <- res[0].Err
			case !res[0].Duplicate || res[0].ID != id:
				errs <- fmt.Errorf("result %+v", res[0])
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent duplicate: %v", err)
	}
	ev := event(t, s, id)
	if ev.Duplicates != int64(n) || len(ev.Arrivals) != store.MaxArrivals {
		t.Fatalf("duplicates %d (want %d), arrivals %d (want %d)", ev.Duplicates, n, len(ev.Arrivals), store.MaxArrivals)
	}
	seen := map[string]bool{}
	for i, a := range ev.Arrivals {
		if a.Seq != i+1 || seen[a.RemoteAddr] {
			t.Fatalf("arrival %d: seq %d from %s (twice: %v)", i, a.Seq, a.RemoteAddr, seen[a.RemoteAddr])
		}
		seen[a.RemoteAddr] = true
	}
}

func testArrivalHeadersCut(t *testing.T, s store.Store) {
	orig := newEvent("stripe", "evt_big", "billing")
	orig.Event.Header.Set("X-Long", strings.Repeat("a", 1000))
	id := ingest(t, s, orig)[0].ID
	big := dupOf(orig, 1)
	for i := range 40 {
		big.Event.Header.Set(fmt.Sprintf("X-Pad-%02d", i), strings.Repeat("p", 1000))
	}
	ingest(t, s, big)
	ev := event(t, s, id)
	if len(ev.Arrivals) != 1 {
		t.Fatalf("arrivals = %d", len(ev.Arrivals))
	}
	a := ev.Arrivals[0]
	size, _ := store.EncodeHeader(a.Header)
	if !a.HeaderCut || len(size) > store.MaxArrivalHeader || a.Header.Get("X-Retry-Count") != "1" {
		t.Fatalf("cut arrival: cut %v, %d bytes, retry %q", a.HeaderCut, len(size), a.Header.Get("X-Retry-Count"))
	}
	// A cut value or a header left out is no difference; the retry
	// counter and the padding that fitted are.
	for _, c := range store.HeaderDiff(ev.Header, a.Header, a.HeaderCut) {
		if c.Name != "X-Retry-Count" && !strings.HasPrefix(c.Name, "X-Pad-") {
			t.Errorf("spurious difference %+v", c)
		}
	}
}

// testArrivalBodyConflict: a duplicate by dedup key whose body is not the
// event's is recorded with its body's hash (the payload that was dropped);
// one with the event's own body is not, alone or in one batch with the
// event.
func testArrivalBodyConflict(t *testing.T, s store.Store) {
	orig := newEvent("orders", "ord_1", "billing")
	other := dupOf(orig, 1)
	other.Event.Body = []byte(`{"id":"ord_1","total":99}`)
	same := dupOf(orig, 2)
	res := ingest(t, s, orig, other)
	ingest(t, s, same)
	ev := event(t, s, res[0].ID)
	if !res[1].Duplicate || len(ev.Arrivals) != 2 {
		t.Fatalf("results %+v, arrivals %+v", res, ev.Arrivals)
	}
	if got, want := ev.Arrivals[0].BodySHA256, store.BodySHA256(other.Event.Body); got != want {
		t.Errorf("the differing duplicate: body_sha256 %q, want %q", got, want)
	}
	if got := ev.Arrivals[1].BodySHA256; got != "" {
		t.Errorf("the same-body duplicate: body_sha256 %q, want none", got)
	}
	if !bytes.Equal(ev.Body, orig.Event.Body) {
		t.Errorf("the event's body changed: %s", ev.Body)
	}
}
