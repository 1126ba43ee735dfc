package soak

import (
	"hash/fnv"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anyhook/anyhook/internal/delivery/deliverytest"
)

// Destination modes.
const (
	modeOK   int32 = iota // 200
	modeFail              // 500 at once
	modeHang              // never answers: the gateway's timeout ends it
)

// sink is a destination that records every request it answered 2xx, by
// X-AnyHook-Delivery, and what it had in flight (overlaps, and in order
// inversions).
type sink struct {
	name     string
	url      string
	srv      *http.Server
	mode     atomic.Int32
	ordered  bool // order: per_object
	inFlight deliverytest.InFlight

	mu        sync.Mutex
	delivered map[string][]string        // X-AnyHook-Delivery -> X-AnyHook-Attempt of each 2xx
	byEvent   map[string]map[string]bool // source + " " + X-AnyHook-Event-Id -> delivery ids
	requests  int
	refused   int // answered 500 or left hanging on purpose
}

// slowFirst is how long a destination takes to answer the first attempt
// of every other delivery (but at the ordered destination the hot
// object's, which come too often to be served that slowly one at a
// time): long enough that an attempt sent after its lease would still be
// in flight when the rescuer's attempt of its delivery arrives, and in
// order the object's next version delivered before it ends; short of the
// 3 s timeout.
const slowFirst = 1500 * time.Millisecond

// slowAnswer reports whether r is one of the requests answered after
// slowFirst.
func (s *sink) slowAnswer(r *http.Request) bool {
	if r.Header.Get("X-AnyHook-Attempt") != "1" || (s.ordered && r.Header.Get("X-AnyHook-Object") == hotObject) {
		return false
	}
	h := fnv.New32a()
	h.Write([]byte(r.Header.Get("X-AnyHook-Delivery")))
	return h.Sum32()%2 == 0
}

func newSink(name string, ordered bool) (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &sink{name: name, url: "http://" + ln.Addr().String(), ordered: ordered, inFlight: deliverytest.InFlight{Ordered: ordered},
		delivered: map[string][]string{}, byEvent: map[string]map[string]bool{}}
	s.srv = &http.Server{Handler: s}
	go s.srv.Serve(ln)
	return s, nil
}

func (s *sink) close() { s.srv.Close() }

func (s *sink) setMode(m int32) { s.mode.Store(m) }

func (s *sink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	end := s.inFlight.Begin(r) // reads the body
	s.mu.Lock()
	s.requests++
	s.mu.Unlock()
	switch s.mode.Load() {
	case modeFail:
		s.mu.Lock()
		s.refused++
		s.mu.Unlock()
		end(false)
		http.Error(w, "soak: failing on purpose", http.StatusInternalServerError)
		return
	case modeHang:
		s.mu.Lock()
		s.refused++
		s.mu.Unlock()
		<-r.Context().Done()
		end(false)
		return
	}
	// A little latency keeps some deliveries in flight when a gateway is
	// killed: the crash window claim-then-commit is about.
	latency := time.Duration(rand.IntN(50)) * time.Millisecond
	if s.slowAnswer(r) {
		latency = slowFirst
	}
	select {
	case <-time.After(latency):
	case <-r.Context().Done():
	}
	if r.Context().Err() != nil {
		end(false)
		return // the gateway gave up (timeout) or died: it will not see an answer
	}
	id := r.Header.Get("X-AnyHook-Delivery")
	key := r.Header.Get("X-AnyHook-Source") + " " + r.Header.Get("X-AnyHook-Event-Id")
	s.mu.Lock()
	s.delivered[id] = append(s.delivered[id], r.Header.Get("X-AnyHook-Attempt"))
	if s.byEvent[key] == nil {
		s.byEvent[key] = map[string]bool{}
	}
	s.byEvent[key][id] = true
	s.mu.Unlock()
	end(true)
	w.WriteHeader(http.StatusOK)
}

// got reports whether the delivery id was answered 2xx.
func (s *sink) got(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.delivered[id]) > 0
}

// duplicates are the delivery ids answered 2xx more than once, with the
// attempt numbers, and the provider events that arrived under more than
// one delivery id.
func (s *sink) duplicates() (map[string][]string, map[string][]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	twice := map[string][]string{}
	for id, a := range s.delivered {
		if len(a) > 1 {
			twice[id] = append([]string(nil), a...)
		}
	}
	split := map[string][]string{}
	for key, ids := range s.byEvent {
		if len(ids) > 1 {
			for id := range ids {
				split[key] = append(split[key], id)
			}
		}
	}
	return twice, split
}

func (s *sink) counts() (requests, refused, delivered int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests, s.refused, len(s.delivered)
}
