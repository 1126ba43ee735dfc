package procs

import (
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// GCPercent is the collector's target (GOGC) in a gateway process whose
// environment sets none. The live heap is small (tens of MiB: requests in
// flight, prepared statements, caches) and most of what a request
// allocates dies young, so at Go's default of 100 the collector (mark
// workers, assists, sweeping) took a tenth of a CPU profile at full load,
// and a fortieth at 400 (BENCHMARKS.md, "The collector's share").
const GCPercent = 400

// memRatio is the share of a cgroup's memory limit that the Go runtime
// may use once the collector's target was raised: the rest is for what
// the cgroup is charged for outside it, SQLite's page cache (allocated
// by the C library's port, not by Go) and the kernel's file cache.
const memRatio = 0.75

// cgroupLimit reads the process's cgroup memory limit; a variable for
// tests.
var cgroupLimit = memlimit.FromCgroup

// TuneGC raises the collector's target to GCPercent unless GOGC is set,
// and then, unless GOMEMLIMIT is set, sets a soft memory limit at 3/4 of
// the cgroup's memory limit (a container's, systemd's MemoryMax), so that
// near that limit the larger heap this allows costs collections instead
// of an OOM kill. It returns the target set (0: none), the memory limit
// set in bytes (0: none) and why a limit could not be read (nil when the
// process has none or is in no cgroup).
func TuneGC() (percent int, limit int64, err error) {
	if os.Getenv("GOGC") != "" {
		return 0, 0, nil
	}
	debug.SetGCPercent(GCPercent)
	if os.Getenv("GOMEMLIMIT") != "" {
		return GCPercent, 0, nil
	}
	l, err := cgroupLimit()
	switch {
	case errors.Is(err, memlimit.ErrNoLimit), errors.Is(err, memlimit.ErrNoCgroup), errors.Is(err, memlimit.ErrCgroupsNotSupported):
		return GCPercent, 0, nil
	case err != nil:
		return GCPercent, 0, fmt.Errorf("reading the cgroup's memory limit: %w", err)
	}
	limit = int64(float64(min(l, math.MaxInt64)) * memRatio)
	if limit <= 0 {
		return GCPercent, 0, nil
	}
	debug.SetMemoryLimit(limit)
	return GCPercent, limit, nil
}
