package gateway

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// lockServe takes the lock that lets one serve run on the SQLite database
// at path: a second would claim and rescue the same deliveries on its own
// clock (SQLite is one process; PostgreSQL is for several). The lock is
// an flock on path+".lock", released by the kernel when the process
// ends, kill -9 included; the file holds the holder's pid for the
// message. Other commands (replay, backup) do not take it.
func lockServe(path string) (release func() error, err error) {
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path + ".lock")
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			holder := "another process"
			if pid, perr := strconv.Atoi(strings.TrimSpace(string(b))); perr == nil {
				holder = "process " + strconv.Itoa(pid)
			}
			return nil, fmt.Errorf("%s already serves %s: SQLite takes one anyhook serve (use PostgreSQL to run several)", holder, path)
		}
		return nil, fmt.Errorf("lock %s.lock: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f.Close, nil // closing the file releases the lock
}
