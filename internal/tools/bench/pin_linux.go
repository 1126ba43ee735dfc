package bench

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// startPinned starts cmd on the CPUs in cpus: the child inherits the
// affinity of the thread that forks it, so the fork happens on a thread
// locked to those CPUs, which is then thrown away (the goroutine ends
// locked). The child's Go runtime sizes GOMAXPROCS by that affinity, as it
// would in a container given those CPUs.
func startPinned(cmd *exec.Cmd, cpus []int) error {
	var set unix.CPUSet
	for _, c := range cpus {
		set.Set(c)
	}
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			done <- fmt.Errorf("pin to CPUs %v: %w", cpus, err)
			return
		}
		done <- cmd.Start()
	}()
	return <-done
}

// pinSelf moves every thread of this process to the CPUs not in cpus (the
// load client and the sink keep off the gateway's CPUs); threads started
// later inherit it from the thread that starts them.
func pinSelf(cpus []int) error {
	var all unix.CPUSet
	if err := unix.SchedGetaffinity(0, &all); err != nil {
		return err
	}
	for _, c := range cpus {
		all.Clear(c)
	}
	if all.Count() == 0 {
		return fmt.Errorf("--gateway-cpus %v leaves no CPU for the load client", cpus)
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &all); err != nil && err != unix.ESRCH {
			return fmt.Errorf("pin thread %d: %w", tid, err)
		}
	}
	return nil
}
