package delivery

import (
	"testing"
	"time"

	"github.com/anyhook/anyhook"
)

func TestHealthStreaks(t *testing.T) {
	t.Parallel()
	h := newHealth(3)
	t0 := time.Unix(1_700_000_000, 0)
	var failing, recovered int
	step := func(ok bool, i int) {
		_, f, r := h.record("billing", ok, "HTTP 500", t0.Add(time.Duration(i)*time.Second))
		if f {
			failing++
		}
		if r {
			recovered++
		}
	}
	for i := range 100 {
		step(false, i)
	}
	if failing != 1 || recovered != 0 {
		t.Fatalf("after 100 failures: failing %d, recovered %d; want 1, 0", failing, recovered)
	}
	got := h.snapshot()["billing"]
	if got.Streak != 100 || !got.Failing || !got.Since.Equal(t0) || got.LastError != "HTTP 500" {
		t.Fatalf("health %+v", got)
	}
	step(true, 100)
	step(true, 101)
	if recovered != 1 {
		t.Fatalf("recovered %d times, want once", recovered)
	}
	// Two failures stay under the threshold: no alert, no recovery.
	step(false, 102)
	step(false, 103)
	step(true, 104)
	if failing != 1 || recovered != 1 {
		t.Fatalf("short blip: failing %d, recovered %d; want 1, 1", failing, recovered)
	}
	if got := h.snapshot()["billing"]; got.Streak != 0 || got.Failing || !got.LastSuccess.Equal(t0.Add(104*time.Second)) {
		t.Fatalf("health after success %+v", got)
	}
}

// Health's last error (the overview, the log) says whether the handler
// may have run.
func TestHealthErrorSaysOutcome(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a    anyhook.Attempt
		want string
	}{
		{anyhook.Attempt{Error: "timeout after 2s", Outcome: anyhook.OutcomeNoAnswer}, "timeout after 2s (sent, no answer: the handler may have run)"},
		{anyhook.Attempt{Error: "dial tcp: connection refused", Outcome: anyhook.OutcomeNotSent}, "dial tcp: connection refused (not sent: the handler did not run)"},
		{anyhook.Attempt{Error: "HTTP 503", StatusCode: 503, Outcome: anyhook.OutcomeAnswered}, "HTTP 503"},
	} {
		if got := errorWithOutcome(tc.a); got != tc.want {
			t.Errorf("errorWithOutcome(%+v) = %q, want %q", tc.a, got, tc.want)
		}
	}
}
