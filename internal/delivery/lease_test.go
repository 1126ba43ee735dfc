package delivery

import (
	"testing"
	"time"
)

// The deadline arithmetic on an injected clock: a claim asked for at
// asked must have ended its attempt by asked + lease - margin; it is sent
// with the destination's timeout or what is left, whichever is less, and
// released when less than min(timeout, 1 s) is left (or half of what a
// very short lease allows at best).
func TestSendTimeout(t *testing.T) {
	t.Parallel()
	asked := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	ms := time.Millisecond
	for _, c := range []struct {
		name           string
		timeout, grace time.Duration
		after          time.Duration // from asked to the send
		want           time.Duration // the send's timeout; 0: released
	}{
		// timeout 3s, grace 1s: lease 4s, margin 400ms, deadline +3.6s.
		{"at once", 3 * time.Second, time.Second, 0, 3 * time.Second},
		{"the timeout still fits", 3 * time.Second, time.Second, 600 * ms, 3 * time.Second},
		{"capped", 3 * time.Second, time.Second, time.Second, 2600 * ms},
		{"a second left", 3 * time.Second, time.Second, 2600 * ms, time.Second},
		{"just under a second left", 3 * time.Second, time.Second, 2600*ms + 1, 0},
		{"stalled past the lease", 3 * time.Second, time.Second, 5 * time.Second, 0},
		// The defaults, timeout 15s and grace 5s: lease 20s, margin 2s.
		{"defaults", 15 * time.Second, 5 * time.Second, 0, 15 * time.Second},
		{"defaults, capped", 15 * time.Second, 5 * time.Second, 3500 * ms, 14500 * ms},
		{"defaults, released", 15 * time.Second, 5 * time.Second, 17*time.Second + 1, 0},
		// A timeout long against the grace: lease 125s, margin 12.5s, so
		// even a fresh claim's attempt ends 12.5 s before its lease.
		{"long timeout", 120 * time.Second, 5 * time.Second, 0, 112500 * ms},
		// A timeout under a second: that much must be left.
		{"short timeout", 400 * ms, time.Second, 750 * ms, 400 * ms},
		{"short timeout, released", 400 * ms, time.Second, 750*ms + 1, 0},
		// A tiny lease (300ms): margin 150ms, half of it, and at least
		// 75ms must be left, half of what a claim has at best.
		{"tiny lease", 200 * ms, 100 * ms, 0, 150 * ms},
		{"tiny lease, late", 200 * ms, 100 * ms, 75 * ms, 75 * ms},
		{"tiny lease, released", 200 * ms, 100 * ms, 75*ms + 1, 0},
	} {
		e := New(nil, Options{Grace: c.grace})
		d := &Destination{Name: "d", Timeout: c.timeout}
		got, ok := e.sendTimeout(d, e.deadline(d, asked), asked.Add(c.after))
		switch {
		case c.want == 0 && ok:
			t.Errorf("%s: sent with timeout %v, want released", c.name, got)
		case c.want != 0 && (!ok || got != c.want):
			t.Errorf("%s: timeout %v, sent %v; want %v", c.name, got, ok, c.want)
		}
		// Whatever is sent ends before the lease does, with the margin.
		if lease := e.Lease(d); ok && c.after+got > lease-leaseMargin(lease) {
			t.Errorf("%s: an attempt sent %v after the claim with timeout %v outlives its lease %v less the margin", c.name, c.after, got, lease)
		}
	}
}
