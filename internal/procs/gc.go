package procs

import (
	"math"
	"os"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// GCPercent is the collector's target (GOGC) in a gateway process whose
// environment sets none. The live heap is small (tens of MiB: requests in
// flight, prepared statements, caches) and short-lived garbage is most of
// what a request allocates, so at Go's default of 100 the collector took
// about a fifth of a CPU profile at full load, and a twelfth at 400
// (BENCHMARKS.md, "The collector's share").
const GCPercent = 400

// memRatio is the share of a container's memory limit given to the Go
// heap when the collector's target was raised: SQLite's page cache and
// the runtime's own overhead live outside it.
const memRatio = 0.75

// TuneGC raises the collector's target to GCPercent unless GOGC is set,
// and then, unless GOMEMLIMIT is set, sets a soft memory limit at 3/4 of
// the cgroup's memory limit, so that near a container's limit the larger
// heap this allows costs collections instead of an OOM kill. It returns
// the target set (0: none) and the memory limit set (0: none).
func TuneGC() (percent int, limit int64) {
	if os.Getenv("GOGC") != "" {
		return 0, 0
	}
	debug.SetGCPercent(GCPercent)
	if os.Getenv("GOMEMLIMIT") != "" {
		return GCPercent, 0
	}
	limit, err := memlimit.Set(
		memlimit.WithRatio(memRatio),
		memlimit.WithProvider(memlimit.FromCgroup),
	)
	if err != nil || limit == math.MaxInt64 {
		return GCPercent, 0
	}
	return GCPercent, limit
}
