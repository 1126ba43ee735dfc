package delivery

import (
	"math"
	"time"
)

// limiter is a token bucket for one destination's rate: it refills at
// rate tokens per second up to burst, and each request takes one. It is
// used by its dispatcher's goroutine only. The clock is injected.
type limiter struct {
	rate   float64 // tokens per second; 0: no limit
	burst  float64
	tokens float64
	last   time.Time
	now    func() time.Time
}

// newLimiter returns a bucket for rate requests per second holding a tenth
// of a second's worth (at least one), full at the start; rate 0 is
// unlimited.
func newLimiter(rate float64, now func() time.Time) *limiter {
	burst := math.Max(1, math.Floor(rate/10))
	return &limiter{rate: rate, burst: burst, tokens: burst, last: now(), now: now}
}

func (l *limiter) refill() {
	t := l.now()
	if el := t.Sub(l.last).Seconds(); el > 0 {
		l.tokens = math.Min(l.burst, l.tokens+el*l.rate)
	}
	l.last = t
}

// take takes up to n tokens and returns how many it got; with none, wait
// is how long until the next one.
func (l *limiter) take(n int) (got int, wait time.Duration) {
	if l == nil || l.rate <= 0 {
		return n, 0
	}
	l.refill()
	got = min(n, int(math.Floor(l.tokens)))
	l.tokens -= float64(got)
	if got == 0 {
		wait = time.Duration((1 - l.tokens) / l.rate * float64(time.Second))
		wait = max(wait, time.Millisecond)
	}
	return got, wait
}

// giveBack returns n unused tokens (a claim found fewer due deliveries
// than it was allowed).
func (l *limiter) giveBack(n int) {
	if l == nil || l.rate <= 0 || n <= 0 {
		return
	}
	l.tokens = math.Min(l.burst, l.tokens+float64(n))
}
