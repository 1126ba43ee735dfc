package delivery_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/testkit/testclock"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// lateStore is the SQLite store, whose next answers with claims (a
// dispatcher's claim that took something, an ingest) come back stall
// later on the engine's clock: a database that stalled between the claim
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

// lateEngine runs an engine on a lateStore whose next answer with claims
// comes stall late, with the engine's grace and one destination of
// timeout and maxInFlight, delivering to a held sink (answering at once
// when answer is set) what the store has: first evs, ingested before it
// starts.
func lateEngine(t *testing.T, stall, timeout, grace time.Duration, maxInFlight int, answer bool, evs []store.NewEvent) (*lateStore, *heldSink, *delivery.Engine, *releases) {
	clock := testclock.New(time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))
	st := openLate(t, clock, stall)
	sink, url := newHeldSink(t)
	if answer {
		sink.Release()
	}
	if _, err := st.Store.Ingest(t.Context(), evs); err != nil {
		t.Fatal(err)
	}
	st.stalls.Store(1)
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
// it asked; the answer came 3 s late) is released whole, unsent, and
// claimed again: each delivery is sent once, at attempt 1.
func TestLateClaimReleased(t *testing.T) {
	t.Parallel()
	evs := newEvents(6, "dest")
	st, sink, _, rel := lateEngine(t, 3*time.Second, 3*time.Second, time.Second, 8, true, evs)
	sentOnceAtFirstAttempt(t, st, sink, evs)
	if n := rel.lease.Load(); n != int32(len(evs)) {
		t.Errorf("released %d claims, want %d", n, len(evs))
	}
}

// Claims made at ingest whose ingest came back too late are released as
// well, and sent by the dispatcher.
func TestLateClaimAtIngestReleased(t *testing.T) {
	t.Parallel()
	// A first event, sent by the dispatcher (its answer comes late: it
	// is released, then sent), leaves its queue drained: ingest claims
	// from then on.
	warm := newEvents(1, "dest")
	warm[0].Event.DedupKey = "warm-up"
	st, sink, e, rel := lateEngine(t, 4*time.Second, 3*time.Second, time.Second, 8, true, warm)
	waitDelivered(t, st, warm)

	st.stalls.Store(1)
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
	if n := rel.lease.Load(); n != int32(1+len(evs)) {
		t.Errorf("released %d claims, want %d: the warm-up's and the ingest's (its queue was drained)", n, 1+len(evs))
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
	st, sink, _, _ := lateEngine(t, 300*time.Millisecond, time.Second, 200*time.Millisecond, 1, false, evs)
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
