package bench

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// sink is the local destination: it answers 200 (after delay, when set)
// and records when each event of the current run first reached each
// destination (one path per destination: /d0, /d1, …).
type sink struct {
	srv   *http.Server
	url   string
	delay time.Duration
	dests int
	run   atomic.Pointer[sinkRun]
	other atomic.Int64 // arrivals that belong to no run
}

// sinkRun is one run's tally.
type sinkRun struct {
	prefix  string           // event ids: prefix_NNNNNNNN
	arrived [][]atomic.Int64 // [destination][event]: unix ns of the first arrival
	count   atomic.Int64     // first arrivals
	extra   atomic.Int64     // repeated arrivals (redeliveries)
	want    int64
	done    chan struct{} // closed when count reaches want
}

func newSink(dests int, delay time.Duration) (*sink, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &sink{url: "http://" + ln.Addr().String(), delay: delay, dests: dests}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln)
	return s, nil
}

// expect starts a run of events events whose ids start with prefix.
func (s *sink) expect(prefix string, events int) *sinkRun {
	r := &sinkRun{prefix: prefix + "_", arrived: make([][]atomic.Int64, s.dests),
		want: int64(events * s.dests), done: make(chan struct{})}
	for i := range r.arrived {
		r.arrived[i] = make([]atomic.Int64, events)
	}
	if r.want == 0 {
		close(r.done)
	}
	s.run.Store(r)
	return r
}

func (s *sink) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	io.Copy(io.Discard, req.Body)
	now := time.Now().UnixNano()
	if s.delay > 0 {
		time.Sleep(s.delay)
	}
	w.WriteHeader(http.StatusOK)
	r := s.run.Load()
	if r == nil {
		s.other.Add(1)
		return
	}
	d, err := strconv.Atoi(strings.TrimPrefix(req.URL.Path, "/d"))
	rest, ok := strings.CutPrefix(req.Header.Get("X-AnyHook-Event-Id"), r.prefix)
	i, ierr := eventIndex(rest)
	if err != nil || d < 0 || d >= len(r.arrived) || !ok || ierr != nil || i < 0 || i >= len(r.arrived[d]) {
		s.other.Add(1)
		return
	}
	if !r.arrived[d][i].CompareAndSwap(0, now) {
		r.extra.Add(1)
		return
	}
	if r.count.Add(1) == r.want {
		close(r.done)
	}
}
