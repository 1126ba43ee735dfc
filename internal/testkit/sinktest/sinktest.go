// Package sinktest is the tests' fake destination: an HTTP server on
// 127.0.0.1 that records every request it receives (method, URL, headers,
// body, in arrival order) and answers as the test says: scripted
// statuses, a function of the request, or held open until the test lets
// it through. Tests wait on its arrivals, never on a sleep.
package sinktest

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// Options say how a Sink answers.
type Options struct {
	// Script are the statuses of the first requests, in order; 200 after
	// them.
	Script []int
	// Answer, when set, decides each status in place of Script, given
	// the request and its body (read already); it is called after the
	// request is recorded, without the sink's lock. 0 leaves the request
	// unanswered: for a sender that went away.
	Answer func(r *http.Request, body []byte) int
	// Hold keeps each request open, unanswered, until Pass lets it
	// through, Release lets every one through, or its sender goes away.
	Hold bool
	// Reply is the body of an answer with status code; default
	// "answer <code>".
	Reply func(code int) string
	// Listener, when set, is the socket the sink serves on (an address a
	// test held closed first, to refuse connections); default a new one
	// on 127.0.0.1.
	Listener net.Listener
	// TLS, when set, makes the sink serve HTTPS with it (its certificate,
	// the client certificates it requires); default plain HTTP.
	TLS *tls.Config
}

// Request is one request the sink received.
type Request struct {
	Method string
	URL    *url.URL // as the server read it: path and query
	Header http.Header
	Body   []byte
}

// Sink is a fake destination. Its URL is the server's; any path reaches it.
type Sink struct {
	*httptest.Server
	opt  Options
	pass chan struct{}

	mu       sync.Mutex
	script   []int
	got      []Request
	next     int           // the first request Next has not returned
	changed  chan struct{} // closed and replaced at each arrival
	inFlight int
	most     int
	released chan struct{} // closed by Release
}

// New starts a sink that answers its first requests with script, then
// 200, until the test ends.
func New(t testing.TB, script ...int) *Sink { return Start(t, Options{Script: script}) }

// Start starts a sink answering as o says, until the test ends.
func Start(t testing.TB, o Options) *Sink {
	s := &Sink{opt: o, script: o.Script, pass: make(chan struct{}, 1000), changed: make(chan struct{}), released: make(chan struct{})}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if o.Listener != nil {
		s.Listener.Close()
		s.Listener = o.Listener
	}
	if o.TLS != nil {
		s.TLS = o.TLS
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	t.Cleanup(s.Release) // runs first: Close waits for held requests
	return s
}

func (s *Sink) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u := *r.URL
	s.mu.Lock()
	s.got = append(s.got, Request{Method: r.Method, URL: &u, Header: r.Header.Clone(), Body: body})
	s.inFlight++
	s.most = max(s.most, s.inFlight)
	code := http.StatusOK
	if len(s.script) > 0 {
		code, s.script = s.script[0], s.script[1:]
	}
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inFlight--
		s.mu.Unlock()
	}()
	if s.opt.Hold {
		select {
		case <-s.pass:
		case <-s.released:
		case <-r.Context().Done():
			return
		}
	}
	if s.opt.Answer != nil {
		if code = s.opt.Answer(r, body); code == 0 {
			return
		}
	}
	w.WriteHeader(code)
	if s.opt.Reply != nil {
		io.WriteString(w, s.opt.Reply(code))
	} else {
		fmt.Fprintf(w, "answer %d", code)
	}
}

// Requests are the requests received so far, in arrival order.
func (s *Sink) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.got...)
}

// Await waits until ok holds of the requests received so far (checked at
// each arrival) and returns them; it fails t after testwait.Timeout,
// saying what it waited for.
func (s *Sink) Await(t testing.TB, what string, ok func([]Request) bool) []Request {
	t.Helper()
	timeout := time.After(testwait.Timeout) // a failure timeout
	for {
		s.mu.Lock()
		got, changed := append([]Request(nil), s.got...), s.changed
		s.mu.Unlock()
		if ok(got) {
			return got
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("sink: timed out waiting for %s (%d requests received)", what, len(got))
		}
	}
}

// Wait waits until the sink has received n requests in all and returns
// them.
func (s *Sink) Wait(t testing.TB, n int) []Request {
	t.Helper()
	return s.Await(t, fmt.Sprintf("%d requests", n), func(rs []Request) bool { return len(rs) >= n })
}

// Next waits for the next request Next has not returned yet, in arrival
// order, and returns it.
func (s *Sink) Next(t testing.TB) Request {
	t.Helper()
	s.mu.Lock()
	i := s.next
	s.mu.Unlock()
	rs := s.Await(t, fmt.Sprintf("request %d", i+1), func(rs []Request) bool { return len(rs) > i })
	s.mu.Lock()
	s.next = i + 1
	s.mu.Unlock()
	return rs[i]
}

// Pass lets one held request through (Options.Hold), now or when it comes.
func (s *Sink) Pass() { s.pass <- struct{}{} }

// Release lets every held request through, and every later one. It may
// be called again.
func (s *Sink) Release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.released:
	default:
		close(s.released)
	}
}

// MostInFlight is the most requests the sink held open at once.
func (s *Sink) MostInFlight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.most
}

// Count counts the requests received so far by the value of header
// (X-AnyHook-Delivery: the requests per delivery).
func (s *Sink) Count(header string) map[string]int {
	m := map[string]int{}
	for _, r := range s.Requests() {
		m[r.Header.Get(header)]++
	}
	return m
}
