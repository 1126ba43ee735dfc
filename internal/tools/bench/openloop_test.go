package bench

import (
	"testing"
	"time"
)

// The open loop, and the durable floor on the same schedule beside it:
// every request answered and every accepted event delivered, by both.
func TestBenchOpenLoopAndFloor(t *testing.T) {
	t.Parallel()
	rep := runBench(t, "--provider", "generic", "--events", "30", "--concurrency", "4", "--warmup", "0", "--no-baseline",
		"--ingest-rate", "100", "--duration", "1s")
	for name, ol := range map[string]*OpenLoop{"gateway": rep.OpenLoop, "floor": rep.OpenLoopFloor} {
		if ol == nil {
			t.Fatalf("%s: no open-loop figures", name)
		}
		if ol.Sent != 100 || ol.Accepted != 100 || ol.Delivered != 100 || ol.Errors != 0 || ol.Rate != 100 {
			t.Errorf("%s: %+v, want 100 sent, accepted and delivered at 100/s", name, ol)
		}
		if ol.P50MS <= 0 || ol.MaxMS < ol.P99MS || ol.CPUPerEventUS <= 0 {
			t.Errorf("%s: figures %+v", name, ol)
		}
	}
}

func TestBenchNoFloor(t *testing.T) {
	t.Parallel()
	rep := runBench(t, "--provider", "generic", "--events", "10", "--concurrency", "2", "--warmup", "0", "--no-baseline",
		"--ingest-rate", "50", "--duration", "200ms", "--no-floor")
	if rep.OpenLoop == nil || rep.OpenLoop.Accepted != 10 || rep.OpenLoopFloor != nil {
		t.Errorf("open loop %+v, floor %+v", rep.OpenLoop, rep.OpenLoopFloor)
	}
}

// A stall is measured while something is outstanding: from the later of
// the previous answer and the earliest due of what is still unanswered.
func TestLongestStall(t *testing.T) {
	ms := time.Millisecond
	rs := []sent{
		{due: 0, done: 2 * ms},
		{due: 10 * ms, done: 11 * ms},
		// Due at 20 and 30, answered at 45 and 44: nothing came back
		// from 20 to 44.
		{due: 20 * ms, done: 45 * ms},
		{due: 30 * ms, done: 44 * ms},
		{due: 50 * ms, done: 51 * ms},
	}
	got, at := longestStall(rs)
	if got != 24*ms || at != 20*ms {
		t.Errorf("longestStall = %v at %v, want 24ms at 20ms", got, at)
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string][2]float64{"": {0, 0}, "655": {655, 0}, "50%": {0, 0.5}, "200 %": {0, 2}} {
		r, s, err := parseRate(in)
		if err != nil || r != want[0] || s != want[1] {
			t.Errorf("parseRate(%q) = %v, %v, %v; want %v", in, r, s, err, want)
		}
	}
	for _, in := range []string{"x", "0", "-5", "0%", "2000%", "%"} {
		if _, _, err := parseRate(in); err == nil {
			t.Errorf("parseRate(%q) took it", in)
		}
	}
}
