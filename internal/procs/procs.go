// Package procs sizes the Go runtime (scheduler, collector) for a gateway
// process.
package procs

import (
	"os"
	"runtime"
)

// AtLeastTwo raises GOMAXPROCS to 2 when the runtime chose 1 (the process
// may use one CPU, by affinity or a cgroup quota) and the environment
// does not set GOMAXPROCS. It returns the values before and after.
//
// The pure-Go SQLite driver writes and syncs the WAL in blocking system
// calls, which keep the only P (the right to run Go code) until the
// runtime's monitor takes it back; meanwhile no handler runs and no
// connection is read, so the next commit's batch is small and the acks
// wait. Pinned to one CPU, the gateway took 1,855 events/s at 513 µs of
// CPU each and a p99 of 638 ms with one P; with two, 6,177/s at 240 µs and
// 19 ms (BENCHMARKS.md, "One core: the scheduler, not the CPU"). The
// kernel shares the CPU between the two threads.
func AtLeastTwo() (before, after int) {
	before = runtime.GOMAXPROCS(0)
	if before >= 2 || os.Getenv("GOMAXPROCS") != "" {
		return before, before
	}
	runtime.GOMAXPROCS(2)
	return before, 2
}
