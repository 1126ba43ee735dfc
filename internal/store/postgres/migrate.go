package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrateLock is the key of the transaction-level advisory lock that
// serialises migrations of one database: the bytes of "anyhook".
const migrateLock int64 = 0x616e79686f6f6b

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the embedded migrations in order. Their names start
// with their version, 1, 2, 3 … without gaps (0001_init.sql).
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	ms := make([]migration, 0, len(names))
	for i, name := range names {
		base := path.Base(name)
		num, _, _ := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if err != nil || v != i+1 {
			return nil, fmt.Errorf("migration %s: want a name starting with %04d_", base, i+1)
		}
		b, err := migrationFS.ReadFile(name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: base, sql: string(b)})
	}
	return ms, nil
}

// migrate applies pending migrations, forward only, in one transaction that
// holds an advisory lock: of many processes starting at once, one applies
// them and the others wait, then find nothing to do. PostgreSQL DDL is
// transactional, so a failed migration leaves the schema as it was.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	return s.tx(ctx, "migrate", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLock); err != nil {
			return unavailable("migrate: lock", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return migrationError("schema_migrations", err)
		}
		var have int
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&have); err != nil {
			return unavailable("migrate", err)
		}
		if have > len(ms) {
			return fmt.Errorf("database schema version %d is newer than this binary knows (%d): upgrade anyhook", have, len(ms))
		}
		for _, m := range ms[have:] {
			if _, err := tx.Exec(ctx, m.sql); err != nil {
				return migrationError(m.name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.version, m.name); err != nil {
				return migrationError(m.name, err)
			}
		}
		return nil
	})
}

// migrationError names the migration that failed; a failure of the
// connection rather than of the migration is unavailability.
func migrationError(name string, err error) error {
	if !itemLevel(err) {
		return unavailable("migration "+name, err)
	}
	return fmt.Errorf("migration %s: %w", name, err)
}
