package delivery_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/delivery/deliverytest"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/postgres"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// releaseSignal is a store that tells, once each Release or Renew has
// returned, what it released or renewed.
type releaseSignal struct {
	*postgres.Store
	released, renewed chan []string
}

func (s *releaseSignal) Renew(ctx context.Context, rs []store.Release, lease time.Duration) ([]string, error) {
	ids, err := s.Store.Renew(ctx, rs, lease)
	s.renewed <- ids
	return ids, err
}

func (s *releaseSignal) Release(ctx context.Context, rs []store.Release) ([]string, error) {
	ids, err := s.Store.Release(ctx, rs)
	s.released <- ids
	return ids, err
}

// stallSink is an ordered destination on 127.0.0.1 that records what it
// has in flight (deliverytest.InFlight) and answers each request 200 once
// gate is closed.
type stallSink struct {
	f       deliverytest.InFlight
	gate    chan struct{}
	arrived chan string // X-AnyHook-Delivery and X-AnyHook-Attempt of each request
}

func newStallSink(t *testing.T) (*stallSink, string) {
	s := &stallSink{f: deliverytest.InFlight{Ordered: true}, gate: make(chan struct{}), arrived: make(chan string, 100)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		end := s.f.Begin(r)
		s.arrived <- r.Header.Get("X-AnyHook-Delivery") + "@" + r.Header.Get("X-AnyHook-Attempt")
		select {
		case <-s.gate:
			end(true)
		case <-r.Context().Done():
			end(false)
		}
	}))
	t.Cleanup(srv.Close)
	return s, srv.URL
}

