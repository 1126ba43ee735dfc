package delivery_test

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
)

// heldSink is a held destination (sinktest.Sink): Pass lets one request
// through, Release every one.
type heldSink struct{ *sinktest.Sink }

func newHeldSink(t *testing.T) (*heldSink, string) {
	s := &heldSink{sinktest.Start(t, sinktest.Options{Hold: true})}
	return s, s.URL
}

// wait waits for the next n requests to arrive.
func (s *heldSink) wait(t *testing.T, n int) {
	t.Helper()
	for range n {
		s.Next(t)
	}
}

// claimCounter is the SQLite store, counting the dispatcher's claims that
// took something.
type claimCounter struct {
	*sqlite.Store
	took atomic.Int32
}

func (c *claimCounter) Claim(ctx context.Context, dest string, limit int, lease time.Duration) ([]store.Claim, error) {
	cs, err := c.Store.Claim(ctx, dest, limit, lease)
	if len(cs) > 0 {
		c.took.Add(1)
	}
	return cs, err
}

func openCounted(t *testing.T) *claimCounter {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &claimCounter{Store: st}
}

func newEvents(n int, dests ...string) []store.NewEvent {
	evs := make([]store.NewEvent, n)
	for i := range evs {
		evs[i] = store.NewEvent{
			Event: anyhook.Event{ID: store.NewID(), Source: "s", DedupKey: "k" + strconv.Itoa(i), ReceivedAt: time.Now(),
				Method: "POST", Path: "/webhooks/s", Header: http.Header{}, Body: []byte(`{"n":` + strconv.Itoa(i) + `}`)},
			Destinations: dests,
		}
	}
	return evs
}

// runningEngine starts an engine on a fresh SQLite store, delivering to
// a held sink with max_in_flight maxInFlight, and returns once its
// dispatcher has sent one event and gone idle: a claim at ingest then meets
// no start-up claim of the dispatcher's (with an hour's poll, the
// dispatcher claims only on wakes).
func runningEngine(t *testing.T, maxInFlight int) (*claimCounter, *heldSink, *delivery.Engine) {
	t.Helper()
	st := openCounted(t)
	sink, url := newHeldSink(t)
	e := delivery.New(st, delivery.Options{PollInterval: time.Hour, Destinations: []delivery.Destination{dest(url, maxInFlight)}})
	e.Start(t.Context())
	sink.Pass()
	warm := newEvents(1, "dest")
	warm[0].Event.DedupKey = "warm-up"
	if _, err := st.Ingest(t.Context(), warm); err != nil {
		t.Fatal(err)
	}
	e.Wake()
	sink.wait(t, 1)
	waitDelivered(t, st, warm)
	return st, sink, e
}

