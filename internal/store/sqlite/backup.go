package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"

	"github.com/anyhook/anyhook/internal/store"
)

// Backup writes a consistent copy of the live database at src to dst with
// VACUUM INTO: one read transaction, so gateways keep ingesting meanwhile
// (WAL readers do not block the writer), and the copy holds exactly the
// transactions committed when it began. dst must not exist; the copy is
// written next to it under a temporary name, checked with PRAGMA
// integrity_check, synced, and only then renamed to dst. It returns the
// number of events in the copy.
func Backup(ctx context.Context, src, dst string) (int64, error) {
	if _, err := os.Stat(src); err != nil {
		return 0, fmt.Errorf("backup: database %s: %w", src, err)
	}
	if _, err := os.Stat(dst); err == nil {
		return 0, fmt.Errorf("backup: %s already exists", dst)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("backup: %w", err)
	}
	tmp := filepath.Join(filepath.Dir(dst), "."+filepath.Base(dst)+".partial")
	os.Remove(tmp)
	defer os.Remove(tmp)
	// Created empty with mode 0600 first (VACUUM INTO accepts an empty
	// file), so the copy is never readable by others, even while written.
	if err := createPrivate(tmp); err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}

	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	db, err := sql.Open("sqlite", "file:"+src+"?"+q.Encode())
	if err != nil {
		return 0, fmt.Errorf("backup: open %s: %w", src, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.ExecContext(ctx, `VACUUM INTO ?`, tmp); err != nil {
		return 0, fmt.Errorf("backup: VACUUM INTO %s: %w", tmp, store.Unavailable("backup", err))
	}
	n, err := checkCopy(ctx, tmp)
	if err != nil {
		return 0, err
	}
	f, err := os.Open(tmp)
	if err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	// The copy holds every webhook body: 0600 whatever the umask, before
	// it gets its name.
	err = f.Chmod(privateMode)
	if err == nil {
		err = f.Sync()
	}
	f.Close()
	if err != nil {
		return 0, fmt.Errorf("backup: chmod and sync %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return 0, fmt.Errorf("backup: %w", err)
	}
	if d, err := os.Open(filepath.Dir(dst)); err == nil {
		d.Sync()
		d.Close()
	}
	return n, nil
}

// IntegrityCheck runs PRAGMA integrity_check on the database file at path
// and returns the number of events in it.
func IntegrityCheck(ctx context.Context, path string) (int64, error) {
	return checkCopy(ctx, path)
}

func checkCopy(ctx context.Context, path string) (int64, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		return 0, err
	}
	defer db.Close()
	var res string
	if err := db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&res); err != nil {
		return 0, fmt.Errorf("integrity check of %s: %w", path, err)
	}
	if res != "ok" {
		return 0, fmt.Errorf("integrity check of %s: %s", path, res)
	}
	var n int64
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM events`).Scan(&n); err != nil {
		return 0, fmt.Errorf("integrity check of %s: %w", path, err)
	}
	return n, nil
}
