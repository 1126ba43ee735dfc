//go:build unix

package bench

import (
	"runtime"
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
	maxRSS = int64(ru.Maxrss)
	if runtime.GOOS != "darwin" {
		maxRSS *= 1024 // Linux and the BSDs report KiB, macOS bytes
	}
	return cpu, maxRSS
}
