package storetest

import (
	"bytes"
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// countingStore counts what a search inside the bodies read of s.
type countingStore struct {
	store.Store
	mu        sync.Mutex
	lists     int   // ListEvents calls: bodies read outside the budget
	sizePage  int   // largest page of sizes
	bodyBytes int64 // bytes of body and headers EventBodies returned
	bodies    int   // events EventBodies returned
}

func (c *countingStore) ListEvents(ctx context.Context, f store.EventFilter) ([]anyhook.Event, string, error) {
	c.mu.Lock()
	c.lists++
	c.mu.Unlock()
	return c.Store.ListEvents(ctx, f)
}

func (c *countingStore) ListEventSizes(ctx context.Context, f store.EventFilter) ([]store.EventSize, string, error) {
	es, next, err := c.Store.ListEventSizes(ctx, f)
	c.mu.Lock()
	c.sizePage = max(c.sizePage, len(es))
	c.mu.Unlock()
	return es, next, err
}

func (c *countingStore) EventBodies(ctx context.Context, ids []string) ([]anyhook.Event, error) {
	evs, err := c.Store.EventBodies(ctx, ids)
	c.mu.Lock()
	c.bodies += len(evs)
	for _, ev := range evs {
		c.bodyBytes += int64(len(ev.Body))
		for k, vs := range ev.Header {
			for _, v := range vs {
				c.bodyBytes += int64(len(k) + len(v))
			}
		}
	}
	c.mu.Unlock()
	return evs, err
}

// testSearchBodiesBounded: a search inside large bodies reads no more of
// them than its byte budget (one event larger than the whole budget
// alone), a page of sizes at most besides; continued from back_to, the
// searches find every match once.
func testSearchBodiesBounded(t *testing.T, s store.Store) {
	const mib = 1 << 20
	at := func(i int) time.Time { return received.Add(time.Duration(i) * time.Minute) }
	// Newest first: minutes 11 and 10, three events in minute 9 (a
	// search stops in the middle of them), 8 to 5, one event of 5 MiB in
	// minute 4 (larger than the budget), then 3 to 0.
	minutes := []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 9, 9, 10, 11}
	want := map[string]bool{}
	var biggest int64
	for i, min := range minutes {
		e := newEvent("stripe", "big"+strconv.Itoa(i), "billing")
		e.Event.ReceivedAt = at(min)
		size := mib
		if min == 4 {
			size = 5 * mib
		}
		marker := `"m":"miss"`
		hit := i%2 == 0 || min == 9 // the first search looks at one of minute 9, and gives it up
		if hit {
			marker = `"m":"hit` + strconv.Itoa(i) + `"`
		}
		e.Event.Body = append([]byte(`{`+marker+`,"pad":"`), bytes.Repeat([]byte("x"), size)...)
		e.Event.Body = append(e.Event.Body, `"}`...)
		biggest = max(biggest, int64(len(e.Event.Body))+1024)
		id := ingest(t, s, e)[0].ID
		if hit {
			want[id] = true
		}
	}
	hit := func(ev *anyhook.Event) (bool, uint64) { return bytes.Contains(ev.Body[:20], []byte(`"hit`)), 0 }
	b := store.BodyBudget{Rows: 1000, Bytes: 3*mib + mib/2}
	now := at(12)
	got := map[string]bool{}
	until := time.Time{}
	for n := 0; ; n++ {
		if n == len(minutes)+2 {
			t.Fatalf("%d searches did not reach the first event; found %d of %d", n, len(got), len(want))
		}
		c := &countingStore{Store: s}
		evs, sr, err := store.SearchBodies(ctx(t), c, store.EventFilter{Limit: 100, Until: until}, hit, now, b)
		if err != nil {
			t.Fatal(err)
		}
		if c.lists != 0 || c.sizePage > 500 {
			t.Errorf("search %d: %d ListEvents calls, a page of %d sizes; want none and at most 500", n, c.lists, c.sizePage)
		}
		// Only an event larger than the budget is read beyond it, alone.
		if c.bodyBytes > b.Bytes && (c.bodies != 1 || c.bodyBytes > biggest) {
			t.Errorf("search %d read %d bytes of %d bodies; budget %d", n, c.bodyBytes, c.bodies, b.Bytes)
		}
		for _, ev := range evs {
			if got[ev.ID] {
				t.Errorf("search %d found %s again", n, ev.ID)
			}
			if !until.IsZero() && !ev.ReceivedAt.Before(until) {
				t.Errorf("search %d found %s at %v, not before %v", n, ev.ID, ev.ReceivedAt, until)
			}
			got[ev.ID] = true
		}
		if sr.Complete || sr.BackTo.Before(at(0)) || sr.BackTo.Equal(at(0)) {
			break
		}
		if !until.IsZero() && !sr.BackTo.Before(until) {
			t.Fatalf("search %d did not move on: back to %v from %v", n, sr.BackTo, until)
		}
		until = sr.BackTo
	}
	if !maps.Equal(got, want) {
		t.Errorf("found %d events, want the %d matches: missing %v", len(got), len(want), missing(want, got))
	}
}

