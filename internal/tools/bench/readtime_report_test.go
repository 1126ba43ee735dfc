package bench

import (
	"strings"
	"testing"
	"time"
)

// TestFillReportSize: the text report gives the store's size per recorded
// event and what its percentiles are of, so that a reader can check the
// docs' sizing table against it.
func TestFillReportSize(t *testing.T) {
	var b strings.Builder
	(&FillReport{Database: "sqlite", Added: 1000, Events: 980, StoreBytes: 3_030_000, Repeat: 3}).write(&b, false)
	for _, want := range []string{"980 events recorded (1000 added", "disk: 0.00 GB", "(3.09 KB per recorded event)", "of 3 warm requests", "p95 is the slowest", `"ci paused:" requests ran with destination ci paused`} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	(&FillReport{Database: "postgres", Added: 10, Events: 10, Repeat: 3}).write(&b, false)
	if strings.Contains(b.String(), "disk:") {
		t.Errorf("a PostgreSQL report claims a file size:\n%s", b.String())
	}
}

// TestFillReportGoal: the text report gives each request's URL, to send
// it again, and says which requests are over the goal.
func TestFillReportGoal(t *testing.T) {
	var b strings.Builder
	(&FillReport{Database: "sqlite", Events: 5000, Repeat: 3, Requests: []ReadTiming{
		{Name: "fast", URL: "/api/events", Status: 200, P50MS: 1, P95MS: 2},
		{Name: "slow", URL: "/api/events?status=dead", Status: 200, P50MS: 90, P95MS: 140.5},
	}}).write(&b, false)
	for _, want := range []string{"/api/events?status=dead\n", "goal, p95 within 100 ms at ten million events; here at 5000: 1 of 2 requests within; over: slow (140.5 ms)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

// TestFillNearestRank: the p95 of the fill's few warm requests is the
// slowest of them (it was the middle of three, the same as the p50), and
// of 20 the 19th.
func TestFillNearestRank(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var ds []time.Duration
		for _, n := range ns {
			ds = append(ds, time.Duration(n)*time.Millisecond)
		}
		return ds
	}
	three := ms(1, 2, 300)
	if p50, p95 := nearestRank(three, 50), nearestRank(three, 95); p50 != 2*time.Millisecond || p95 != 300*time.Millisecond {
		t.Errorf("of 1, 2, 300 ms: p50 %v, p95 %v; want 2ms, 300ms", p50, p95)
	}
	var twenty []int
	for i := 1; i <= 20; i++ {
		twenty = append(twenty, i)
	}
	if got := nearestRank(ms(twenty...), 95); got != 19*time.Millisecond {
		t.Errorf("of 1..20 ms: p95 %v, want 19ms", got)
	}
	if got := nearestRank(nil, 95); got != 0 {
		t.Errorf("of none: %v", got)
	}
}
