package postgres

import (
	"context"
	"embed"
	"fmt"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrateLock is the key of the transaction-level advisory lock that
// serialises migrations of one database: the bytes of "anyhook".
const migrateLock int64 = 0x616e79686f6f6b

// migrate applies pending migrations, forward only, in one transaction that
// holds an advisory lock: of many processes starting at once, one applies
// them and the others wait, then find nothing to do. PostgreSQL DDL is
// transactional, so a failed migration leaves the schema as it was.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := sqlstore.Migrations(migrationFS)
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
		applied, err := collect(rows, sqlstore.ScanInt)
		if err != nil {
			return store.Unavailable("migrate", err)
		}
		return sqlstore.Apply(ms, applied, func(m sqlstore.Migration) error {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return migrationError(m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
				return migrationError(m.Name, err)
			}
			return nil
		})
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
