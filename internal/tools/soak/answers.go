package soak

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Fault windows: the kinds of injected fault during which an ingest answer
// may legitimately be a 5xx, missing or slow. A kill -9 (from the kill
// until the gateway listens again: its requests get no answer, and the
// others may wait on locks its dead transactions held), a database cut
// (until the connections are let through again: a 503 is the right
// answer) and a database stall (until its replies flow again: every
// answer waits for the database). Destination faults open no window:
// ingest never waits on a destination, so a 5xx or a slow answer during
// one is a defect.
const (
	faultKill  = "kill -9 gateway"
	faultCut   = "database connection cut"
	faultStall = "database stall"
)

// faultGrace extends every window past its end: connections that were cut
// are noticed on their next use, a restarted gateway takes its first
// requests.
const faultGrace = 2 * time.Second

type window struct {
	kind       string
	start, end time.Time // end is zero while the fault lasts
}

// windows are the fault windows, in order; faults are injected one at a
// time, so they do not overlap.
type windows struct {
	mu sync.Mutex
	ws []window
}

// open starts a window of kind now and returns the function that ends it.
func (w *windows) open(kind string) (end func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ws = append(w.ws, window{kind: kind, start: time.Now()})
	i := len(w.ws) - 1
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.ws[i].end = time.Now()
	}
}

// during is the kind of a window that the interval [start, end] of a
// request overlaps (extended by faultGrace), "" when none.
func (w *windows) during(start, end time.Time) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.ws) - 1; i >= 0; i-- {
		win := w.ws[i]
		if !win.end.IsZero() && win.end.Add(faultGrace).Before(start) {
			return "" // this one and every earlier one ended before the request began
		}
		if !win.start.After(end) {
			return win.kind
		}
	}
	return ""
}

// tally counts the answers on one side of the fault windows.
type tally struct {
	answers   int
	status5xx map[int]int    // 5xx answers by status
	byFault   map[string]int // 5xx and missing answers by fault kind (inside windows only)
	noAnswer  int            // no HTTP answer (connection refused or reset, timeout)
	slow      int            // took longer than --slow (answered or not)
	max       time.Duration
}

func (t *tally) fivexx() int {
	n := 0
	for _, c := range t.status5xx {
		n += c
	}
	return n
}

// answers records every ingest request the soak sends (the load's and the
// stress bursts'): its status and latency, inside or outside a fault
// window.
type answers struct {
	win  *windows
	slow time.Duration // 0: no limit

	mu        sync.Mutex
	inside    tally
	outside   tally
	latencies []time.Duration // of the answers outside fault windows
	examples  []string        // the first few 5xx, missing or slow answers outside fault windows
}

func newAnswers(win *windows, slow time.Duration) *answers {
	return &answers{
		win: win, slow: slow,
		inside:  tally{status5xx: map[int]int{}, byFault: map[string]int{}},
		outside: tally{status5xx: map[int]int{}, byFault: map[string]int{}},
	}
}

// record notes one request sent at start and finished at end with an HTTP
// status (0: no answer; err says why).
func (a *answers) record(start, end time.Time, gateway, source string, code int, err error) {
	took := end.Sub(start)
	fault := a.win.during(start, end)
	a.mu.Lock()
	defer a.mu.Unlock()
	t := &a.outside
	if fault != "" {
		t = &a.inside
	} else {
		a.latencies = append(a.latencies, took)
	}
	t.answers++
	t.max = max(t.max, took)
	bad := ""
	switch {
	case code == 0:
		t.noAnswer++
		bad = fmt.Sprintf("no answer (%v)", err)
	case code >= 500:
		t.status5xx[code]++
		bad = fmt.Sprintf("%d", code)
	}
	if bad != "" && fault != "" {
		t.byFault[fault]++
	}
	if a.slow > 0 && took > a.slow {
		t.slow++
		if bad == "" {
			bad = "slow"
		}
	}
	if bad != "" && fault == "" && len(a.examples) < 10 {
		a.examples = append(a.examples, fmt.Sprintf("%s %s at %s: %s after %s",
			gateway, source, start.Format("15:04:05.000"), bad, took.Round(time.Millisecond)))
	}
}

// answerReport is what the report shows of the answers.
type answerReport struct {
	slow            time.Duration
	inside, outside tally
	p50, p99        time.Duration // outside fault windows
	outsideExamples []string
}

func (a *answers) report() answerReport {
	a.mu.Lock()
	defer a.mu.Unlock()
	r := answerReport{slow: a.slow, inside: a.inside, outside: a.outside, outsideExamples: slices.Clone(a.examples)}
	if n := len(a.latencies); n > 0 {
		l := slices.Clone(a.latencies)
		slices.Sort(l)
		r.p50, r.p99 = l[(n+1)/2-1], l[(n*99+99)/100-1] // nearest rank
	}
	return r
}

// failed reports whether an answer outside every fault window was a 5xx,
// missing or slow.
func (r *answerReport) failed() bool {
	return r.outside.fivexx() > 0 || r.outside.noAnswer > 0 || r.outside.slow > 0
}

func statusList(m map[int]int) string {
	if len(m) == 0 {
		return "none"
	}
	codes := make([]int, 0, len(m))
	for c := range m {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	parts := make([]string, len(codes))
	for i, c := range codes {
		parts[i] = fmt.Sprintf("%d: %d", c, m[c])
	}
	return strings.Join(parts, ", ")
}

func kindList(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for k, n := range m {
		parts = append(parts, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
