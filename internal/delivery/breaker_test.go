package delivery_test

import (
	"context"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/delivery/deliverytest"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/postgres"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/testclock"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// polledStore counts the engine's polls of its breakers (ClaimProbe): a
// test waits for polls to know the dispatcher had its chances to claim.
type polledStore struct {
	store.Store
	polls atomic.Int64
}

func (s *polledStore) ClaimProbe(ctx context.Context, dest string, inOrder bool, at time.Time, every, lease time.Duration) ([]store.Claim, bool, error) {
	defer s.polls.Add(1)
	return s.Store.ClaimProbe(ctx, dest, inOrder, at, every, lease)
}

// breakerRig is an engine on a real store delivering to a real sink that
// fails (500) until healed, on an injected clock that only the test moves.
type breakerRig struct {
	st       *polledStore
	clock    *testclock.Clock
	healthy  atomic.Bool
	inflight *deliverytest.InFlight
	sink     *sinktest.Sink
	changes  chan bool // OnBreaker: tripped or resumed
	e        *delivery.Engine

	mu   sync.Mutex
	oks  map[string]int // 2xx answers by X-AnyHook-Delivery
	sent int            // requests answered
}

const probeEvery = 30 * time.Second

// The sink answers its first requests with script, then 200 once healed
// and 500 before.
func newBreakerRig(t *testing.T, st store.Store, d delivery.Destination, script ...int) *breakerRig {
	r := &breakerRig{st: &polledStore{Store: st}, clock: testclock.New(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)),
		inflight: &deliverytest.InFlight{Ordered: d.InOrder}, changes: make(chan bool, 16), oks: map[string]int{}}
	r.sink = sinktest.Start(t, sinktest.Options{Answer: func(req *http.Request, _ []byte) int {
		end := r.inflight.Begin(req)
		code := http.StatusInternalServerError
		r.mu.Lock()
		switch {
		case r.sent < len(script):
			code = script[r.sent]
		case r.healthy.Load():
			code = http.StatusOK
		}
		r.sent++
		if code == http.StatusOK {
			r.oks[req.Header.Get("X-AnyHook-Delivery")]++
		}
		r.mu.Unlock()
		end(code == http.StatusOK)
		return code
	}})
	d.Name, d.URL = "dest", r.sink.URL
	if d.Timeout == 0 {
		d.Timeout = 10 * time.Second
	}
	if d.MaxInFlight == 0 {
		d.MaxInFlight = 1
	}
	d.AutoPause.ProbeEvery = probeEvery
	r.e = delivery.New(r.st, delivery.Options{Destinations: []delivery.Destination{d}, PollInterval: 5 * time.Millisecond,
		Now: r.clock.Now, OnBreaker: func(_ string, tripped bool, _ time.Time) {
			if tripped {
				r.mu.Lock()
				if n := d.AutoPause.ConsecutiveFailures + d.AutoPause.Window; r.sent < n {
					t.Errorf("tripped after %d requests, before the rule's %d", r.sent, n)
				}
				r.mu.Unlock()
			}
			r.changes <- tripped
		}})
	return r
}

func (r *breakerRig) start(t *testing.T) {
	r.e.Start(t.Context())
	t.Cleanup(func() { r.e.Stop(time.Second) })
}

// await waits for the next OnBreaker call and checks what it said.
func (r *breakerRig) await(t *testing.T, tripped bool) {
	t.Helper()
	select {
	case got := <-r.changes:
		if got != tripped {
			t.Fatalf("OnBreaker said tripped = %v, want %v", got, tripped)
		}
	case <-time.After(testwait.Timeout):
		t.Fatalf("timed out waiting for OnBreaker(tripped = %v)", tripped)
	}
}

// settled waits until nothing of the destination is delivering: the
// attempts in flight at the trip have ended and are recorded.
func (r *breakerRig) settled(t *testing.T) {
	t.Helper()
	testwait.For(t, "no delivery in flight", func() bool {
		n, err := r.st.Counts(t.Context())
		return err == nil && n[anyhook.StatusDelivering] == 0
	})
}

