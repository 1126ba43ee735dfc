package backfilltest

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// server is what every fake shares: its URL on 127.0.0.1, the lock over
// its state, and the count of requests that RateLimit schedules against.
type server struct {
	URL string

	mu sync.Mutex
	// limited: the request numbers (1-based) answered as rate limited.
	limited  map[int]bool
	requests int
}

// start serves h on 127.0.0.1 until the test ends.
func (s *server) start(t testing.TB, h http.HandlerFunc) {
	s.limited = map[int]bool{}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	s.URL = srv.URL
}

// RateLimit makes the n-th request from now (1: the next) answer as the
// provider's rate limit does (each fake's doc says how).
func (s *server) RateLimit(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limited[s.requests+n] = true
}
