package sqlite

import (
	"context"
	"database/sql"
	"time"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// sqlQ is a connection pool or a transaction as sqlstore's incidents
// logic uses it.
type sqlQ struct {
	ctx context.Context
	db  interface {
		QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
		ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error)
	}
}

func (t sqlQ) Query(q string, args []any, row func(sqlstore.Scanner) error) error {
	rows, err := t.db.QueryContext(t.ctx, q, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	_, err = sqlstore.Collect(rows, func(sc sqlstore.Scanner) (struct{}, error) { return struct{}{}, row(sc) })
	return err
}

func (t sqlQ) Exec(q string, args []any) (int64, error) {
	res, err := t.db.ExecContext(t.ctx, q, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// RecordIncidents implements store.Incidents.
func (s *Store) RecordIncidents(ctx context.Context, as []store.IncidentAttempt, p store.IncidentPolicy) ([]store.IncidentChange, error) {
	if len(as) == 0 {
		return nil, nil
	}
	var cs []store.IncidentChange
	err := s.tx(ctx, "record incidents", func(tx *sql.Tx) error {
		var err error
		cs, err = sqlstore.RecordIncidents(sqlstore.SQLite, sqlQ{ctx, tx}, as, p)
		return store.Unavailable("record incidents", err)
	})
	return cs, err
}

// SweepIncidents implements store.Incidents.
func (s *Store) SweepIncidents(ctx context.Context, now time.Time, p store.IncidentPolicy) ([]store.IncidentChange, error) {
	var cs []store.IncidentChange
	err := s.tx(ctx, "sweep incidents", func(tx *sql.Tx) error {
		var err error
		cs, err = sqlstore.SweepIncidents(sqlstore.SQLite, sqlQ{ctx, tx}, now, p)
		return store.Unavailable("sweep incidents", err)
	})
	return cs, err
}

// Incident implements store.Incidents.
func (s *Store) Incident(ctx context.Context, id string) (store.Incident, error) {
	i, err := sqlstore.Incident(sqlstore.SQLite, sqlQ{ctx, s.r}, id)
	return i, sqlstore.IncidentError("read incident", err)
}

// ListIncidents implements store.Incidents.
func (s *Store) ListIncidents(ctx context.Context, f store.IncidentFilter) ([]store.Incident, string, error) {
	is, next, err := sqlstore.ListIncidents(sqlstore.SQLite, sqlQ{ctx, s.r}, f)
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
	err := s.tx(ctx, "act on incident", func(tx *sql.Tx) error {
		var err error
		i, err = sqlstore.ActIncident(sqlstore.SQLite, sqlQ{ctx, tx}, id, ack, by, at)
		return sqlstore.IncidentError("act on incident", err)
	})
	return i, err
}

// NoteBreaker implements store.Incidents.
func (s *Store) NoteBreaker(ctx context.Context, destination string, tripped bool, at time.Time) error {
	return s.tx(ctx, "note breaker", func(tx *sql.Tx) error {
		return store.Unavailable("note breaker", sqlstore.NoteBreaker(sqlstore.SQLite, sqlQ{ctx, tx}, destination, tripped, at))
	})
}

// PruneIncidents implements store.Incidents.
func (s *Store) PruneIncidents(ctx context.Context, before time.Time, limit int) (int, error) {
	var n int
	err := s.tx(ctx, "prune incidents", func(tx *sql.Tx) error {
		var err error
		n, err = sqlstore.PruneIncidents(sqlstore.SQLite, sqlQ{ctx, tx}, before, limit)
		return store.Unavailable("prune incidents", err)
	})
	return n, err
}
