package procs

import (
	"bytes"
	"context"
	"errors"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

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

func TestHeapTarget(t *testing.T) {
	const mib = 1 << 20
	for live, want := range map[uint64]int{
		0: GCPercent, 10 * mib: GCPercent, 64 * mib: GCPercent,
		128 * mib: 200, 200 * mib: 128, 256 * mib: 100, 4096 * mib: 100,
	} {
		if got := heapTarget(live); got != want {
			t.Errorf("heapTarget(%d MiB) = %d; want %d", live/mib, got, want)
		}
	}
}

// TestFollowHeap: a live heap past the headroom brings the target down to
// Go's default, and one well under it raises the target again. Not
// parallel: the collector's target is the process's.
func TestFollowHeap(t *testing.T) {
	was := debug.SetGCPercent(100)
	headroom, every := gcHeadroom, followEvery
	t.Cleanup(func() {
		debug.SetGCPercent(was)
		gcHeadroom, followEvery = headroom, every
	})
	followEvery = time.Millisecond
	follow := func(headroom uint64, want int) {
		t.Helper()
		gcHeadroom = headroom
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { FollowHeap(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		deadline := time.Now().Add(10 * time.Second)
		for gogc() != want {
			if time.Now().After(deadline) {
				t.Fatalf("headroom %d: the target stayed %d; want %d", headroom, gogc(), want)
			}
			time.Sleep(time.Millisecond)
		}
	}

	// 32 MiB held through a collection, over a headroom of 1 MiB.
	hold := make([][]byte, 32)
	for i := range hold {
		hold[i] = bytes.Repeat([]byte{1}, 1<<20)
	}
	runtime.GC()
	debug.SetGCPercent(GCPercent)
	follow(1<<20, 100)
	runtime.KeepAlive(hold)
	runtime.GC()
	follow(1<<40, GCPercent)
}

// gogc is the collector's target, read without setting it.
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}
