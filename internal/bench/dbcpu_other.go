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

func (*dbServer) cpu() (time.Duration, error) { return 0, errors.ErrUnsupported }
