package soak

import (
	"errors"
	"io"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	t.Parallel()
	o, err := parse([]string{"--binary", "/bin/true"}, io.Discard)
	if err != nil || o.duration != 2*time.Minute || o.gateways != 1 || o.rate != 40 || o.stress != time.Second || o.slow != 2*time.Second {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	o, err = parse([]string{"--binary", "/bin/true", "--database", "postgres://x@h/db", "--stress", "0", "--slow", "0"}, io.Discard)
	if err != nil || o.gateways != 2 || o.stress != 0 || o.slow != 0 {
		t.Fatalf("postgres: %+v, %v", o, err)
	}
	for _, bad := range [][]string{{"--duration", "0s"}, {"--rate", "0"}, {"--database", "sqlite:x.db"}, {"extra"}, {"--stress", "-1s"}, {"--slow", "-1s"}} {
		if _, err := parse(append(bad, "--binary", "/bin/true"), io.Discard); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}

// An answer is inside a fault window when the request's interval overlaps
// the window or its grace; 5xx, missing and slow answers outside every
// window fail the soak.
func TestAnswersFaultWindows(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	w := &windows{ws: []window{
		{kind: faultCut, start: at(10 * time.Second), end: at(12 * time.Second)},
		{kind: faultKill, start: at(30 * time.Second), end: at(31 * time.Second)},
		{kind: faultCut, start: at(50 * time.Second)}, // still open
	}}
	for _, c := range []struct {
		start, end time.Duration
		want       string
	}{
		{0, time.Second, ""},
		{9 * time.Second, 10 * time.Second, faultCut},             // ends as the cut begins
		{11 * time.Second, 11*time.Second + 1, faultCut},          // inside
		{12*time.Second + faultGrace, 15 * time.Second, faultCut}, // begins at the end of the grace
		{12*time.Second + faultGrace + 1, 15 * time.Second, ""},   // begins after it
		{25 * time.Second, 40 * time.Second, faultKill},           // spans the kill
		{40 * time.Second, 49 * time.Second, ""},
		{49 * time.Second, 60 * time.Second, faultCut}, // the open window
		{70 * time.Second, 71 * time.Second, faultCut},
	} {
		if got := w.during(at(c.start), at(c.end)); got != c.want {
			t.Errorf("request %s–%s: during %q, want %q", c.start, c.end, got, c.want)
		}
	}

	a := newAnswers(w, time.Second)
	a.record(at(0), at(10*time.Millisecond), "g", "stripe", 200, nil)
	a.record(at(11*time.Second), at(11*time.Second+5*time.Millisecond), "g", "stripe", 503, nil)           // during the cut: expected
	a.record(at(30*time.Second), at(34*time.Second), "g", "stripe", 0, errors.New("connection refused"))   // during the kill
	a.record(at(40*time.Second), at(40*time.Second+time.Millisecond), "g", "stripe", 503, nil)             // outside: a defect
	a.record(at(41*time.Second), at(41*time.Second+1500*time.Millisecond), "g", "stripe", 200, nil)        // outside and slow
	a.record(at(42*time.Second), at(42*time.Second+time.Millisecond), "g", "stripe", 0, errors.New("EOF")) // outside, no answer
	r := a.report()
	if r.outside.answers != 4 || r.outside.fivexx() != 1 || r.outside.status5xx[503] != 1 || r.outside.slow != 1 || r.outside.noAnswer != 1 || !r.failed() {
		t.Errorf("outside: %+v", r.outside)
	}
	if r.inside.answers != 2 || r.inside.fivexx() != 1 || r.inside.noAnswer != 1 || r.inside.slow != 1 || r.inside.byFault[faultCut] != 1 || r.inside.byFault[faultKill] != 1 {
		t.Errorf("inside: %+v", r.inside)
	}
	if r.outside.max != 1500*time.Millisecond || r.p99 != 1500*time.Millisecond || len(r.outsideExamples) != 3 {
		t.Errorf("max %s, p99 %s, examples %q", r.outside.max, r.p99, r.outsideExamples)
	}

	// Without a slow limit nothing is slow.
	b := newAnswers(&windows{}, 0)
	b.record(at(0), at(5*time.Second), "g", "stripe", 200, nil)
	if r := b.report(); r.outside.slow != 0 || r.failed() {
		t.Errorf("no slow limit: %+v", r.outside)
	}
}