// quiet waits for polls more polls of the breaker and fails t if the
// sink received anything meanwhile: while tripped, nothing but probes is
// sent, and probes only when the clock says one is due.
func (r *breakerRig) quiet(t *testing.T, polls int64) {
	t.Helper()
	before := len(r.sink.Requests())
	from := r.st.polls.Load()
	testwait.For(t, "the dispatcher to poll", func() bool { return r.st.polls.Load() >= from+polls })
	if got := len(r.sink.Requests()); got != before {
		t.Fatalf("%d requests sent while the breaker was tripped and no probe was due", got-before)
	}
}

// probeOnce moves the clock to the next probe and waits for exactly that
// one request, recorded.
func (r *breakerRig) probeOnce(t *testing.T) sinktest.Request {
	t.Helper()
	n := len(r.sink.Requests())
	r.clock.Add(probeEvery)
	got := r.sink.Wait(t, n+1)
	r.settled(t)
	r.quiet(t, 5)
	return got[n]
}

func openSQLite(t *testing.T) store.Store {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func ingestAll(t *testing.T, st store.Store, evs []store.NewEvent) {
	t.Helper()
	for _, ne := range evs { // one by one: each is older than the next
		if _, err := st.Ingest(t.Context(), []store.NewEvent{ne}); err != nil {
			t.Fatal(err)
		}
	}
}

// deliveredOnce checks that the sink answered 2xx exactly once for each
// of evs and for nothing else.
func deliveredOnce(t *testing.T, r *breakerRig, evs []store.NewEvent) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ne := range evs {
		if n := r.oks[ne.Event.ID]; n != 1 {
			t.Errorf("event %s answered 2xx %d times, want once", ne.Event.DedupKey, n)
		}
	}
	if len(r.oks) != len(evs) {
		t.Errorf("%d events answered 2xx, want %d", len(r.oks), len(evs))
	}
	rep := r.inflight.Report()
	if rep.Defects() != 0 {
		t.Fatalf("the sink saw %d defects: %v", rep.Defects(), rep.Examples)
	}
	for _, ne := range evs {
		ev, err := r.st.Event(t.Context(), ne.Event.ID)
		if err != nil {
			t.Fatal(err)
		}
		delivered := 0
		for _, a := range ev.Deliveries[0].Attempts {
			if a.StatusCode == http.StatusOK {
				delivered++
			}
		}
		if delivered != 1 || ev.Deliveries[0].Status != anyhook.StatusDelivered {
			t.Fatalf("event %s: %s after %d successful attempts, want delivered once", ne.Event.DedupKey, ev.Deliveries[0].Status, delivered)
		}
	}
}

