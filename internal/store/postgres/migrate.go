package postgres

import (
	"cmp"
	"context"
	"embed"
	"fmt"
	"log/slog"
	"time"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrateLock is the key of the transaction-level advisory lock that
// serialises migrations of one database: the bytes of "anyhook".
const migrateLock int64 = 0x616e79686f6f6b

// migrateLockTimeout bounds each wait of an upgrade for a lock on a table
// (after the advisory lock): a migration that locks a table (12 and 13
// lock events against writes) queues behind the writes in progress, and
// every other writer of the table queues behind it, on every process. A
// long write (an anti-wraparound vacuum, a bulk update) would stop ingest
// everywhere for as long; with the bound the upgrade gives its place up,
// lets the writers through, and tries again.
const migrateLockTimeout = 2 * time.Second

// lockNotAvailable is the SQLSTATE of a wait that lock_timeout ended.
const lockNotAvailable = "55P03"

// migrate applies pending migrations, forward only, in one transaction that
// holds an advisory lock: of many processes starting at once, one applies
// them and the others wait, then find nothing to do. PostgreSQL DDL is
// transactional, so a failed migration leaves the schema as it was. When
// it waits longer than migrateLockTimeout for a lock on a table, it rolls
// back to a savepoint taken after the advisory lock, says so, and starts
// again after a pause (growing to 5 s), until ctx is done. It keeps the
// advisory lock meanwhile: a process that let it go would let the next
// one queue its own request for the table at once, and with several
// starting together the queue would nearly always hold one, so the
// writers would wait a whole timeout each as if there were none.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := sqlstore.Migrations(migrationFS)
	if err != nil {
		return err
	}
	timeout := cmp.Or(s.migrateLockTimeout, migrateLockTimeout)
	start, n, log := time.Now(), 0, s.migrateLog
	err = s.tx(ctx, "migrate", func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrateLock); err != nil {
			return store.Unavailable("migrate: lock", err)
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(`SET LOCAL lock_timeout = %d`, timeout.Milliseconds())); err != nil {
			return store.Unavailable("migrate", err)
		}
		for pause := 100 * time.Millisecond; ; pause = min(2*pause, 5*time.Second) {
			if _, err := tx.Exec(ctx, `SAVEPOINT migrate`); err != nil {
				return store.Unavailable("migrate", err)
			}
			n, err = applyPending(ctx, tx, ms, log, !s.noUpgrade)
			if sqlState(err) != lockNotAvailable {
				return err
			}
			log = nil // said once
			// The rollback to the savepoint gives up the table locks
			// taken since, so the writers go through while it pauses.
			if _, err := tx.Exec(ctx, `ROLLBACK TO SAVEPOINT migrate`); err != nil {
				return store.Unavailable("migrate", err)
			}
			s.log.Warn(sqlstore.UpgradeMessage+"a migration waited longer than the lock timeout for a table others write; trying again",
				"err", err, "lock_timeout", timeout, "again_in", pause)
			select {
			case <-ctx.Done():
				return err
			case <-time.After(pause):
			}
		}
	})
	if err == nil {
		sqlstore.Applied(s.migrateLog, ms, n, start)
	}
	return err
}

// applyPending applies the migrations tx's database lacks.
func applyPending(ctx context.Context, tx pgx.Tx, ms []sqlstore.Migration, log *slog.Logger, upgrade bool) (int, error) {
	if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    integer PRIMARY KEY,
		name       text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return 0, migrationError("schema_migrations", err)
	}
	rows, err := tx.Query(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return 0, store.Unavailable("migrate", err)
	}
	applied, err := collect(rows, sqlstore.ScanInt)
	if err != nil {
		return 0, store.Unavailable("migrate", err)
	}
	return sqlstore.Apply(log, ms, applied, upgrade, func(m sqlstore.Migration) error {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return migrationError(m.Name, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name); err != nil {
			return migrationError(m.Name, err)
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
