package sqlstore

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// Incidents (store.Incidents): tables incidents and incident_events. The
// logic is written once, here, over AlertTx (any transaction or
// connection); each backend runs the writes in a transaction of its own.
// Two processes land on one row through the unique index of unresolved
// incidents per (destination, kind) and the upsert on it; a change that
// alerts (an open, a reopen, an escalation, a resolve) is a conditional
// write whose RETURNING tells exactly one writer.

const incidentColumns = `id, destination, kind, state, first_seen, last_seen, attempts, events, latest_error, healthy_since,
	escalated_at, acknowledged_by, acknowledged_at, note, resolved_at, resolved_by, reopens, breaker_tripped_at, breaker_resumed_at`

// ScanIncident scans a row of incidentColumns.
func ScanIncident(sc Scanner) (store.Incident, error) {
	var i store.Incident
	err := sc.Scan(&i.ID, &i.Destination, &i.Kind, &i.State, Time(&i.FirstSeen), Time(&i.LastSeen), &i.Attempts, &i.Events, &i.LatestError,
		Time(&i.HealthySince), Time(&i.EscalatedAt), &i.AcknowledgedBy, Time(&i.AcknowledgedAt), &i.Note, Time(&i.ResolvedAt), &i.ResolvedBy,
		&i.Reopens, Time(&i.BreakerTrippedAt), Time(&i.BreakerResumedAt))
	return i, err
}

// failureGroup is the failures of one (destination, kind) in a batch.
type failureGroup struct {
	dest, kind  string
	first, last time.Time
	n           int
	err         string // the latest's
	events      []string
}

// RecordIncidents implements store.Incidents.RecordIncidents in tx.
func RecordIncidents(d Dialect, tx AlertTx, as []store.IncidentAttempt, p store.IncidentPolicy) ([]store.IncidentChange, error) {
	groups := map[[2]string]*failureGroup{}
	lastFail := map[string]time.Time{}
	for _, a := range as {
		if a.Kind == "" {
			continue
		}
		k := [2]string{a.Destination, a.Kind}
		g := groups[k]
		if g == nil {
			g = &failureGroup{dest: a.Destination, kind: a.Kind, first: a.At, last: a.At}
			groups[k] = g
		}
		g.n++
		if a.At.Before(g.first) {
			g.first = a.At
		}
		if !a.At.Before(g.last) {
			g.last, g.err = a.At, a.Error
		}
		if a.EventID != "" && !slices.Contains(g.events, a.EventID) {
			g.events = append(g.events, a.EventID)
		}
		if a.At.After(lastFail[a.Destination]) {
			lastFail[a.Destination] = a.At
		}
	}
	// The first success after the destination's last failure in the batch.
	okAt := map[string]time.Time{}
	for _, a := range as {
		if a.Kind != "" || !a.At.After(lastFail[a.Destination]) {
			continue
		}
		if t, ok := okAt[a.Destination]; !ok || a.At.Before(t) {
			okAt[a.Destination] = a.At
		}
	}
	// In (destination, kind) order: the rows two batches lock, they lock
	// in one order.
	ordered := make([]*failureGroup, 0, len(groups))
	for _, g := range groups {
		ordered = append(ordered, g)
	}
	slices.SortFunc(ordered, func(a, b *failureGroup) int {
		return cmp.Or(cmp.Compare(a.dest, b.dest), cmp.Compare(a.kind, b.kind))
	})
	var changes []change
	for _, g := range ordered {
		cs, err := recordGroup(d, tx, g, p)
		if err != nil {
			return nil, err
		}
		changes = append(changes, cs...)
	}
	for _, dest := range sortedKeys(lastFail) {
		q := `UPDATE incidents SET healthy_since = NULL WHERE destination = ? AND state <> 'resolved' AND healthy_since <= ?`
		if _, err := tx.Exec(d.Rebind(q), []any{dest, d.Time(lastFail[dest])}); err != nil {
			return nil, err
		}
	}
	for _, dest := range sortedKeys(okAt) {
		q := `UPDATE incidents SET healthy_since = ? WHERE destination = ? AND state <> 'resolved' AND healthy_since IS NULL AND last_seen < ?`
		if _, err := tx.Exec(d.Rebind(q), []any{d.Time(okAt[dest]), dest, d.Time(okAt[dest])}); err != nil {
			return nil, err
		}
	}
	return readChanges(d, tx, changes)
}

