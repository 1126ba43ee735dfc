package delivery_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/store"
)

// fakeStore hands out the claims it was given, once each, and reports every
// outcome on a channel.
type fakeStore struct {
	mu       sync.Mutex
	claims   []store.Claim
	outcomes chan store.Outcome
}

func newFakeStore(claims ...store.Claim) *fakeStore {
	return &fakeStore{claims: claims, outcomes: make(chan store.Outcome, 16)}
}

// ClaimInOrder claims as Claim: the fake keeps no objects.
func (f *fakeStore) ClaimInOrder(ctx context.Context, destination string, limit int, lease time.Duration) ([]store.Claim, error) {
	return f.Claim(ctx, destination, limit, lease)
}

func (f *fakeStore) Claim(ctx context.Context, destination string, limit int, lease time.Duration) ([]store.Claim, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out, rest []store.Claim
	for _, c := range f.claims {
		if c.Delivery.Destination == destination && len(out) < limit {
			out = append(out, c)
		} else {
			rest = append(rest, c)
		}
	}
	f.claims = rest
	return out, nil
}

func (f *fakeStore) Finish(ctx context.Context, outs []store.Outcome) ([]string, error) {
	for _, o := range outs {
		f.outcomes <- o
	}
	return nil, nil
}

// Release releases nothing: the fake's claims are never sent late.
func (f *fakeStore) Release(ctx context.Context, rs []store.Release) ([]string, error) {
	return nil, errors.New("fake store: a claim was released")
}

// Renew renews nothing, as Release.
func (f *fakeStore) Renew(ctx context.Context, rs []store.Release, lease time.Duration) ([]string, error) {
	return nil, errors.New("fake store: a claim was renewed")
}

func (f *fakeStore) ExpirePending(context.Context, string, time.Time, int, string) ([]anyhook.Delivery, error) {
	return nil, nil // no pull destination here
}

func (f *fakeStore) Rescue(ctx context.Context, rule func(string) (store.StaleRule, bool)) ([]anyhook.Delivery, error) {
	return nil, nil
}

// Event reads nothing: the fake never claims at ingest, so no claim is
// ever recovered from an event read back.
func (f *fakeStore) Event(ctx context.Context, id string) (anyhook.Event, error) {
	return anyhook.Event{}, errors.New("fake store: an event was read back")
}

// The fake's destinations have no auto_pause: no breaker is asked for.
func (f *fakeStore) TripBreaker(ctx context.Context, destination string, at time.Time, reason string, firstProbe time.Time) (bool, error) {
	return false, errors.New("fake store: a breaker tripped")
}

func (f *fakeStore) ResetBreaker(ctx context.Context, destination string) (bool, error) {
	return false, errors.New("fake store: a breaker was reset")
}

func (f *fakeStore) ClaimProbe(ctx context.Context, destination string, inOrder bool, at time.Time, every, lease time.Duration) ([]store.Claim, bool, error) {
	return nil, false, errors.New("fake store: a probe was asked for")
}

