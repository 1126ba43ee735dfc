package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// Event implements store.Store.
func (s *Store) Event(ctx context.Context, id string) (anyhook.Event, error) {
	var pruned bool
	var info anyhook.Event
	ev, err := scanEvent(alsoScan{s.r.QueryRowContext(ctx, `SELECT `+eventCols+`, `+prunedCol+`, `+store.InfoColumns("")+` FROM events WHERE id = ?`, id),
		append([]any{&pruned}, store.InfoDest(&info)...)})
	ev.BodyPruned = pruned
	setInfo(&ev, &info)
	if errors.Is(err, sql.ErrNoRows) {
		return ev, fmt.Errorf("event %s: %w", id, anyhook.ErrNotFound)
	}
	if err != nil {
		return ev, unavailable(err)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT `+deliveryCols+` FROM deliveries WHERE event_id = ? ORDER BY id`, id)
	if err != nil {
		return ev, unavailable(err)
	}
	defer rows.Close()
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return ev, unavailable(err)
		}
		ev.Deliveries = append(ev.Deliveries, d)
	}
	if err := rows.Err(); err != nil {
		return ev, unavailable(err)
	}
	if ev.Actions, err = s.actions(ctx, id); err != nil {
		return ev, err
	}
	if ev.Arrivals, err = s.arrivals(ctx, id); err != nil {
		return ev, err
	}
	for i := range ev.Deliveries {
		d := &ev.Deliveries[i]
		rows, err := s.r.QueryContext(ctx, `SELECT number, started_at, duration_us, status_code, error, coalesce(response_body, x'')
			FROM attempts WHERE delivery_id = ? ORDER BY number`, d.ID)
		if err != nil {
			return ev, unavailable(err)
		}
		for rows.Next() {
			var a anyhook.Attempt
			var started, dur int64
			if err := rows.Scan(&a.Number, &started, &dur, &a.StatusCode, &a.Error, &a.ResponseBody); err != nil {
				rows.Close()
				return ev, unavailable(err)
			}
			a.StartedAt, a.Duration = fromMicros(started), time.Duration(dur)*time.Microsecond
			d.Attempts = append(d.Attempts, a)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return ev, unavailable(err)
		}
	}
	return ev, nil
}

// actions reads the audit trail of event id, oldest first.
func (s *Store) actions(ctx context.Context, id string) ([]anyhook.Action, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT id, event_id, action, delivery_id, destination, actor, reason, at
		FROM actions WHERE event_id = ? ORDER BY id`, id)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []anyhook.Action
	for rows.Next() {
		var a anyhook.Action
		var at int64
		if err := rows.Scan(&a.ID, &a.EventID, &a.Kind, &a.DeliveryID, &a.Destination, &a.Actor, &a.Reason, &at); err != nil {
			return nil, unavailable(err)
		}
		a.At = fromMicros(at)
		out = append(out, a)
	}
	return out, unavailable(rows.Err())
}

// ListEvents implements store.Store.
func (s *Store) ListEvents(ctx context.Context, f store.EventFilter) ([]anyhook.Event, string, error) {
	var conds []string
	var args []any
	add := func(cond string, arg any) { conds = append(conds, cond); args = append(args, arg) }
	from, order := ` FROM events`, ` ORDER BY events.id DESC`
	if f.Status != "" {
		// Walk the deliveries in that status newest first (index
		// deliveries_status_event): a rare status such as held must not
		// make the query read every event to find none.
		from = ` FROM deliveries d CROSS JOIN events ON events.id = d.event_id`
		order = ` GROUP BY d.event_id ORDER BY d.event_id DESC`
		stored, extra := store.StatusCond("d.", f.Status)
		add("d.status = ?", stored)
		if extra != "" {
			conds = append(conds, extra)
		}
		if f.Cursor != "" {
			add("d.event_id < ?", f.Cursor)
		}
	} else if f.Cursor != "" {
		add("events.id < ?", f.Cursor)
	}
	if f.Source != "" {
		add("events.source = ?", f.Source)
	}
	if f.Q != "" {
		add("events.dedup_key = ?", f.Q)
	}
	if f.Type != "" {
		add(`coalesce(events.type, '') LIKE ? ESCAPE '\'`, store.TypePattern(f.Type))
	}
	if !f.Since.IsZero() {
		add("events.received_at >= ?", micros(f.Since))
	}
	if !f.Until.IsZero() {
		add("events.received_at < ?", micros(f.Until))
	}
	limit := store.PageLimit(f.Limit)
	q := `SELECT ` + eventColumns("events.") + `, ` + store.InfoColumns("events.") + from + where(conds) + order + ` LIMIT ` + strconv.Itoa(limit+1)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", unavailable(err)
	}
	defer rows.Close()
	var evs []anyhook.Event
	for rows.Next() {
		var info anyhook.Event
		ev, err := scanEvent(alsoScan{rows, store.InfoDest(&info)})
		if err != nil {
			return nil, "", unavailable(err)
		}
		setInfo(&ev, &info)
		evs = append(evs, ev)
	}
	if err := rows.Err(); err != nil {
		return nil, "", unavailable(err)
	}
	evs, next := store.Page(evs, limit, func(ev anyhook.Event) string { return ev.ID })
	return evs, next, nil
}

