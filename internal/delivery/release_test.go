package delivery_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/delivery/deliverytest"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/testkit/testclock"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// lateStore is the SQLite store, whose next answers with claims (a
// dispatcher's claim that took something, an ingest, a renewal) come
// back stall later on the engine's clock: a database that stalled between the claim
// and its answer, as the engine sees it.
type lateStore struct {
	*sqlite.Store
	clock  *testclock.Clock
	stall  time.Duration
	stalls atomic.Int32 // answers still to come late
}

func openLate(t *testing.T, clock *testclock.Clock, stall time.Duration) *lateStore {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &lateStore{Store: st, clock: clock, stall: stall}
}

func (s *lateStore) late() {
	if s.stalls.Add(-1) >= 0 {
		s.clock.Add(s.stall)
	}
}

func (s *lateStore) Claim(ctx context.Context, dest string, limit int, lease time.Duration) ([]store.Claim, error) {
	cs, err := s.Store.Claim(ctx, dest, limit, lease)
	if len(cs) > 0 {
		s.late()
	}
	return cs, err
}

func (s *lateStore) ClaimInOrder(ctx context.Context, dest string, limit int, lease time.Duration) ([]store.Claim, error) {
	cs, err := s.Store.ClaimInOrder(ctx, dest, limit, lease)
	if len(cs) > 0 {
		s.late()
	}
	return cs, err
}

func (s *lateStore) Renew(ctx context.Context, rs []store.Release, lease time.Duration) ([]string, error) {
	ids, err := s.Store.Renew(ctx, rs, lease)
	s.late()
	return ids, err
}

func (s *lateStore) Ingest(ctx context.Context, evs []store.NewEvent) ([]store.IngestResult, error) {
	res, err := s.Store.Ingest(ctx, evs)
	s.late()
	return res, err
}

// releases counts the claims the engine released, per reason.
type releases struct{ lease atomic.Int32 }

func (r *releases) Attempted(string, anyhook.DeliveryStatus, anyhook.Attempt) {}
func (r *releases) Rescued(string, anyhook.DeliveryStatus)                    {}
func (r *releases) Released(_, reason string) {
	if reason == delivery.ReleaseLease {
		r.lease.Add(1)
	}
}

// sentOnceAtFirstAttempt fails t unless each delivery of evs was
// delivered by exactly one request, its attempt 1: a released claim is
// never sent, and its attempt is not counted.
func sentOnceAtFirstAttempt(t *testing.T, st store.Store, sink *heldSink, evs []store.NewEvent) {
	t.Helper()
	waitDelivered(t, st, evs)
	got := sink.Count("X-AnyHook-Delivery")
	for _, ne := range evs {
		ev, err := st.Event(t.Context(), ne.Event.ID)
		if err != nil {
			t.Fatal(err)
		}
		d := ev.Deliveries[0]
		if got[ne.Event.ID] != 1 || d.AttemptCount != 1 || len(d.Attempts) != 1 || d.Attempts[0].StatusCode != 200 {
			t.Errorf("event %s: %d requests, delivery at attempt %d with attempts %+v; want one request, attempt 1, delivered",
				ne.Event.ID, got[ne.Event.ID], d.AttemptCount, d.Attempts)
		}
	}
}

