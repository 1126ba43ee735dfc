package postgres

import (
	"context"
	"strings"
	"time"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// SetSweepChunk makes one round of the log's sweep read n event ids.
func (s *Store) SetSweepChunk(n int) { s.sweepChunk = n }

// IngestPipelined is Ingest's one-statement path alone: ok false when it
// left the batch to the item-by-item path, having changed nothing.
func (s *Store) IngestPipelined(ctx context.Context, evs []store.NewEvent) ([]store.IngestResult, bool, error) {
	return s.ingestPipelined(ctx, evs)
}

// IngestItems is Ingest's item-by-item path alone.
func (s *Store) IngestItems(ctx context.Context, evs []store.NewEvent) ([]store.IngestResult, error) {
	return s.ingestItems(ctx, evs)
}

// IngestLocks is the statement that takes evs' advisory locks, and its
// arguments.
func IngestLocks(evs []store.NewEvent) (string, []any) {
	l := ingestLocks(evs)
	if len(l) != 1 {
		return "", nil
	}
	return l[0].sql, l[0].args
}

// SetFewShown sets how many deliveries shown in a derived status a list
// reads by id (-1: none).
func (s *Store) SetFewShown(n int) { s.fewShown = n }

// SetStatementBytes caps the bodies and headers of one ingest statement.
func (s *Store) SetStatementBytes(n int) { s.statementBytes = n }

// WithMigrateLockTimeout is o with the upgrade's bound on a wait for a
// table's lock set to d.
func WithMigrateLockTimeout(o Options, d time.Duration) Options {
	o.migrateLockTimeout = d
	return o
}

// DeliveriesSQL is ListDeliveries' query of f and its arguments, held
// the destinations holding their deliveries back, reading the deliveries'
// ids (the shown status of each delivery read reads its destination).
func DeliveriesSQL(f store.DeliveryFilter, held []string) (string, []any) {
	q, args := deliveriesSQL(f, held, nil)
	return strings.Replace(q, sqlstore.DeliveryColumns("d."), "d.id", 1), args
}

// EventsSQL is ListEvents' query of the events f selects, reading their
// ids, held the destinations holding their deliveries back.
func EventsSQL(f store.EventFilter, held []string) (string, []any) {
	return eventsSQL(f, "id", held, nil)
}

// Setting is the value of a run-time setting on a connection of the store.
func (s *Store) Setting(ctx context.Context, name string) (string, error) {
	var v string
	err := s.pool.QueryRow(ctx, `SELECT current_setting($1)`, name).Scan(&v)
	return v, err
}

// Sleep runs pg_sleep(d) on one of the store's connections.
func (s *Store) Sleep(ctx context.Context, d time.Duration) error {
	_, err := s.pool.Exec(ctx, `SELECT pg_sleep($1)`, d.Seconds())
	return err
}