func deliveryWhere(f store.DeliveryFilter) (string, []any) {
	var conds []string
	var args []any
	add := func(cond string, arg any) { conds = append(conds, cond); args = append(args, arg) }
	if f.Status != "" {
		stored, extra := store.StatusCond("d.", f.Status)
		add("d.status = ?", stored)
		if extra != "" {
			conds = append(conds, extra)
		}
	}
	if f.Destination != "" {
		add("d.destination = ?", f.Destination)
	}
	if f.Source != "" {
		add("e.source = ?", f.Source)
	}
	if !f.Since.IsZero() {
		add("d.created_at >= ?", micros(f.Since))
	}
	if !f.Until.IsZero() {
		add("d.created_at < ?", micros(f.Until))
	}
	if f.Cursor != "" {
		add("d.id < ?", f.Cursor)
	}
	return where(conds), args
}

// ListDeliveries implements store.Store.
func (s *Store) ListDeliveries(ctx context.Context, f store.DeliveryFilter) ([]anyhook.Delivery, string, error) {
	w, args := deliveryWhere(f)
	limit := store.PageLimit(f.Limit)
	q := `SELECT ` + deliveryColumns("d.") + ` FROM deliveries d JOIN events e ON e.id = d.event_id` + w + ` ORDER BY d.id DESC LIMIT ` + strconv.Itoa(limit+1)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, "", unavailable(err)
	}
	defer rows.Close()
	var ds []anyhook.Delivery
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, "", unavailable(err)
		}
		ds = append(ds, d)
	}
	if err := rows.Err(); err != nil {
		return nil, "", unavailable(err)
	}
	ds, next := store.Page(ds, limit, func(d anyhook.Delivery) string { return d.ID })
	return ds, next, nil
}

// Counts implements store.Store.
func (s *Store) Counts(ctx context.Context) (map[anyhook.DeliveryStatus]int, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+store.StatusExpr("deliveries.")+`, count(*) FROM deliveries GROUP BY 1`)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	m := map[anyhook.DeliveryStatus]int{}
	for rows.Next() {
		var st anyhook.DeliveryStatus
		var n int
		if err := rows.Scan(&st, &n); err != nil {
			return nil, unavailable(err)
		}
		m[st] = n
	}
	return m, unavailable(rows.Err())
}

// and adds cond to a WHERE clause built by where.
func and(w, cond string) string {
	if w == "" {
		return " WHERE " + cond
	}
	return w + " AND " + cond
}

func where(conds []string) string {
	if len(conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(conds, " AND ")
}

// arrivals reads the recorded duplicate arrivals of event id, oldest first.
func (s *Store) arrivals(ctx context.Context, id string) ([]anyhook.Arrival, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT seq, received_at, remote_addr, headers, headers_cut FROM arrivals WHERE event_id = ? ORDER BY seq`, id)
	if err != nil {
		return nil, unavailable(err)
	}
	defer rows.Close()
	var out []anyhook.Arrival
	for rows.Next() {
		var a anyhook.Arrival
		var at int64
		var h []byte
		if err := rows.Scan(&a.Seq, &at, &a.RemoteAddr, &h, &a.HeaderCut); err != nil {
			return nil, unavailable(err)
		}
		a.ReceivedAt = fromMicros(at)
		if a.Header, err = store.DecodeHeader(h); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, unavailable(rows.Err())
}

// setInfo copies the columns of store.InfoColumns, scanned into info, to
// ev.
func setInfo(ev, info *anyhook.Event) {
	ev.RemoteAddr, ev.Verification, ev.NotRouted = info.RemoteAddr, info.Verification, info.NotRouted
	if ev.Verification.Method == "" {
		ev.Verification.Secret = -1
	}
}
