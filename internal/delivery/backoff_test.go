package delivery

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	const s, h = time.Second, time.Hour
	tests := []struct {
		n            int
		initial, max time.Duration
		r            float64
		want         time.Duration
	}{
		{1, 5 * s, 2 * h, 0, 2500 * time.Millisecond},
		{1, 5 * s, 2 * h, 0.5, 3750 * time.Millisecond},
		{2, 5 * s, 2 * h, 0, 5 * s},
		{3, 5 * s, 2 * h, 0, 10 * s},
		{4, 5 * s, 2 * h, 0.999999, 40*s - 20*time.Microsecond}, // 5s·2³ = 40s; r→1 gives just under it
		{12, 5 * s, 2 * h, 0, h},                                // 5s·2^11 = 10240s, capped at 2h, halved
		{200, 5 * s, 2 * h, 0.5, 90 * time.Minute},              // no overflow far out
		{0, 100 * time.Millisecond, s, 0, 50 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := Backoff(tt.n, tt.initial, tt.max, tt.r); got != tt.want {
			t.Errorf("Backoff(%d, %v, %v, %v) = %v, want %v", tt.n, tt.initial, tt.max, tt.r, got, tt.want)
		}
	}
}

func TestBackoffNeverExceedsMax(t *testing.T) {
	for n := 1; n < 80; n++ {
		for _, r := range []float64{0, 0.3, 0.999} {
			if got := Backoff(n, 7*time.Millisecond, time.Minute, r); got > time.Minute || got <= 0 {
				t.Fatalf("Backoff(%d, …, %v) = %v, outside (0, 1m]", n, r, got)
			}
		}
	}
}

func TestRetryDelay(t *testing.T) {
	if got := RetryDelay(1, time.Second, time.Minute, 30*time.Second, 0); got != 30*time.Second {
		t.Errorf("Retry-After 30s: %v", got)
	}
	if got := RetryDelay(1, time.Second, time.Minute, time.Hour, 0); got != time.Minute {
		t.Errorf("Retry-After over max: %v, want capped at 1m", got)
	}
	if got := RetryDelay(2, time.Second, time.Minute, 0, 0); got != time.Second {
		t.Errorf("no Retry-After: %v, want the backoff", got)
	}
}
