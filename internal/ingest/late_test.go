package ingest

import (
	"testing"
	"time"
)

// A window is late when one in ten of its requests, and at least three,
// took longer than the bound behind a queue; its verdict holds for one
// window after it ends, and until the queue drains.
func TestLateness(t *testing.T) {
	t0 := time.Unix(1000, 0)
	bound := 50 * time.Millisecond
	slow := bound + time.Millisecond
	for _, tc := range []struct {
		name       string
		fast, slow int
		queued     bool
		late       bool
	}{
		{"one in ten", 27, 3, true, true},
		{"fewer than one in ten", 28, 3, true, false},
		{"too few to tell", 0, 2, true, false},
		{"on time", 100, 0, true, false},
		{"slow with no queue ahead (a slow disk)", 0, 30, false, false},
	} {
		l := lateness{epoch: t0} // the first request recorded opens a window
		for i := range tc.fast + tc.slow {
			took := time.Millisecond
			if i < tc.slow {
				took = slow
			}
			l.recorded(t0.Add(time.Duration(i)*time.Millisecond/2), took, bound, tc.queued)
		}
		if l.late(t0.Add(99 * time.Millisecond)) {
			t.Errorf("%s: late before the window ended", tc.name)
		}
		end := t0.Add(lateWindow)
		l.recorded(end, time.Millisecond, bound, true) // ends the window, opens the next
		if got := l.late(end); got != tc.late {
			t.Errorf("%s: late %v, want %v", tc.name, got, tc.late)
		}
		if tc.late && l.late(end.Add(lateWindow+time.Nanosecond)) {
			t.Errorf("%s: still late a window after", tc.name)
		}
	}

	lateAt := func(at time.Time) *lateness {
		l := &lateness{epoch: t0}
		for i := range 10 {
			l.recorded(at.Add(time.Duration(i)*time.Millisecond), slow, bound, true)
		}
		return l
	}
	// A late window whose end was seen only a second later (a burst,
	// then nothing) does not judge what comes then.
	l := lateAt(t0)
	later := t0.Add(time.Second)
	l.recorded(later, time.Millisecond, bound, true)
	if l.late(later) {
		t.Error("a late burst a second ago judges a request now")
	}
	// A queue that drains was a burst: the verdict goes, and so do the
	// window's counts.
	l = lateAt(t0)
	end := t0.Add(lateWindow)
	l.recorded(end, time.Millisecond, bound, true)
	l.drained(end)
	if l.late(end) {
		t.Error("late after the queue drained")
	}
	l = lateAt(t0)
	l.drained(t0.Add(50 * time.Millisecond))
	l.recorded(end, time.Millisecond, bound, true)
	if l.late(end) {
		t.Error("the late requests before the queue drained were counted after it")
	}
	// A clock stepped back an hour (Now without a monotonic reading)
	// neither holds the verdict for the hour nor keeps the window open.
	l = lateAt(t0.Add(time.Hour))
	end = t0.Add(time.Hour + lateWindow)
	l.recorded(end, time.Millisecond, bound, true)
	if !l.late(end) {
		t.Fatal("not late after a late window")
	}
	if l.late(t0) {
		t.Error("a verdict held by a clock stepped back an hour")
	}
	l = lateAt(t0.Add(time.Hour))
	for i := range 100 {
		l.recorded(t0.Add(time.Duration(i)*time.Millisecond), time.Millisecond, bound, true)
	}
	if l.late(t0.Add(100 * time.Millisecond)) {
		t.Error("the window before a step back of the clock judged the requests after it")
	}
	l = lateAt(t0.Add(time.Hour))
	for i := range 10 { // late, after the step
		l.recorded(t0.Add(time.Duration(i)*time.Millisecond), slow, bound, true)
	}
	l.recorded(t0.Add(lateWindow+10*time.Millisecond), time.Millisecond, bound, true)
	if !l.late(t0.Add(lateWindow + 10*time.Millisecond)) {
		t.Error("a late window after a step back of the clock was not judged")
	}
}
