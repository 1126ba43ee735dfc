package procs

import (
	"math"
	"runtime/debug"
	"testing"
)

// TestTuneGC: the target is raised unless GOGC is set, and no memory
// limit is set when GOMEMLIMIT is. Not parallel: the collector's settings
// are the process's.
func TestTuneGC(t *testing.T) {
	was := debug.SetGCPercent(100)
	wasLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(was)
		debug.SetMemoryLimit(wasLimit)
	})

	t.Setenv("GOGC", "150")
	if percent, limit := TuneGC(); percent != 0 || limit != 0 {
		t.Errorf("GOGC=150: TuneGC = %d, %d; want 0, 0", percent, limit)
	}
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC=150: the target became %d; want it left at 100", got)
	}

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(math.MaxInt64)
	if percent, limit := TuneGC(); percent != GCPercent || limit != 0 {
		t.Errorf("GOMEMLIMIT set: TuneGC = %d, %d; want %d, 0", percent, limit, GCPercent)
	}
	if got := debug.SetGCPercent(100); got != GCPercent {
		t.Errorf("no GOGC: the target is %d; want %d", got, GCPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("GOMEMLIMIT set: the memory limit became %d; want it left alone", got)
	}
}
