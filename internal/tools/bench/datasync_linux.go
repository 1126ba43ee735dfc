package bench

import (
	"os"

	"golang.org/x/sys/unix"
)

// datasync is fdatasync, what SQLite's WAL commits call on Linux.
func datasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }
