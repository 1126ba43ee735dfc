package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/anyhook/anyhook/internal/store/sqlite"
)

const backupUsage = `usage: anyhook backup [--config FILE] --out FILE

Writes a consistent copy of the config's live SQLite database to FILE
(VACUUM INTO, then an integrity check), while gateways keep running.
Exit 1: the backup failed; exit 2: bad flags or config, --out exists, or
not SQLite.`

// backup is `anyhook backup --config F --out FILE`: a consistent online
// copy of a live SQLite store (docs/reliability.md, "Backup and restore").
func backup(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("backup")
	cfgPath := configFlag(fs)
	out := fs.String("out", "", "the backup `file` to write (must not exist); created with mode 0600")
	if code := parse(fs, args, stdout, stderr, backupUsage); code >= 0 {
		return code
	}
	if *out == "" {
		return fail(stderr, exitUsage, errors.New("backup: --out FILE is required"))
	}
	if _, err := os.Lstat(*out); err == nil {
		// A usage error like the others: nothing was tried.
		return fail(stderr, exitUsage, fmt.Errorf("backup: --out %s already exists: a backup never replaces a file; give a new name", *out))
	}
	cfg, err := loadConfig(*cfgPath, stderr, "backup", "database", "log.key_file")
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	path, ok := cfg.SQLitePath()
	if !ok {
		return fail(stderr, exitUsage, errors.New("backup: the database is PostgreSQL: use pg_dump or continuous archiving (docs/reliability.md)"))
	}
	if path == ":memory:" {
		return fail(stderr, exitUsage, cfg.Errorf("database", "sqlite::memory: lives only inside its anyhook serve process and is gone when it stops: there is nothing to back up"))
	}
	n, err := sqlite.Backup(ctx, path, *out)
	if err != nil {
		return fail(stderr, exitFail, err)
	}
	fmt.Fprintf(stdout, "backed up %s to %s: %d events, integrity ok\n", path, *out, n)
	fmt.Fprintf(stdout, "also keep a copy of the log signing key %s\n", cfg.LedgerKeyPath())
	return exitOK
}