// lateEngine runs an engine on a lateStore whose next stalls answers
// with claims come stall late, with the engine's grace and one destination of
// timeout and maxInFlight, delivering to a held sink (answering at once
// when answer is set) what the store has: first evs, ingested before it
// starts.
func lateEngine(t *testing.T, stalls int32, stall, timeout, grace time.Duration, maxInFlight int, answer bool, evs []store.NewEvent) (*lateStore, *heldSink, *delivery.Engine, *releases) {
	clock := testclock.New(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
	st := openLate(t, clock, stall)
	sink, url := newHeldSink(t)
	if answer {
		sink.Release()
	}
	if _, err := st.Store.Ingest(t.Context(), evs); err != nil {
		t.Fatal(err)
	}
	st.stalls.Store(stalls)
	var rel releases
	d := dest(url, maxInFlight)
	d.Timeout = timeout
	e := delivery.New(st, delivery.Options{PollInterval: time.Hour, Grace: grace, Now: clock.Now, Observer: &rel,
		Destinations: []delivery.Destination{d}})
	e.Start(t.Context())
	t.Cleanup(func() { e.Stop(0) })
	return st, sink, e, &rel
}

// A dispatcher's claim that comes back with less than a second of its
// lease left (timeout 3 s, grace 1 s: the engine's deadline is 3.6 s after
// it asked; the answer came 3 s late) is renewed from a fresh deadline,
// and sent: each delivery once, at attempt 1, nothing released.
func TestLateClaimRenewed(t *testing.T) {
	t.Parallel()
	evs := newEvents(6, "dest")
	st, sink, _, rel := lateEngine(t, 1, 3*time.Second, 3*time.Second, time.Second, 8, true, evs)
	sentOnceAtFirstAttempt(t, st, sink, evs)
	if n := rel.lease.Load(); n != 0 {
		t.Errorf("released %d claims, want none: the renewal came back in time", n)
	}
}

// A late claim whose renewal comes back late as well is released whole,
// unsent, and claimed again: each delivery is sent once, at attempt 1.
func TestLateClaimReleased(t *testing.T) {
	t.Parallel()
	evs := newEvents(6, "dest")
	st, sink, _, rel := lateEngine(t, 2, 3*time.Second, 3*time.Second, time.Second, 8, true, evs)
	sentOnceAtFirstAttempt(t, st, sink, evs)
	if n := rel.lease.Load(); n != int32(len(evs)) {
		t.Errorf("released %d claims, want %d", n, len(evs))
	}
}

// Claims made at ingest whose ingest and renewal came back too late are
// released as well, and sent by the dispatcher.
func TestLateClaimAtIngestReleased(t *testing.T) {
	t.Parallel()
	// A first event, sent by the dispatcher (its answer comes late: it
	// is renewed, then sent), leaves its queue drained: ingest claims
	// from then on.
	warm := newEvents(1, "dest")
	warm[0].Event.DedupKey = "warm-up"
	st, sink, e, rel := lateEngine(t, 1, 4*time.Second, 3*time.Second, time.Second, 8, true, warm)
	waitDelivered(t, st, warm)

	st.stalls.Store(2)
	evs := newEvents(4, "dest")
	res, err := e.ClaimAtIngest(st).Ingest(t.Context(), evs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	sentOnceAtFirstAttempt(t, st, sink, evs)
	if n := rel.lease.Load(); n != int32(len(evs)) {
		t.Errorf("released %d claims, want %d: the ingest's (its queue was drained)", n, len(evs))
	}
}

// A claim that comes back with less of its lease left than the timeout,
// but enough to send, is sent with its timeout cut to what is left: here
// timeout 1 s, grace 200 ms (lease 1.2 s, margin 250 ms: the deadline is
// 950 ms after the claim was asked for), and the answer came 300 ms late.
func TestTimeoutCutToLeaseLeft(t *testing.T) {
	t.Parallel()
	evs := newEvents(1, "dest")
	// The destination never answers: the attempt times out.
	st, sink, _, _ := lateEngine(t, 1, 300*time.Millisecond, time.Second, 200*time.Millisecond, 1, false, evs)
	sink.wait(t, 1)
	a := testwait.Value(t, "the attempt's outcome", func() (anyhook.Attempt, error) {
		ev, err := st.Event(t.Context(), evs[0].Event.ID)
		switch {
		case err != nil:
			return anyhook.Attempt{}, err
		case len(ev.Deliveries[0].Attempts) == 0:
			return anyhook.Attempt{}, errors.New("no attempt recorded yet")
		}
		return ev.Deliveries[0].Attempts[0], nil
	})
	if want := "timeout after 650ms"; a.Error != want || a.StatusCode != 0 {
		t.Errorf("attempt = %+v, want no answer and the error %q: the timeout cut to the lease left", a, want)
	}
}

// inFlightSink is a destination on 127.0.0.1 that answers 200 at once
// and records what it has in flight (deliverytest.InFlight).
func inFlightSink(t *testing.T, ordered bool) (*deliverytest.InFlight, string) {
	f := &deliverytest.InFlight{Ordered: ordered}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.Begin(r)(true)
	}))
	t.Cleanup(srv.Close)
	return f, srv.URL
}

// releaseCounter is a lateStore whose renewals come back in time,
// counting its Release calls.
type releaseCounter struct {
	*lateStore
	calls atomic.Int32
}

func (s *releaseCounter) Renew(ctx context.Context, rs []store.Release, lease time.Duration) ([]string, error) {
	return s.Store.Renew(ctx, rs, lease)
}

func (s *releaseCounter) Release(ctx context.Context, rs []store.Release) ([]string, error) {
	s.calls.Add(1)
	return s.lateStore.Release(ctx, rs)
}

// A store that answers every claim too late to send it (each answer
// 3 s late on the engine's clock, against a deadline 3.6 s after the
// claim was asked for): releasing each claim and claiming it again would
// never deliver anything and would spin on the store. The late claims are
// renewed instead, from a fresh deadline, and sent: every delivery is
// delivered once, at attempt 1, in order, without overlap, and nothing
// is released. (One request in flight at a time: a claim made while
// another is being renewed would move the shared test clock by 3 s.)
func TestEveryClaimLateStillDelivers(t *testing.T) {
	t.Parallel()
	clock := testclock.New(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
	st := &releaseCounter{lateStore: openLate(t, clock, 3*time.Second)}
	st.stalls.Store(1 << 30)
	f, url := inFlightSink(t, true)
	evs := newEvents(6, "dest")
	for i := range evs {
		evs[i].Event.Object, evs[i].Event.Version = "o"+strconv.Itoa(i%2), strconv.Itoa(i)
	}
	if _, err := st.Store.Ingest(t.Context(), evs); err != nil {
		t.Fatal(err)
	}
	var rel releases
	d := dest(url, 1)
	d.Timeout, d.InOrder = 3*time.Second, true
	e := delivery.New(st, delivery.Options{PollInterval: 20 * time.Millisecond, Grace: time.Second, Now: clock.Now, Observer: &rel,
		Destinations: []delivery.Destination{d}})
	e.Start(t.Context())
	t.Cleanup(func() { e.Stop(0) })
	waitDelivered(t, st, evs)
	if r := f.Report(); r.Defects() != 0 || r.Requests != len(evs) {
		t.Errorf("destination saw %+v; want %d requests, one per delivery, and no overlap or inversion", r, len(evs))
	}
	for _, ne := range evs {
		ev, err := st.Event(t.Context(), ne.Event.ID)
		if err != nil {
			t.Fatal(err)
		}
		if dl := ev.Deliveries[0]; dl.AttemptCount != 1 {
			t.Errorf("%s@%s delivered at attempt %d, want 1", ne.Event.Object, ne.Event.Version, dl.AttemptCount)
		}
	}
	if n, calls := rel.lease.Load(), st.calls.Load(); n != 0 || calls != 0 {
		t.Errorf("released %d claims in %d calls; want none: each late claim was renewed in time", n, calls)
	}
}