type change struct{ kind, id string }

func sortedKeys(m map[string]time.Time) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// recordGroup counts one group's failures on its incident.
func recordGroup(d Dialect, tx AlertTx, g *failureGroup, p store.IncidentPolicy) ([]change, error) {
	var out []change
	if p.ReopenWithin > 0 {
		// The latest incident of the kind resolved within the window
		// reopens, unless an unresolved one exists (the upsert counts on
		// that). A concurrent reopen of the same row waits for the
		// first, then finds it no longer resolved.
		q := `UPDATE incidents SET state = 'open', reopens = reopens + 1, resolved_at = NULL, resolved_by = '', healthy_since = NULL,
				acknowledged_by = '', acknowledged_at = NULL
			WHERE state = 'resolved' AND id = (SELECT id FROM incidents WHERE destination = ? AND kind = ? AND state = 'resolved'
				AND resolved_at >= ? ORDER BY resolved_at DESC LIMIT 1)
			AND NOT EXISTS (SELECT 1 FROM incidents WHERE destination = ? AND kind = ? AND state <> 'resolved')
			RETURNING id`
		err := tx.Query(d.Rebind(q), []any{g.dest, g.kind, d.Time(g.first.Add(-p.ReopenWithin)), g.dest, g.kind}, func(sc Scanner) error {
			var id string
			err := sc.Scan(&id)
			out = append(out, change{store.ChangeReopened, id})
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	newID := store.NewID()
	q := `INSERT INTO incidents (id, destination, kind, state, first_seen, last_seen, attempts, events, latest_error)
		VALUES (?, ?, ?, 'open', ?, ?, ?, 0, ?)
		ON CONFLICT (destination, kind) WHERE state <> 'resolved' DO UPDATE SET
			attempts = incidents.attempts + excluded.attempts,
			first_seen = CASE WHEN excluded.first_seen < incidents.first_seen THEN excluded.first_seen ELSE incidents.first_seen END,
			last_seen = CASE WHEN excluded.last_seen > incidents.last_seen THEN excluded.last_seen ELSE incidents.last_seen END,
			latest_error = CASE WHEN excluded.last_seen >= incidents.last_seen THEN excluded.latest_error ELSE incidents.latest_error END
		RETURNING id`
	var id string
	err := tx.Query(d.Rebind(q), []any{newID, g.dest, g.kind, d.Time(g.first), d.Time(g.last), g.n, store.Text(g.err)}, func(sc Scanner) error {
		return sc.Scan(&id)
	})
	if err != nil {
		return nil, err
	}
	if id == "" {
		return nil, errors.New("record incident: the upsert returned no row")
	}
	if id == newID {
		out = append(out, change{store.ChangeOpened, id})
	}
	if len(g.events) > 0 {
		var b strings.Builder
		args := make([]any, 0, 3*len(g.events))
		b.WriteString(`INSERT INTO incident_events (incident_id, event_id, seen_at) VALUES `)
		for i, ev := range g.events {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(?, ?, ?)")
			args = append(args, id, ev, d.Time(g.last))
		}
		b.WriteString(` ON CONFLICT (incident_id, event_id) DO NOTHING`)
		n, err := tx.Exec(d.Rebind(b.String()), args)
		if err != nil {
			return nil, err
		}
		if n > 0 {
			if _, err := tx.Exec(d.Rebind(`UPDATE incidents SET events = events + ? WHERE id = ?`), []any{n, id}); err != nil {
				return nil, err
			}
		}
	}
	if p.EscalateEvents > 0 {
		q := `UPDATE incidents SET escalated_at = ? WHERE id = ? AND state = 'open' AND escalated_at IS NULL AND events >= ? RETURNING id`
		err := tx.Query(d.Rebind(q), []any{d.Time(g.last), id, p.EscalateEvents}, func(sc Scanner) error {
			var id string
			err := sc.Scan(&id)
			out = append(out, change{store.ChangeEscalated, id})
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// readChanges reads the incidents changed, as they are now.
func readChanges(d Dialect, tx AlertTx, cs []change) ([]store.IncidentChange, error) {
	out := make([]store.IncidentChange, 0, len(cs))
	for _, c := range cs {
		i, err := readIncident(d, tx, c.id)
		if err != nil {
			return nil, err
		}
		out = append(out, store.IncidentChange{Change: c.kind, Incident: i})
	}
	return out, nil
}

func readIncident(d Dialect, q AlertTx, id string) (store.Incident, error) {
	var i store.Incident
	if store.TextProblem(id) != "" {
		// No incident's id holds such bytes, and PostgreSQL refuses them
		// in a query: a page's URL must not make the store look failed.
		return i, fmt.Errorf("incident %q: %w", id, anyhook.ErrNotFound)
	}
	found := false
	err := q.Query(d.Rebind(`SELECT `+incidentColumns+` FROM incidents WHERE id = ?`), []any{id}, func(sc Scanner) error {
		var err error
		i, err = ScanIncident(sc)
		found = true
		return err
	})
	if err == nil && !found {
		err = fmt.Errorf("incident %s: %w", id, anyhook.ErrNotFound)
	}
	return i, err
}

// SweepIncidents implements store.Incidents.SweepIncidents in tx.
func SweepIncidents(d Dialect, tx AlertTx, now time.Time, p store.IncidentPolicy) ([]store.IncidentChange, error) {
	var cs []change
	collect := func(kind string) func(Scanner) error {
		return func(sc Scanner) error {
			var id string
			err := sc.Scan(&id)
			cs = append(cs, change{kind, id})
			return err
		}
	}
	q := `UPDATE incidents SET state = 'resolved', resolved_at = ?, resolved_by = ?
		WHERE state <> 'resolved' AND healthy_since IS NOT NULL AND healthy_since <= ? RETURNING id`
	if err := tx.Query(d.Rebind(q), []any{d.Time(now), store.ResolvedByAuto, d.Time(now.Add(-p.ResolveAfter))}, collect(store.ChangeResolved)); err != nil {
		return nil, err
	}
	if p.EscalateAfter > 0 {
		q := `UPDATE incidents SET escalated_at = ? WHERE state = 'open' AND escalated_at IS NULL AND first_seen <= ? RETURNING id`
		if err := tx.Query(d.Rebind(q), []any{d.Time(now), d.Time(now.Add(-p.EscalateAfter))}, collect(store.ChangeEscalated)); err != nil {
			return nil, err
		}
	}
	slices.SortStableFunc(cs, func(a, b change) int { return cmp.Compare(a.id, b.id) })
	return readChanges(d, tx, cs)
}

// Incident reads one incident with its sample.
func Incident(d Dialect, q AlertTx, id string) (store.Incident, error) {
	i, err := readIncident(d, q, id)
	if err != nil {
		return i, err
	}
	err = q.Query(d.Rebind(`SELECT event_id FROM incident_events WHERE incident_id = ? ORDER BY seen_at, event_id LIMIT ?`), []any{id, store.IncidentSample},
		func(sc Scanner) error {
			var ev string
			err := sc.Scan(&ev)
			i.Sample = append(i.Sample, ev)
			return err
		})
	return i, err
}

// ListIncidents lists incidents newest first (ids are UUIDv7).
func ListIncidents(d Dialect, q AlertTx, f store.IncidentFilter) ([]store.Incident, string, error) {
	limit := store.PageLimit(f.Limit)
	if store.TextProblem(f.Destination) != "" || store.TextProblem(f.Cursor) != "" {
		return nil, "", nil // no incident has such a destination or id (readIncident)
	}
	var where []string
	var args []any
	switch f.State {
	case "":
	case "unresolved":
		where = append(where, "state <> 'resolved'")
	default:
		where, args = append(where, "state = ?"), append(args, f.State)
	}
	if f.Destination != "" {
		where, args = append(where, "destination = ?"), append(args, f.Destination)
	}
	if f.Cursor != "" {
		where, args = append(where, "id < ?"), append(args, f.Cursor)
	}
	sql := `SELECT ` + incidentColumns + ` FROM incidents`
	if len(where) > 0 {
		sql += ` WHERE ` + strings.Join(where, " AND ")
	}
	sql += ` ORDER BY id DESC LIMIT ?`
	var is []store.Incident
	err := q.Query(d.Rebind(sql), append(args, limit+1), func(sc Scanner) error {
		i, err := ScanIncident(sc)
		is = append(is, i)
		return err
	})
	if err != nil {
		return nil, "", err
	}
	is, next := store.Page(is, limit, func(i store.Incident) string { return i.ID })
	return is, next, nil
}

// ActIncident acknowledges (ack) or resolves an incident by an actor.
func ActIncident(d Dialect, tx AlertTx, id string, ack bool, by store.Actor, at time.Time) (store.Incident, error) {
	if store.TextProblem(id) != "" {
		return readIncident(d, tx, id) // not found
	}
	name := by.Name
	if name == "" {
		name = "unknown"
	}
	q := `UPDATE incidents SET state = 'acknowledged', acknowledged_by = ?, acknowledged_at = ?,
		note = CASE WHEN ? <> '' THEN ? ELSE note END WHERE id = ? AND state = 'open'`
	if !ack {
		q = `UPDATE incidents SET state = 'resolved', resolved_by = ?, resolved_at = ?, healthy_since = NULL,
		note = CASE WHEN ? <> '' THEN ? ELSE note END WHERE id = ? AND state <> 'resolved'`
	}
	n, err := tx.Exec(d.Rebind(q), []any{name, d.Time(at), by.Reason, by.Reason, id})
	if err != nil {
		return store.Incident{}, err
	}
	i, err := Incident(d, tx, id)
	if err != nil {
		return i, err
	}
	if n == 0 {
		verb := "acknowledge"
		if !ack {
			verb = "resolve"
		}
		hint := "it can only be resolved"
		if i.State == "resolved" {
			hint = "a resolved incident takes no action; it reopens by itself if the destination fails again"
		}
		return i, stateError(fmt.Sprintf("incident %s is %s, so it cannot be %sd: %s", id, i.State, verb, hint))
	}
	return i, nil
}

// stateError is an action the incident's state does not allow: an
// anyhook.ErrInvalid whose text is whole (no ": invalid" at its end).
type stateError string

func (e stateError) Error() string { return string(e) }
func (e stateError) Unwrap() error { return anyhook.ErrInvalid }

// NoteBreaker implements store.Incidents.NoteBreaker in tx.
func NoteBreaker(d Dialect, tx AlertTx, destination string, tripped bool, at time.Time) error {
	col := "breaker_resumed_at"
	if tripped {
		col = "breaker_tripped_at"
	}
	_, err := tx.Exec(d.Rebind(`UPDATE incidents SET `+col+` = ? WHERE destination = ? AND state <> 'resolved'`), []any{d.Time(at), destination})
	return err
}

// PruneIncidents deletes at most limit incidents resolved before before,
// with their events, oldest first; it returns how many. One statement
// picks them and the deletes name them, in one transaction: an incident
// that reopens meanwhile is no longer resolved, and stays.
func PruneIncidents(d Dialect, tx AlertTx, before time.Time, limit int) (int, error) {
	var ids []any
	err := tx.Query(d.Rebind(`SELECT id FROM incidents WHERE state = 'resolved' AND resolved_at < ? ORDER BY resolved_at LIMIT ?`), []any{d.Time(before), limit},
		func(sc Scanner) error {
			var id string
			err := sc.Scan(&id)
			ids = append(ids, id)
			return err
		})
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	in := "(?" + strings.Repeat(",?", len(ids)-1) + ")"
	if _, err := tx.Exec(d.Rebind(`DELETE FROM incident_events WHERE incident_id IN `+in), ids); err != nil {
		return 0, err
	}
	n, err := tx.Exec(d.Rebind(`DELETE FROM incidents WHERE state = 'resolved' AND id IN `+in), ids)
	return int(n), err
}

// IncidentError passes the errors a caller branches on through and marks
// the rest as the store's failure.
func IncidentError(op string, err error) error {
	if errors.Is(err, anyhook.ErrNotFound) || errors.Is(err, anyhook.ErrInvalid) {
		return err
	}
	return store.Unavailable(op, err)
}