// TestBreakerProbesNeverKill: at max_attempts 1 the breaker trips on the
// first failure; the deliveries recorded after it wait, nothing is sent
// but one probe per probe_every, failed probes leave their deliveries
// pending (never dead, however many), their attempts recorded as probes,
// and the first probe that succeeds resumes delivery: each event arrives
// once.
func TestBreakerProbesNeverKill(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	r := newBreakerRig(t, st, delivery.Destination{MaxAttempts: 1, Initial: time.Hour, Max: time.Hour, StalePolicy: anyhook.Reclaim,
		AutoPause: &delivery.AutoPause{ConsecutiveFailures: 1}})
	first := newEvents(1, "dest")
	first[0].Event.DedupKey = "first"
	ingestAll(t, st, first)
	r.start(t)
	r.await(t, true)
	r.settled(t)
	if got := statuses(t, st, first); got[anyhook.StatusDead] != 1 {
		t.Fatalf("the attempt that tripped the breaker: %v, want dead (max_attempts 1, not a probe)", got)
	}
	evs := newEvents(3, "dest")
	ingestAll(t, st, evs)
	r.e.Wake()
	r.quiet(t, 5)
	if got := statuses(t, st, evs); got[anyhook.StatusPaused] != 3 {
		t.Fatalf("deliveries recorded while tripped: %v, want 3 paused", got)
	}
	for i := range 4 {
		req := r.probeOnce(t)
		if a := req.Header.Get("X-AnyHook-Attempt"); i < 3 && a != "1" {
			t.Fatalf("probe %d was attempt %s, want each delivery's first (the oldest due first)", i, a)
		}
		if got := statuses(t, st, evs); got[anyhook.StatusDead] != 0 || got[anyhook.StatusPaused] != 3 {
			t.Fatalf("after failed probe %d: %v, want all 3 paused, none dead", i, got)
		}
	}
	ev, err := st.Event(t.Context(), evs[0].Event.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d := ev.Deliveries[0]; d.AttemptCount != 2 || d.Probes != 2 || !strings.Contains(d.Attempts[0].Error, "probe") || !strings.Contains(d.Attempts[0].Error, "HTTP 500") {
		t.Fatalf("probed delivery = %d attempts, %d probes, first error %q; want 2 probes recorded as probes with their outcome", d.AttemptCount, d.Probes, d.Attempts[0].Error)
	}
	r.healthy.Store(true)
	n := len(r.sink.Requests())
	r.clock.Add(probeEvery)
	r.await(t, false)
	r.sink.Wait(t, n+3) // the probe, then the two others without a probe
	waitDelivered(t, st, evs)
	deliveredOnce(t, r, evs)
}

// TestBreakerConsecutiveInOrder: an ordered destination trips after
// consecutive_failures failures in a row (a success in between starts the
// count over), probes keep each object's order, and once a probe succeeds
// every delivery arrives once, in order, never two of an object at once.
func TestBreakerConsecutiveInOrder(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	r := newBreakerRig(t, st, delivery.Destination{MaxAttempts: 10, Initial: time.Millisecond, Max: time.Millisecond, StalePolicy: anyhook.Reclaim,
		InOrder: true, MaxInFlight: 4, AutoPause: &delivery.AutoPause{ConsecutiveFailures: 4}})
	// max_attempts 10: the attempts in flight at the trip end after it,
	// and none may use a delivery up before the probes begin.
	var evs []store.NewEvent
	for v := 1; v <= 3; v++ {
		for o := range 3 {
			ne := newEvents(1, "dest")[0]
			ne.Event.DedupKey = "o" + strconv.Itoa(o) + "v" + strconv.Itoa(v)
			ne.Event.Object, ne.Event.Version = "obj"+strconv.Itoa(o), strconv.Itoa(v)
			evs = append(evs, ne)
		}
	}
	ingestAll(t, st, evs)
	r.start(t)
	r.await(t, true)
	r.settled(t)
	if got := statuses(t, st, evs); got[anyhook.StatusDead] != 0 {
		t.Fatalf("after the trip: %v, want none dead", got)
	}
	r.quiet(t, 5)
	for range 2 {
		r.probeOnce(t)
	}
	r.healthy.Store(true)
	r.clock.Add(probeEvery)
	r.await(t, false)
	waitDelivered(t, st, evs)
	deliveredOnce(t, r, evs)
}

// TestBreakerFailureRate: failure_rate is judged over the last window
// attempts, and only once window attempts were made: three failures of
// three do not trip a window of 4; the fourth attempt, a success, makes
// 3 of 4 ≥ 0.5 and trips it.
func TestBreakerFailureRate(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	r := newBreakerRig(t, st, delivery.Destination{MaxAttempts: 5, Initial: time.Hour, Max: time.Hour, StalePolicy: anyhook.Reclaim,
		AutoPause: &delivery.AutoPause{FailureRate: 0.5, Window: 4}}, 500, 500, 500, 200)
	ingestAll(t, st, newEvents(8, "dest"))
	r.start(t)
	r.await(t, true)
	r.settled(t)
	bs, err := st.Breakers(t.Context())
	// 3 of 4; or 4 of 4 when the machine is so loaded that the 200's
	// claim ran out of lease before it was sent (released, then failed
	// again): either way it trips only once the window is full.
	if err != nil || !strings.Contains(bs["dest"].Reason, "of the last 4 attempts failed") ||
		(!strings.HasPrefix(bs["dest"].Reason, "3 ") && !strings.HasPrefix(bs["dest"].Reason, "4 ")) {
		t.Fatalf("Breakers = %+v, %v, want the reason 3 (or 4) of the last 4", bs, err)
	}
	r.quiet(t, 5)
	select {
	case again := <-r.changes:
		t.Fatalf("OnBreaker told again (tripped = %v), want once", again)
	default:
	}
}

// TestBreakerPersonResumes: a person's resume (the admin API's resume
// resets the breaker in the store) reaches the engine at its next poll:
// delivery goes on without a probe.
func TestBreakerPersonResumes(t *testing.T) {
	t.Parallel()
	st := openSQLite(t)
	r := newBreakerRig(t, st, delivery.Destination{MaxAttempts: 10, Initial: time.Millisecond, Max: time.Millisecond, StalePolicy: anyhook.Reclaim,
		AutoPause: &delivery.AutoPause{ConsecutiveFailures: 2}})
	evs := newEvents(5, "dest")
	ingestAll(t, st, evs)
	r.start(t)
	r.await(t, true)
	r.settled(t)
	r.quiet(t, 5)
	r.healthy.Store(true)
	if ok, err := st.ResetBreaker(t.Context(), "dest"); err != nil || !ok {
		t.Fatalf("ResetBreaker = %v, %v", ok, err)
	}
	waitDelivered(t, st, evs)
	if r.e.Paused("dest") {
		t.Fatal("the engine still holds the destination paused")
	}
	deliveredOnce(t, r, evs)
}

// TestBreakerTwoProcesses: two engines on one PostgreSQL database; the
// breaker one trips holds back both, the two probe once per turn between
// them, and after the first successful probe every delivery arrives once.
func TestBreakerTwoProcesses(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	open := func() store.Store {
		s, err := postgres.Open(t.Context(), dsn, postgres.Options{MaxConns: 4})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	d := delivery.Destination{MaxAttempts: 10, Initial: time.Millisecond, Max: time.Millisecond, StalePolicy: anyhook.Reclaim,
		AutoPause: &delivery.AutoPause{ConsecutiveFailures: 2}}
	a := newBreakerRig(t, open(), d)
	// The second process shares the first's sink and clock.
	bst := &polledStore{Store: open()}
	bd := d
	bd.Name, bd.URL, bd.Timeout, bd.MaxInFlight = "dest", a.sink.URL, 10*time.Second, 1
	bd.AutoPause = &delivery.AutoPause{ConsecutiveFailures: 2, ProbeEvery: probeEvery}
	b := delivery.New(bst, delivery.Options{Destinations: []delivery.Destination{bd}, PollInterval: 5 * time.Millisecond, Now: a.clock.Now,
		OnBreaker: func(_ string, tripped bool, _ time.Time) { a.changes <- tripped }})
	evs := newEvents(12, "dest")
	ingestAll(t, a.st, evs)
	a.start(t)
	b.Start(t.Context())
	t.Cleanup(func() { b.Stop(time.Second) })
	a.await(t, true) // one of the two tripped it
	a.settled(t)
	testwait.For(t, "both engines to know of the trip", func() bool { return a.e.Paused("dest") && b.Paused("dest") })
	from := bst.polls.Load()
	a.quiet(t, 5)
	testwait.For(t, "the second engine to poll", func() bool { return bst.polls.Load() >= from+5 })
	for range 3 {
		a.probeOnce(t) // exactly one request per turn, from either
	}
	a.healthy.Store(true)
	a.clock.Add(probeEvery)
	a.await(t, false)
	testwait.For(t, "both engines to deliver again", func() bool { return !a.e.Paused("dest") && !b.Paused("dest") })
	waitDelivered(t, a.st, evs)
	deliveredOnce(t, a, evs)
}