// stallSetup ingests, directly, two versions of object o and one of object
// p for an ordered destination, and opens a second store on the same
// database whose replies a proxy holds from the next COMMIT on, once its
// tracer is armed.
func stallSetup(t *testing.T) (dsn string, direct *postgres.Store, stalled *releaseSignal, h *pgtest.CommitHold, evs []store.NewEvent) {
	dsn = pgtest.DSN(t)
	var err error
	if direct, err = postgres.Open(t.Context(), dsn, postgres.Options{MaxConns: 4}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { direct.Close() })
	h = pgtest.HoldCommit(t, dsn)
	st, err := postgres.Open(t.Context(), h.DSN, postgres.Options{MaxConns: 4, Tracer: h.Tracer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	t.Cleanup(h.Proxy.ReleaseReplies) // before the store closes
	evs = newEvents(3, "dest")
	for i, ov := range [][2]string{{"o", "1"}, {"o", "2"}, {"p", "1"}} {
		evs[i].Event.Object, evs[i].Event.Version = ov[0], ov[1]
	}
	if _, err := direct.Ingest(t.Context(), evs); err != nil {
		t.Fatal(err)
	}
	return dsn, direct, &releaseSignal{Store: st, released: make(chan []string, 10), renewed: make(chan []string, 10)}, h, evs
}

// orderedDest is the destination of the stall tests: in order, timeout
// 2 s; with the engines' grace of 500 ms its lease is 2.5 s.
func orderedDest(url string) delivery.Destination {
	d := dest(url, 8)
	d.Timeout, d.InOrder, d.StalePolicy = 2*time.Second, true, anyhook.Reclaim
	return d
}

// stalledClaim waits until the stalled claim of the heads of o and p is
// committed, then, when expired, until the database's clock is past its
// leases.
func stalledClaim(t *testing.T, h *pgtest.CommitHold, direct *postgres.Store, evs []store.NewEvent, expired bool) {
	<-h.Committing
	testwait.For(t, "the stalled claim to be committed", func() bool {
		return statuses(t, direct, evs)[anyhook.StatusDelivering] == 2
	})
	if !expired {
		return
	}
	testwait.For(t, "the stalled claim's leases to run out", func() bool {
		for _, ne := range evs {
			ev, err := direct.Event(t.Context(), ne.Event.ID)
			if err != nil {
				t.Fatal(err)
			}
			if d := ev.Deliveries[0]; d.Status == anyhook.StatusDelivering && !d.LeaseUntil.Before(time.Now()) {
				return false
			}
		}
		return true
	})
}

// The adversarial run, on PostgreSQL with two processes: the database
// connection of one (A) stalls — a proxy holds its replies, it neither
// answers nor breaks — right as A claims the heads of two objects, for
// longer than the lease. The other (B) rescues the expired claims, sends
// them again and holds them in flight at the destination; then A's claim
// comes back. A must not send it: an attempt whose lease has ended would
// be in flight next to B's (two attempts of one delivery, two deliveries
// of one object) and, once B has moved on to version 2, would deliver
// version 1 after it without X-AnyHook-Stale. A renews it instead, and
// finds it taken: nothing is sent twice, nothing overlaps.
func TestStalledClaimNotSentAfterRescue(t *testing.T) {
	t.Parallel()
	_, direct, stalled, h, evs := stallSetup(t)
	sink, url := newStallSink(t)
	a := delivery.New(stalled, delivery.Options{PollInterval: time.Hour, Grace: 500 * time.Millisecond, Destinations: []delivery.Destination{orderedDest(url)}})
	h.Tracer.Armed.Store(true)
	a.Start(t.Context())
	defer a.Stop(time.Second)
	stalledClaim(t, h, direct, evs, false)
	b := delivery.New(direct, delivery.Options{PollInterval: 20 * time.Millisecond, Grace: 500 * time.Millisecond,
		Destinations: []delivery.Destination{orderedDest(url)}})
	b.Start(t.Context())
	defer b.Stop(time.Second)
	heads := map[string]bool{}
	for len(heads) < 2 {
		select {
		case got := <-sink.arrived:
			heads[got] = true
		case <-time.After(time.Minute):
			t.Fatal("B did not send the rescued claims")
		}
	}
	// B's attempts 2 of o@1 and p@1 are in flight: A's claim comes back.
	h.Proxy.ReleaseReplies()
	select {
	case ids := <-stalled.renewed:
		if len(ids) != 0 {
			t.Errorf("A renewed %v: B had already claimed them again", ids)
		}
	case <-sink.f.Bad():
		t.Fatalf("A sent its expired claim: %+v", sink.f.Report())
	case <-time.After(time.Minute):
		t.Fatal("A neither renewed nor sent its claim")
	}
	close(sink.gate)
	waitDelivered(t, direct, evs)
	if r := sink.f.Report(); r.Defects() != 0 || r.Requests != len(evs) {
		t.Errorf("destination saw %+v; want %d requests, one per delivery, and no overlap or inversion", r, len(evs))
	}
	for got := range heads {
		if _, attempt, _ := strings.Cut(got, "@"); attempt != "2" {
			t.Errorf("B sent %s; want attempt 2 (attempt 1 was A's)", got)
		}
	}
}

// One process alone whose database stalls for longer than the lease as
// it claims: its claim comes back too late to send, and is renewed from a
// fresh deadline (no rescuer runs here to take it), then sent at
// attempt 1, in order; nothing is released.
func TestStalledClaimRenewed(t *testing.T) {
	t.Parallel()
	_, direct, stalled, h, evs := stallSetup(t)
	sink, url := newStallSink(t)
	close(sink.gate)
	var rel releases
	a := delivery.New(stalled, delivery.Options{PollInterval: time.Hour, Grace: 500 * time.Millisecond, Observer: &rel,
		Destinations: []delivery.Destination{orderedDest(url)}})
	h.Tracer.Armed.Store(true)
	a.Start(t.Context())
	defer a.Stop(time.Second)
	stalledClaim(t, h, direct, evs, true)
	h.Proxy.ReleaseReplies()
	select {
	case ids := <-stalled.renewed:
		if len(ids) != 2 {
			t.Errorf("renewed %v, want the heads of o and p", ids)
		}
	case got := <-sink.arrived:
		t.Fatalf("sent %s, a claim whose lease had ended", got)
	case <-time.After(time.Minute):
		t.Fatal("the late claim was never renewed")
	}
	waitDelivered(t, direct, evs)
	if r := sink.f.Report(); r.Defects() != 0 || r.Requests != len(evs) {
		t.Errorf("destination saw %+v; want %d requests and no overlap or inversion", r, len(evs))
	}
	for _, ne := range evs {
		ev, err := direct.Event(t.Context(), ne.Event.ID)
		if err != nil {
			t.Fatal(err)
		}
		if d := ev.Deliveries[0]; d.AttemptCount != 1 || len(d.Attempts) != 1 {
			t.Errorf("%s@%s: attempt %d, attempts %+v; want delivered at attempt 1", ne.Event.Object, ne.Event.Version, d.AttemptCount, d.Attempts)
		}
	}
	if n := rel.lease.Load(); n != 0 {
		t.Errorf("counted %d releases, want none", n)
	}
}
