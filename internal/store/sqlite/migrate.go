package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrate applies pending migrations in one write transaction (BEGIN
// IMMEDIATE, and SQLite's DDL is transactional): of several processes
// opening a new file at once, one applies them while the others wait for
// the lock, then find nothing to do.
func (s *Store) migrate(ctx context.Context) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	// A migration's version is the number its name starts with (0001_…),
	// strictly increasing, gaps allowed: a database applies every one it
	// has not applied yet, in order.
	versions := make([]int, len(names))
	for i, name := range names {
		num, _, _ := strings.Cut(path.Base(name), "_")
		v, err := strconv.Atoi(num)
		if err != nil || len(num) != 4 || v < 1 || (i > 0 && v <= versions[i-1]) {
			return fmt.Errorf("migration %s: want a name starting with a version of four digits, above the one before", path.Base(name))
		}
		versions[i] = v
	}
	return s.tx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
			return unavailable(err)
		}
		rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
		if err != nil {
			return unavailable(err)
		}
		applied := map[int]bool{}
		top := 0
		for rows.Next() {
			var v int
			if err := rows.Scan(&v); err != nil {
				rows.Close()
				return unavailable(err)
			}
			applied[v], top = true, max(top, v)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return unavailable(err)
		}
		if known := versions[len(versions)-1]; top > known {
			return fmt.Errorf("database schema version %d is newer than this binary knows (%d): upgrade anyhook", top, known)
		}
		for i, name := range names {
			if applied[versions[i]] {
				continue
			}
			ddl, err := migrations.ReadFile(name)
			if err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, string(ddl)); err != nil {
				return fmt.Errorf("migration %s: %w", name, err)
			}
			if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, versions[i], micros(s.now())); err != nil {
				return unavailable(err)
			}
		}
		return nil
	})
}
