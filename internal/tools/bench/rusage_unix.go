//go:build unix

package bench

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// usage is the process's CPU time (user + system) and peak RSS so far.
func usage() (cpu time.Duration, maxRSS int64) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	if hwm, ok := vmHWM(); ok {
		return cpu, hwm
	}
	maxRSS = int64(ru.Maxrss)
	if runtime.GOOS != "darwin" {
		maxRSS *= 1024 // Linux and the BSDs report KiB, macOS bytes
	}
	return cpu, maxRSS
}

// vmHWM is Linux's peak RSS of this process's own memory (VmHWM in
// /proc/self/status). getrusage's maxrss is not: Linux carries the peak of
// the memory a process was forked from across exec, so a gateway process
// started by the bench would report the bench's own peak.
func vmHWM() (int64, bool) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err == nil
		}
	}
	return 0, false
}
