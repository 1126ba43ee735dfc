package ingest

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/groupcommit"
	"github.com/anyhook/anyhook/internal/store"
)

// gateRecorder records each call's dedup keys; its first call blocks until
// gate is closed. A call holding the key "bad" fails as a whole.
type gateRecorder struct {
	gate    chan struct{}
	mu      sync.Mutex
	calls   [][]string
	entered chan struct{} // closed when the first call has begun
}

func (r *gateRecorder) Ingest(ctx context.Context, evs []store.NewEvent) ([]store.IngestResult, error) {
	var keys []string
	for _, ev := range evs {
		keys = append(keys, ev.Event.DedupKey)
	}
	r.mu.Lock()
	first := len(r.calls) == 0
	r.calls = append(r.calls, keys)
	r.mu.Unlock()
	if first {
		close(r.entered)
		<-r.gate
	}
	if slices.Contains(keys, "bad") {
		return nil, errors.New("constraint failed")
	}
	out := make([]store.IngestResult, len(evs))
	for i, k := range keys {
		out[i].ID = "id-" + k
	}
	return out, nil
}

func newGate() *gateRecorder {
	return &gateRecorder{gate: make(chan struct{}), entered: make(chan struct{})}
}

func events(keys ...string) []store.NewEvent {
	out := make([]store.NewEvent, len(keys))
	for i, k := range keys {
		out[i].Event.DedupKey = k
	}
	return out
}

type answer struct {
	res []store.IngestResult
	err error
}

// queue starts a Batcher, holds its first commit and queues requests
// behind it, so that the batches it forms are known in advance.
func queue(t *testing.T, rec *gateRecorder, max int, reqs ...[]store.NewEvent) []answer {
	t.Helper()
	b := NewBatcher(rec, max)
	b.Start(t.Context())
	defer b.Stop()
	first := make(chan answer, 1)
	go func() {
		res, err := b.Ingest(t.Context(), events("first"))
		first <- answer{res, err}
	}()
	<-rec.entered
	var pending []*groupcommit.Pending[[]store.NewEvent, []store.IngestResult]
	for _, evs := range reqs {
		p, err := b.c.Add(evs)
		if err != nil {
			t.Fatal(err)
		}
		pending = append(pending, p)
	}
	close(rec.gate)
	<-first
	var out []answer
	for _, p := range pending {
		res, err := p.Wait(t.Context())
		out = append(out, answer{res, err})
	}
	return out
}

func TestBatcherSharesOneCommit(t *testing.T) {
	t.Parallel()
	rec := newGate()
	got := queue(t, rec, 4, events("a"), events("b", "c"), events("d"), events("e"))
	want := [][]string{{"first"}, {"a", "b", "c", "d"}, {"e"}}
	if !slices.EqualFunc(rec.calls, want, slices.Equal) {
		t.Errorf("calls = %q, want %q (requests never split, batches bounded)", rec.calls, want)
	}
	for i, keys := range [][]string{{"a"}, {"b", "c"}, {"d"}, {"e"}} {
		if got[i].err != nil || len(got[i].res) != len(keys) {
			t.Fatalf("request %d: %+v", i, got[i])
		}
		for j, k := range keys {
			if got[i].res[j].ID != "id-"+k {
				t.Errorf("request %d item %d = %q, want id-%s", i, j, got[i].res[j].ID, k)
			}
		}
	}
}

func TestBatcherIsolatesAFailedBatch(t *testing.T) {
	t.Parallel()
	rec := newGate()
	got := queue(t, rec, 10, events("a"), events("bad"), events("c"))
	want := [][]string{{"first"}, {"a", "bad", "c"}, {"a"}, {"bad"}, {"c"}}
	if !slices.EqualFunc(rec.calls, want, slices.Equal) {
		t.Errorf("calls = %q, want %q (the failed batch retried request by request)", rec.calls, want)
	}
	if got[0].err != nil || got[1].err == nil || got[2].err != nil || got[2].res[0].ID != "id-c" {
		t.Errorf("answers = %+v", got)
	}
}

func TestBatcherWritersOverlap(t *testing.T) {
	t.Parallel()
	rec := newGate()
	b := NewBatcher(rec, 10)
	b.SetWriters(2)
	if b.lane(events("slow")) == b.lane(events("b")) {
		t.Fatal("the test's keys share a lane")
	}
	b.Start(t.Context())
	defer b.Stop()
	firstDone := make(chan error, 1)
	go func() {
		_, err := b.Ingest(t.Context(), events("slow"))
		firstDone <- err
	}()
	<-rec.entered
	// The first writer is stuck in its commit; the second takes this one.
	res, err := b.Ingest(t.Context(), events("b"))
	if err != nil || res[0].ID != "id-b" {
		t.Fatalf("second request = %+v, %v", res, err)
	}
	select {
	case <-firstDone:
		t.Fatal("the first request was answered before its commit ended")
	default:
	}
	close(rec.gate)
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
}

func TestBatcherLanesByKey(t *testing.T) {
	t.Parallel()
	b := NewBatcher(nopRecorder{}, 10)
	b.SetWriters(4)
	used := map[int]bool{}
	for i := range 100 {
		key := "evt_" + strconv.Itoa(i)
		// Two batches of the same key, built apart: the lane is a function
		// of the key.
		lane, again := b.lane(events(key)), b.lane(events(key))
		if lane != again {
			t.Fatalf("key %s has two lanes", key)
		}
		used[lane] = true
	}
	if len(used) != 4 {
		t.Errorf("100 keys used %d of 4 lanes", len(used))
	}
	// A replay with a fresh id header shares only the content key with its
	// original: it must meet it in the same writer.
	for i := range 100 {
		a, b2 := events("evt_a"), events("evt_b"+strconv.Itoa(i))
		a[0].ContentKey, b2[0].ContentKey = "content", "content"
		if b.lane(a) != b.lane(b2) {
			t.Fatalf("one content key under dedup keys evt_a and %s: two lanes", b2[0].Event.DedupKey)
		}
	}
}

type nopRecorder struct{}

func (nopRecorder) Ingest(context.Context, []store.NewEvent) ([]store.IngestResult, error) {
	return nil, nil
}

func TestBatcherStop(t *testing.T) {
	t.Parallel()
	rec := newGate()
	close(rec.gate)
	b := NewBatcher(rec, 10)
	b.SetWriters(3)
	b.Start(t.Context())
	if _, err := b.Ingest(t.Context(), events("a")); err != nil {
		t.Fatal(err)
	}
	b.Stop()
	b.Stop() // idempotent
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := b.Ingest(ctx, events("late")); !errors.Is(err, errStopped) {
		t.Errorf("after Stop: %v, want errStopped", err)
	}
}
