package procs

import (
	"errors"
	"math"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// TestTuneGC: the target is raised unless GOGC is set; a memory limit is
// set from the cgroup's only then, and not when GOMEMLIMIT is set. Not
// parallel: the collector's settings and cgroupLimit are the process's.
func TestTuneGC(t *testing.T) {
	was := debug.SetGCPercent(100)
	wasLimit := debug.SetMemoryLimit(-1)
	wasCgroup := cgroupLimit
	t.Cleanup(func() {
		debug.SetGCPercent(was)
		debug.SetMemoryLimit(wasLimit)
		cgroupLimit = wasCgroup
	})
	const gib = 1 << 30
	broken := errors.New("no cgroup2 mount")
	for _, c := range []struct {
		name        string
		gogc, limit string // the environment
		cgroup      memlimit.Provider
		wantPercent int
		wantLimit   int64 // returned, and the runtime's after
		wantErr     error
	}{
		{"GOGC set", "150", "", memlimit.Limit(gib), 0, 0, nil},
		{"GOMEMLIMIT set", "", "1GiB", memlimit.Limit(4 * gib), GCPercent, 0, nil},
		{"a cgroup limit", "", "", memlimit.Limit(gib), GCPercent, gib * 3 / 4, nil},
		{"no cgroup limit", "", "", func() (uint64, error) { return 0, memlimit.ErrNoLimit }, GCPercent, 0, nil},
		{"not in a cgroup", "", "", func() (uint64, error) { return 0, memlimit.ErrCgroupsNotSupported }, GCPercent, 0, nil},
		{"an unreadable cgroup", "", "", func() (uint64, error) { return 0, broken }, GCPercent, 0, broken},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GOGC", c.gogc)
			t.Setenv("GOMEMLIMIT", c.limit)
			cgroupLimit = c.cgroup
			debug.SetGCPercent(100)
			// What the runtime's limit is before: GOMEMLIMIT's value
			// when it is set, else none.
			before := int64(math.MaxInt64)
			if c.limit != "" {
				before = gib
			}
			debug.SetMemoryLimit(before)

			percent, limit, err := TuneGC()
			if percent != c.wantPercent || limit != c.wantLimit || !errors.Is(err, c.wantErr) {
				t.Errorf("TuneGC = %d, %d, %v; want %d, %d, %v", percent, limit, err, c.wantPercent, c.wantLimit, c.wantErr)
			}
			wantGC := 100
			if c.wantPercent != 0 {
				wantGC = c.wantPercent
			}
			if got := debug.SetGCPercent(100); got != wantGC {
				t.Errorf("the collector's target is %d; want %d", got, wantGC)
			}
			wantRuntime := before
			if c.wantLimit != 0 {
				wantRuntime = c.wantLimit
			}
			if got := debug.SetMemoryLimit(-1); got != wantRuntime {
				t.Errorf("the runtime's memory limit is %d; want %d", got, wantRuntime)
			}
		})
	}
}