func claim(dest string) store.Claim {
	return store.Claim{
		Delivery: anyhook.Delivery{ID: "d1", EventID: "e1", Destination: dest, Status: anyhook.StatusDelivering, AttemptCount: 1},
		Event:    anyhook.Event{ID: "e1", Source: "s", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{}`)},
	}
}

// attempt runs one delivery of an event to d and returns its outcome.
func attempt(t *testing.T, d delivery.Destination, client *http.Client) store.Outcome {
	t.Helper()
	if d.Name == "" {
		d.Name = "dest"
	}
	if d.Timeout == 0 {
		d.Timeout = 30 * time.Second
	}
	d.MaxAttempts, d.Initial, d.Max = 3, time.Second, time.Second
	return attemptClaim(t, d, client, claim(d.Name))
}

// attemptClaim is attempt with a claim of the caller's.
func attemptClaim(t *testing.T, d delivery.Destination, client *http.Client, c store.Claim) store.Outcome {
	t.Helper()
	st := newFakeStore(c)
	e := delivery.New(st, delivery.Options{Destinations: []delivery.Destination{d}, Client: client, PollInterval: 10 * time.Millisecond})
	e.Start(t.Context())
	defer e.Stop(time.Second)
	select {
	case o := <-st.outcomes:
		return o
	case <-time.After(60 * time.Second):
		t.Fatal("no outcome")
	}
	panic("unreachable")
}

func okServer(t *testing.T, tls bool, hits *atomic.Int32) *httptest.Server {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		io.WriteString(w, "ok")
	})
	var s *httptest.Server
	if tls {
		s = httptest.NewTLSServer(h)
	} else {
		s = httptest.NewServer(h)
	}
	t.Cleanup(s.Close)
	return s
}

func TestTLSVerifiedUnlessOptedOut(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := okServer(t, true, &hits) // a self-signed certificate

	o := attempt(t, delivery.Destination{URL: srv.URL}, nil)
	if o.Status == anyhook.StatusDelivered || !strings.Contains(o.Result.Error, "certificate") {
		t.Fatalf("self-signed destination by default: %s %q, want a certificate error", o.Status, o.Result.Error)
	}
	if hits.Load() != 0 {
		t.Fatalf("the handler ran %d times without a verified certificate", hits.Load())
	}

	o = attempt(t, delivery.Destination{URL: srv.URL, InsecureSkipVerify: true}, nil)
	if o.Status != anyhook.StatusDelivered || hits.Load() != 1 {
		t.Fatalf("with tls_insecure_skip_verify: %s %q, hits %d", o.Status, o.Result.Error, hits.Load())
	}

	// The opt-out is per destination: another destination of the same
	// engine still verifies.
	st := newFakeStore(claim("lax"), claim("strict"))
	e := delivery.New(st, delivery.Options{PollInterval: 10 * time.Millisecond, Destinations: []delivery.Destination{
		{Name: "lax", URL: srv.URL, InsecureSkipVerify: true, Timeout: 30 * time.Second, MaxAttempts: 3, Initial: time.Second, Max: time.Second},
		{Name: "strict", URL: srv.URL, Timeout: 30 * time.Second, MaxAttempts: 3, Initial: time.Second, Max: time.Second},
	}})
	e.Start(t.Context())
	defer e.Stop(time.Second)
	got := map[anyhook.DeliveryStatus]int{}
	for range 2 {
		select {
		case o := <-st.outcomes:
			got[o.Status]++
		case <-time.After(60 * time.Second):
			t.Fatal("no outcome")
		}
	}
	if got[anyhook.StatusDelivered] != 1 || got[anyhook.StatusPending] != 1 {
		t.Fatalf("outcomes %v, want one delivered (lax) and one retried (strict)", got)
	}
}

func TestRedirectsStayOnHost(t *testing.T) {
	t.Parallel()
	var other atomic.Int32
	elsewhere := okServer(t, false, &other)
	var same atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/steal", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/here", http.StatusTemporaryRedirect)
	})
	mux.HandleFunc("/here", func(w http.ResponseWriter, r *http.Request) {
		same.Add(1)
		io.WriteString(w, "ok")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	o := attempt(t, delivery.Destination{URL: srv.URL + "/away"}, nil)
	if o.Status == anyhook.StatusDelivered || o.Result.StatusCode != http.StatusTemporaryRedirect {
		t.Fatalf("redirect to another host: %s, code %d; want the 307 as a failed attempt", o.Status, o.Result.StatusCode)
	}
	if other.Load() != 0 {
		t.Fatalf("the other host received %d requests", other.Load())
	}

	o = attempt(t, delivery.Destination{URL: srv.URL + "/moved"}, nil)
	if o.Status != anyhook.StatusDelivered || same.Load() != 1 {
		t.Fatalf("redirect on the same host: %s, code %d, hits %d", o.Status, o.Result.StatusCode, same.Load())
	}
}

// A 301/302/303 would turn the POST into a bodiless GET; a handler that
// answers GET with 200 must not make the delivery count as delivered.
func TestRedirectThatDropsTheBodyFails(t *testing.T) {
	t.Parallel()
	var gets atomic.Int32
	mux := http.NewServeMux()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther} {
		mux.HandleFunc(fmt.Sprintf("/r%d", code), func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "/health", code)
		})
	}
	mux.HandleFunc("/health", func(w http.ResponseWriter, r *http.Request) {
		gets.Add(1)
		io.WriteString(w, "ok")
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther} {
		o := attempt(t, delivery.Destination{URL: fmt.Sprintf("%s/r%d", srv.URL, code)}, nil)
		if o.Status == anyhook.StatusDelivered || o.Result.StatusCode != code {
			t.Errorf("%d redirect: %s with code %d; want the %d as a failed attempt", code, o.Status, o.Result.StatusCode, code)
		}
	}
	if gets.Load() != 0 {
		t.Fatalf("the redirect target was requested %d times", gets.Load())
	}
}

// claimErrStore fails its claim but hands back rows anyway, as a store
// whose transaction failed after the UPDATE ran might.
// It closes rounds at its 20th claim: many dispatch rounds have run.
type claimErrStore struct {
	*fakeStore
	calls  atomic.Int32
	rounds chan struct{}
}

func (f *claimErrStore) Claim(ctx context.Context, destination string, limit int, lease time.Duration) ([]store.Claim, error) {
	if f.calls.Add(1) == 20 {
		close(f.rounds)
	}
	return []store.Claim{claim(destination)}, errors.New("commit failed")
}

func TestFailedClaimSendsNothing(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	srv := okServer(t, false, &hits)
	st := &claimErrStore{fakeStore: newFakeStore(), rounds: make(chan struct{})}
	e := delivery.New(st, delivery.Options{
		Destinations: []delivery.Destination{{Name: "d", URL: srv.URL, Timeout: time.Second, MaxAttempts: 3, Initial: time.Second, Max: time.Second}},
		PollInterval: time.Millisecond,
	})
	e.Start(t.Context())
	<-st.rounds
	e.Stop(time.Second)
	if n := hits.Load(); n != 0 {
		t.Fatalf("%d requests sent for claims whose transaction failed", n)
	}
}

// countingTransport counts the response body bytes the client reads.
type countingTransport struct {
	base http.RoundTripper
	read atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(r)
	if err == nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &c.read}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b *countingBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.n.Add(int64(n))
	return n, err
}

func TestHugeResponseBodyIsCut(t *testing.T) {
	t.Parallel()
	served := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(served)
		w.WriteHeader(http.StatusInternalServerError)
		chunk := []byte(strings.Repeat("A", 32<<10))
		for { // endless: only the client hanging up ends it
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	ct := &countingTransport{base: delivery.NewClient().Transport}
	client := delivery.NewClient()
	client.Transport = ct

	o := attempt(t, delivery.Destination{URL: srv.URL}, client)
	if len(o.Result.ResponseBody) != 4<<10 || o.Result.StatusCode != 500 {
		t.Fatalf("kept %d bytes of the response (code %d), want 4096", len(o.Result.ResponseBody), o.Result.StatusCode)
	}
	if n := ct.read.Load(); n > 4<<10+64<<10 {
		t.Fatalf("read %d bytes of an endless response, want at most 4 KiB kept + 64 KiB drained", n)
	}
	select {
	case <-served: // the connection was closed, not left streaming
	case <-time.After(60 * time.Second):
		t.Fatal("the endless response was never cut off")
	}
}

// The attempt's error reaches the API, the dashboard and alert channels: it
// names the destination, never its URL, which can hold a token.
func TestAttemptErrorHidesTheURL(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nobody listens there now: connection refused
	o := attempt(t, delivery.Destination{Name: "billing", URL: "http://" + addr + "/catch/s3cr3tpath?token=s3cr3tquery"}, nil)
	if o.Status == anyhook.StatusDelivered || o.Result.Error == "" {
		t.Fatalf("outcome %+v, want a failed attempt", o)
	}
	if strings.Contains(o.Result.Error, "s3cr3t") || !strings.Contains(o.Result.Error, "billing") {
		t.Fatalf("attempt error %q: want the destination's name and no part of its URL", o.Result.Error)
	}
}
