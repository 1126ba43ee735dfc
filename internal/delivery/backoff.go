package delivery

import (
	"math"
	"time"
)

// Backoff is the delay before the attempt after attempt number n (1-based)
// failed: initial·2^(n-1), capped at max, with "equal jitter": the result is
// uniform in [d/2, d) for r uniform in [0, 1). A pure function of its
// arguments, so the schedule is table-tested.
func Backoff(n int, initial, max time.Duration, r float64) time.Duration {
	if n < 1 {
		n = 1
	}
	d := max
	if exp := math.Ldexp(float64(initial), n-1); exp < float64(max) {
		d = time.Duration(exp)
	}
	half := d / 2
	return half + time.Duration(r*float64(d-half))
}

// RetryDelay is the delay before the next attempt: the server's
// Retry-After when it gave one (at most max), else Backoff.
func RetryDelay(n int, initial, max, retryAfter time.Duration, r float64) time.Duration {
	if retryAfter > 0 {
		return min(retryAfter, max)
	}
	return Backoff(n, initial, max, r)
}
