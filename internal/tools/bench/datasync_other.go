//go:build !linux

package bench

import "os"

// datasync is fsync where fdatasync is not at hand.
func datasync(f *os.File) error { return f.Sync() }
