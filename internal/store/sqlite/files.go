package sqlite

import (
	"errors"
	"io/fs"
	"os"
	"strings"
)

// privateMode is the mode of the files that hold webhook bodies: the
// database, its -wal and -shm files, and backups.
const privateMode = 0o600

// createPrivate creates the database file at path, empty, with mode 0600
// (chmod after create: the umask cannot widen or narrow it), unless it
// exists already or path is not a plain file name (":memory:", a "file:"
// URI). SQLite creates a database's -wal and -shm files with the mode of
// the database file, so they are 0600 too.
func createPrivate(path string) error {
	if path == ":memory:" || strings.HasPrefix(path, "file:") {
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, privateMode)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := f.Chmod(privateMode); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
