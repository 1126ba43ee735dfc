package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/anyhook/anyhook/internal/store/sqlite"
)

// backup is `anyhook backup --config F --out FILE`: a consistent online
// copy of a live SQLite store (docs/reliability.md, "Backup and restore").
func backup(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("backup", stderr)
	cfgPath := fs.String("config", "", "config file (default $ANYHOOK_CONFIG, else ./anyhook.yaml)")
	out := fs.String("out", "", "the backup file to write (must not exist)")
	if code := parse(fs, args); code >= 0 {
		return code
	}
	if *out == "" {
		return fail(stderr, exitUsage, errors.New("backup: --out FILE is required"))
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		return fail(stderr, exitUsage, err)
	}
	path, ok := cfg.SQLitePath()
	if !ok {
		return fail(stderr, exitUsage, errors.New("backup: the database is PostgreSQL: use pg_dump or continuous archiving (docs/reliability.md)"))
	}
	n, err := sqlite.Backup(ctx, path, *out)
	if err != nil {
		return fail(stderr, exitFail, err)
	}
	fmt.Fprintf(stdout, "backed up %s to %s: %d events, integrity ok\n", path, *out, n)
	fmt.Fprintf(stdout, "also keep a copy of the log signing key %s\n", cfg.LogKeyPath())
	return exitOK
}
