package procs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"

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
// process has none or is in no cgroup). Where it raised the target,
// FollowHeap should then run, so that a large live heap does not grow
// fivefold.
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

// gcHeadroom bounds what the raised target adds to the heap: FollowHeap
// lowers the target as the live heap grows, from GCPercent while it is
// under a quarter of this down to Go's default of 100 once it is at this
// or more. A large live heap (many large bodies in flight, say) then
// grows no further than at Go's default, and the small heap of ordinary
// traffic keeps its rarer collections. A variable for tests.
var gcHeadroom uint64 = 256 << 20

// heapTarget is the collector's target for a live heap of live bytes:
// the heap may grow by gcHeadroom over it, but by no more than
// GCPercent and no less than 100 %.
func heapTarget(live uint64) int {
	if live == 0 {
		return GCPercent
	}
	return int(min(max(gcHeadroom*100/live, 100), GCPercent))
}

// followEvery is how often FollowHeap reads the live heap; a variable for
// tests.
var followEvery = 250 * time.Millisecond

// FollowHeap keeps the collector's target at heapTarget of the live heap
// (as the last collection measured it) until ctx ends. Run it where
// TuneGC raised the target.
func FollowHeap(ctx context.Context) {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	t := time.NewTicker(followEvery)
	defer t.Stop()
	set := -1 // whatever it is, the first reading sets it
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		metrics.Read(sample)
		if sample[0].Value.Kind() != metrics.KindUint64 {
			return // a runtime without the metric: keep the target
		}
		if p := heapTarget(sample[0].Value.Uint64()); p != set {
			debug.SetGCPercent(p)
			set = p
		}
	}
}
