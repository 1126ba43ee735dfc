package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"time"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

//go:embed migrations/*.sql
var migrations embed.FS

// migrate applies pending migrations in one write transaction (BEGIN
// IMMEDIATE, and SQLite's DDL is transactional): of several processes
// opening a new file at once, one applies them while the others wait for
// the lock, then find nothing to do.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := sqlstore.Migrations(migrations)
	if err != nil {
		return err
	}
	start, n := time.Now(), 0
	err = s.tx(ctx, "migrate", func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at INTEGER NOT NULL)`); err != nil {
			return store.Unavailable("migrate", err)
		}
		applied, err := query(ctx, tx, sqlstore.ScanInt, `SELECT version FROM schema_migrations`)
		if err != nil {
			return store.Unavailable("migrate", err)
		}
		n, err = sqlstore.Apply(s.log, ms, applied, !s.noUpgrade, func(m sqlstore.Migration) error {
			if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`, m.Version, micros(s.now()))
			return store.Unavailable("migrate", err)
		})
		return err
	})
	if err == nil {
		sqlstore.Applied(s.log, ms, n, start)
	}
	return err
}