func missing(want, got map[string]bool) []string {
	var out []string
	for id := range want {
		if !got[id] {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// testSearchBodiesCost: the filter's total cost ends a search as its
// other bounds do, between receive times and saying where to continue.
func testSearchBodiesCost(t *testing.T, s store.Store) {
	at := func(i int) time.Time { return received.Add(time.Duration(i) * time.Minute) }
	var ids []string
	for i := range 6 {
		e := newEvent("stripe", "c"+strconv.Itoa(i), "billing")
		e.Event.ReceivedAt = at(i)
		ids = append(ids, ingest(t, s, e)[0].ID)
	}
	evals := 0
	all := func(*anyhook.Event) (bool, uint64) { evals++; return true, 40 }
	b := store.BodyBudget{Rows: 1000, Bytes: 1 << 20, Cost: 100}
	evs, sr, err := store.SearchBodies(ctx(t), s, store.EventFilter{}, all, at(10), b)
	if err != nil {
		t.Fatal(err)
	}
	// 40 + 40 + 40 reaches 100: the third event is the last looked at.
	if evals != 3 || len(evs) != 3 || evs[2].ID != ids[3] || sr.Complete || !sr.BackTo.Equal(at(3)) {
		t.Fatalf("%d evaluations, %d events, %+v; want 3, back to %v", evals, len(evs), sr, at(3))
	}
	evs, _, err = store.SearchBodies(ctx(t), s, store.EventFilter{Until: sr.BackTo}, all, at(10), b)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 3 || evs[0].ID != ids[2] {
		t.Errorf("continued: %d events, first %v; want 3 from %s", len(evs), evs, ids[2])
	}
}

// testSearchBodiesTypeGlob: a search inside the bodies takes a type glob
// (a saved search's type), its sizes listed one exact type at a time as
// ListEvents does.
func testSearchBodiesTypeGlob(t *testing.T, s store.Store) {
	want := map[string]bool{}
	for i, typ := range []string{"invoice.paid", "charge.succeeded", "invoice.created", "invoice.paid", "customer.updated"} {
		e := newEvent("stripe", "g"+strconv.Itoa(i), "billing")
		e.Event.Type = typ
		e.Event.ReceivedAt = received.Add(time.Duration(i) * time.Second)
		id := ingest(t, s, e)[0].ID
		if typ[:8] == "invoice." {
			want[id] = true
		}
	}
	all := func(*anyhook.Event) (bool, uint64) { return true, 0 }
	evs, sr, err := store.SearchBodies(ctx(t), s, store.EventFilter{Type: "invoice.*"}, all, received.Add(time.Minute), store.DefaultBodyBudget)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for i, ev := range evs {
		got[ev.ID] = true
		if i > 0 && ev.ReceivedAt.After(evs[i-1].ReceivedAt) {
			t.Errorf("not newest first: %v after %v", ev.ReceivedAt, evs[i-1].ReceivedAt)
		}
	}
	if !maps.Equal(got, want) || !sr.Complete {
		t.Errorf("invoice.*: %d events %+v; want the %d invoices, complete", len(got), sr, len(want))
	}
}
