package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/anyhook/anyhook/internal/store"
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
// with their version, four digits (0001_init.sql), strictly increasing.
// Versions may have gaps: branches that each add a migration number them
// ahead, and a database applies whichever it has not applied yet.
func migrations() ([]migration, error) {
	names, err := fs.Glob(migrationFS, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	ms := make([]migration, 0, len(names))
	for _, name := range names {
		base := path.Base(name)
		num, _, _ := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if err != nil || len(num) != 4 || v < 1 || (len(ms) > 0 && v <= ms[len(ms)-1].version) {
			return nil, fmt.Errorf("migration %s: want a name starting with a version of four digits, above the one before", base)
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
			return store.Unavailable("migrate: lock", err)
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
			version    integer PRIMARY KEY,
			name       text NOT NULL,
			applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
			return migrationError("schema_migrations", err)
		}
		rows, err := tx.Query(ctx, `SELECT version FROM schema_migrations`)
		if err != nil {
			return store.Unavailable("migrate", err)
		}
		versions, err := collect(rows, func(sc scanner) (int, error) {
			var v int
			return v, sc.Scan(&v)
		})
		if err != nil {
			return store.Unavailable("migrate", err)
		}
		applied := map[int]bool{}
		for _, v := range versions {
			applied[v] = true
		}
		if top := slices.Max(append(versions, 0)); top > ms[len(ms)-1].version {
			return fmt.Errorf("database schema version %d is newer than this binary knows (%d): upgrade anyhook", top, ms[len(ms)-1].version)
		}
		for _, m := range ms {
			if applied[m.version] {
				continue
			}
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
		return store.Unavailable("migration "+name, err)
	}
	return fmt.Errorf("migration %s: %w", name, err)
}
