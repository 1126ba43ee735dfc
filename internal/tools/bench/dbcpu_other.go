//go:build !linux

package bench

import (
	"context"
	"errors"
	"time"
)

// dbServer is not measured on this system (dbcpu_linux.go).
type dbServer struct{}

func findServer(context.Context, string) (*dbServer, error) {
	return nil, errors.New("measured on Linux only")
}

type cpuUse struct{}

func (*dbServer) cpu() (cpuUse, error) { return cpuUse{}, errors.ErrUnsupported }

func (cpuUse) since(cpuUse) time.Duration { return 0 }