// waitDelivered waits until every delivery of evs is delivered.
func waitDelivered(t *testing.T, st store.Store, evs []store.NewEvent) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for statuses(t, st, evs)[anyhook.StatusDelivered] != len(evs) {
		if time.Now().After(deadline) {
			t.Fatalf("not all delivered: %v", statuses(t, st, evs))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func dest(url string, maxInFlight int) delivery.Destination {
	return delivery.Destination{Name: "dest", URL: url, Timeout: time.Minute, MaxAttempts: 3, Initial: time.Second, Max: time.Second,
		StalePolicy: anyhook.Hold, MaxInFlight: maxInFlight}
}

func statuses(t *testing.T, st store.Store, evs []store.NewEvent) map[anyhook.DeliveryStatus]int {
	t.Helper()
	n := map[anyhook.DeliveryStatus]int{}
	for _, ne := range evs {
		ev, err := st.Event(t.Context(), ne.Event.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ev.Deliveries {
			n[d.Status]++
		}
	}
	return n
}

// Deliveries recorded while the destination has free slots are claimed in
// the ingest transaction and sent without a claim of the dispatcher's; the
// rest wait pending for the dispatcher; max_in_flight holds across both.
func TestClaimAtIngestRespectsMaxInFlight(t *testing.T) {
	t.Parallel()
	st, sink, e := runningEngine(t, 2)
	defer e.Stop(time.Second)
	took := st.took.Load()
	rec := e.ClaimAtIngest(st)

	evs := newEvents(5, "dest")
	res, err := rec.Ingest(t.Context(), evs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil || len(r.Claims) != 0 {
			t.Fatalf("result = %+v; the claims are the engine's, not the caller's", r)
		}
	}
	if n := statuses(t, st, evs); n[anyhook.StatusDelivering] != 2 || n[anyhook.StatusPending] != 3 {
		t.Fatalf("after ingest: %v; want 2 claimed at ingest (max_in_flight 2), 3 pending", n)
	}
	sink.wait(t, 2)
	if n := st.took.Load() - took; n != 0 {
		t.Fatalf("the dispatcher claimed %d times while ingest's claims held every slot", n)
	}
	sink.Release()
	sink.wait(t, 3)
	waitDelivered(t, st, evs)
	if most := sink.MostInFlight(); most > 2 {
		t.Errorf("%d requests in flight at once, over max_in_flight 2", most)
	}
	got := sink.Count("X-AnyHook-Delivery")
	for id, n := range got {
		if n != 1 {
			t.Errorf("event %s sent %d times", id, n)
		}
	}
	if len(got) != 6 || st.took.Load() == took {
		t.Errorf("sent %d events, %d claims by the dispatcher; want 6 (the warm-up's and 5), the last 3 by claim", len(got), st.took.Load()-took)
	}
}

// Before the engine starts and after it stops, ingest claims nothing: no
// dispatcher would send it, and a hold destination would hold it.
func TestClaimAtIngestOnlyWhileRunning(t *testing.T) {
	t.Parallel()
	st := openCounted(t)
	_, url := newHeldSink(t)
	e := delivery.New(st, delivery.Options{PollInterval: time.Hour, Destinations: []delivery.Destination{dest(url, 4)}})
	rec := e.ClaimAtIngest(st)
	before := newEvents(1, "dest")
	if _, err := rec.Ingest(t.Context(), before); err != nil {
		t.Fatal(err)
	}
	if n := statuses(t, st, before); n[anyhook.StatusPending] != 1 {
		t.Fatalf("before Start: %v, want pending", n)
	}
	e.Start(t.Context())
	e.Stop(0)
	after := newEvents(1, "dest")
	after[0].Event.DedupKey = "after"
	if _, err := rec.Ingest(t.Context(), after); err != nil {
		t.Fatal(err)
	}
	if n := statuses(t, st, after); n[anyhook.StatusPending] != 1 {
		t.Fatalf("after Stop: %v, want pending", n)
	}
}

// gatedRecorder holds each Ingest until open is closed.
type gatedRecorder struct {
	delivery.Recorder
	entered chan struct{}
	open    chan struct{}
}

func (g *gatedRecorder) Ingest(ctx context.Context, evs []store.NewEvent) ([]store.IngestResult, error) {
	close(g.entered)
	<-g.open
	return g.Recorder.Ingest(ctx, evs)
}

// A stop that comes while an ingest holds reserved slots waits for its
// claims and sends them: nothing claimed at ingest is left for the lease
// to run out (a hold destination would hold it unsent).
func TestClaimAtIngestStopSendsWhatIngestClaimed(t *testing.T) {
	t.Parallel()
	st, sink, e := runningEngine(t, 4)
	sink.Release()
	g := &gatedRecorder{Recorder: st, entered: make(chan struct{}), open: make(chan struct{})}
	rec := e.ClaimAtIngest(g)
	evs := newEvents(3, "dest")
	ingested := make(chan error, 1)
	go func() {
		_, err := rec.Ingest(t.Context(), evs)
		ingested <- err
	}()
	<-g.entered // the slots are reserved
	stopped := make(chan struct{})
	go func() { e.Stop(30 * time.Second); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while an ingest held reserved slots")
	case <-time.After(100 * time.Millisecond):
	}
	close(g.open)
	if err := <-ingested; err != nil {
		t.Fatal(err)
	}
	<-stopped
	if n := statuses(t, st, evs); n[anyhook.StatusDelivered] != 3 {
		t.Fatalf("after Stop: %v; want the 3 claimed at ingest delivered", n)
	}
}

// Concurrent ingests through the claim at ingest, against the dispatcher's
// own claims (a short poll, so ticks and backlogs come and go): every
// event is sent exactly once, max_in_flight holds, and Stop returns (no
// slot is left reserved).
func TestClaimAtIngestConcurrentIngests(t *testing.T) {
	t.Parallel()
	st := openCounted(t)
	sink := sinktest.Start(t, sinktest.Options{Answer: func(*http.Request, []byte) int {
		time.Sleep(time.Millisecond) // let requests overlap
		return http.StatusOK
	}})
	e := delivery.New(st, delivery.Options{PollInterval: 5 * time.Millisecond, Destinations: []delivery.Destination{dest(sink.URL, 3)}})
	e.Start(t.Context())
	rec := e.ClaimAtIngest(st)
	var all []store.NewEvent
	var mu sync.Mutex
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for b := range 8 {
				evs := newEvents(1+b%4, "dest")
				for i := range evs {
					evs[i].Event.DedupKey = "w" + strconv.Itoa(w) + "-b" + strconv.Itoa(b) + "-" + strconv.Itoa(i)
				}
				if _, err := rec.Ingest(t.Context(), evs); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				all = append(all, evs...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	waitDelivered(t, st, all)
	e.Stop(30 * time.Second)
	if most := sink.MostInFlight(); most > 3 {
		t.Errorf("%d requests in flight at once, over max_in_flight 3", most)
	}
	got := sink.Count("X-AnyHook-Delivery")
	if len(got) != len(all) {
		t.Errorf("%d events sent, want %d", len(got), len(all))
	}
	for id, n := range got {
		if n != 1 {
			t.Errorf("event %s sent %d times", id, n)
		}
	}
}

// lostAck records through the store, then fails: a COMMIT whose answer
// was lost (the connection dropped after the server committed).
type lostAck struct{ delivery.Recorder }

func (l lostAck) Ingest(ctx context.Context, evs []store.NewEvent) ([]store.IngestResult, error) {
	if _, err := l.Recorder.Ingest(ctx, evs); err != nil {
		return nil, err
	}
	return nil, errors.Join(anyhook.ErrUnavailable, errors.New("ingest: commit: connection reset"))
}

// An ingest that fails after its transaction committed (the answer to
// COMMIT lost) still sends what it claimed: left alone, the claims would
// wait for their lease to run out, and a hold destination would hold them
// although nothing was sent. Claims of an ingest that did not commit are
// not looked for in vain: their slots come back.
func TestClaimAtIngestLostCommitAnswerStillSends(t *testing.T) {
	t.Parallel()
	st, sink, e := runningEngine(t, 2)
	defer e.Stop(time.Second)
	took := st.took.Load()
	evs := newEvents(2, "dest")
	if _, err := e.ClaimAtIngest(lostAck{st}).Ingest(t.Context(), evs); err == nil {
		t.Fatal("want the lost answer's error")
	}
	if n := statuses(t, st, evs); n[anyhook.StatusDelivering] != 2 {
		t.Fatalf("after the ingest: %v, want both claimed at ingest", n)
	}
	sink.wait(t, 2)
	sink.Release()
	waitDelivered(t, st, evs)
	deadline := time.Now().Add(30 * time.Second)
	if n := st.took.Load() - took; n != 0 {
		t.Fatalf("the dispatcher claimed %d times: the claims were sent as made at ingest", n)
	}
	// A failed ingest that committed nothing gives its slots back.
	failed := newEvents(2, "dest")
	for i := range failed {
		failed[i].Event.DedupKey = "failed-" + strconv.Itoa(i)
	}
	if _, err := e.ClaimAtIngest(failing{}).Ingest(t.Context(), failed); err == nil {
		t.Fatal("want the failure")
	}
	later := newEvents(2, "dest")
	for i := range later {
		later[i].Event.DedupKey = "later-" + strconv.Itoa(i)
	}
	for {
		if _, err := e.ClaimAtIngest(st).Ingest(t.Context(), later[:1]); err != nil {
			t.Fatal(err)
		}
		if statuses(t, st, later[:1])[anyhook.StatusDelivering] == 1 {
			break // the slots came back (the search for claims ended)
		}
		if time.Now().After(deadline) {
			t.Fatal("the failed ingest's slots never came back")
		}
		later = later[1:]
		if len(later) == 0 {
			later = newEvents(1, "dest")
			later[0].Event.DedupKey = "later-" + store.NewID()
		}
		time.Sleep(5 * time.Millisecond)
	}
	got := sink.Count("X-AnyHook-Delivery")
	for _, ne := range evs {
		if n := got[ne.Event.ID]; n != 1 {
			t.Errorf("event %s sent %d times, want 1", ne.Event.ID, n)
		}
	}
}

// failing fails every ingest before recording anything.
type failing struct{}

func (failing) Ingest(context.Context, []store.NewEvent) ([]store.IngestResult, error) {
	return nil, errors.Join(anyhook.ErrUnavailable, errors.New("database down"))
}
