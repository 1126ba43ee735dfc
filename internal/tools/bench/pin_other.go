//go:build !linux

package bench

import (
	"errors"
	"os/exec"
)

func startPinned(*exec.Cmd, []int) error {
	return errors.New("--gateway-cpus works on Linux only")
}

func pinSelf([]int) error { return errors.New("--gateway-cpus works on Linux only") }
