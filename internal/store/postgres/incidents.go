package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// pgQ is the pool or a transaction as sqlstore's incidents logic uses it.
type pgQ struct {
	ctx context.Context
	db  interface {
		Query(ctx context.Context, q string, args ...any) (pgx.Rows, error)
		Exec(ctx context.Context, q string, args ...any) (pgconn.CommandTag, error)
	}
}

func (t pgQ) Query(q string, args []any, row func(sqlstore.Scanner) error) error {
	rows, err := t.db.Query(t.ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	_, err = sqlstore.Collect(rows, func(sc sqlstore.Scanner) (struct{}, error) { return struct{}{}, row(sc) })
	return err
}

func (t pgQ) Exec(q string, args []any) (int64, error) {
	tag, err := t.db.Exec(t.ctx, q, args...)
	return tag.RowsAffected(), err
}

// RecordIncidents implements store.Incidents. Concurrent recorders of
// one (destination, kind) meet on the unique index of unresolved
// incidents: the second upsert waits for the first's row and counts on
// it (READ COMMITTED re-checks the conflict after the first commits).
func (s *Store) RecordIncidents(ctx context.Context, as []store.IncidentAttempt, p store.IncidentPolicy) ([]store.IncidentChange, error) {
	if len(as) == 0 {
		return nil, nil
	}
	var cs []store.IncidentChange
	var err error
	for try := 0; ; try++ {
		err = s.tx(ctx, "record incidents", func(tx pgx.Tx) error {
			var err error
			cs, err = sqlstore.RecordIncidents(sqlstore.Postgres, pgQ{ctx, tx}, as, p)
			return store.Unavailable("record incidents", err)
		})
		// A reopen that raced another process's new incident of the same
		// (destination, kind) fails on the unique index once that one
		// commits, and two batches can deadlock with a sweep: run again,
		// and this time the reopen sees the other incident and counts on
		// it. Without this the whole batch (every destination) is lost.
		if err == nil || try == 2 || !recordRace(err) {
			return cs, err
		}
	}
}

// recordRace reports whether err is a unique violation or a deadlock:
// the races of concurrent recorders that a new transaction resolves.
func recordRace(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "40P01")
}

// SweepIncidents implements store.Incidents.
func (s *Store) SweepIncidents(ctx context.Context, now time.Time, p store.IncidentPolicy) ([]store.IncidentChange, error) {
	var cs []store.IncidentChange
	err := s.tx(ctx, "sweep incidents", func(tx pgx.Tx) error {
		var err error
		cs, err = sqlstore.SweepIncidents(sqlstore.Postgres, pgQ{ctx, tx}, now, p)
		return store.Unavailable("sweep incidents", err)
	})
	return cs, err
}

// Incident implements store.Incidents.
func (s *Store) Incident(ctx context.Context, id string) (store.Incident, error) {
	i, err := sqlstore.Incident(sqlstore.Postgres, pgQ{ctx, s.pool}, id)
	return i, sqlstore.IncidentError("read incident", err)
}

// ListIncidents implements store.Incidents.
func (s *Store) ListIncidents(ctx context.Context, f store.IncidentFilter) ([]store.Incident, string, error) {
	is, next, err := sqlstore.ListIncidents(sqlstore.Postgres, pgQ{ctx, s.pool}, f)
	return is, next, sqlstore.IncidentError("list incidents", err)
}

// AcknowledgeIncident implements store.Incidents.
func (s *Store) AcknowledgeIncident(ctx context.Context, id string, by store.Actor, at time.Time) (store.Incident, error) {
	return s.actIncident(ctx, id, true, by, at)
}

// ResolveIncident implements store.Incidents.
func (s *Store) ResolveIncident(ctx context.Context, id string, by store.Actor, at time.Time) (store.Incident, error) {
	return s.actIncident(ctx, id, false, by, at)
}

func (s *Store) actIncident(ctx context.Context, id string, ack bool, by store.Actor, at time.Time) (store.Incident, error) {
	var i store.Incident
	err := s.tx(ctx, "act on incident", func(tx pgx.Tx) error {
		var err error
		i, err = sqlstore.ActIncident(sqlstore.Postgres, pgQ{ctx, tx}, id, ack, by, at)
		return sqlstore.IncidentError("act on incident", err)
	})
	return i, err
}

// NoteBreaker implements store.Incidents.
func (s *Store) NoteBreaker(ctx context.Context, destination string, tripped bool, at time.Time) error {
	return s.tx(ctx, "note breaker", func(tx pgx.Tx) error {
		return store.Unavailable("note breaker", sqlstore.NoteBreaker(sqlstore.Postgres, pgQ{ctx, tx}, destination, tripped, at))
	})
}

// PruneIncidents implements store.Incidents.
func (s *Store) PruneIncidents(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int
	err := s.tx(ctx, "prune incidents", func(tx pgx.Tx) error {
		var err error
		n, err = sqlstore.PruneIncidents(sqlstore.Postgres, pgQ{ctx, tx}, before, limit)
		return store.Unavailable("prune incidents", err)
	})
	return n, err
}
