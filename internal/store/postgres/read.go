package postgres

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// Event implements store.Store: the event, its deliveries and their
// attempts in one round trip.
func (s *Store) Event(ctx context.Context, id string) (anyhook.Event, error) {
	var ev anyhook.Event
	found := false
	var ds []anyhook.Delivery
	type attempt struct {
		delivery string
		anyhook.Attempt
	}
	var as []attempt
	b := &pgx.Batch{}
	b.Queue(`SELECT `+eventCols+`, coalesce((SELECT l.body_pruned FROM ledger_entries l WHERE l.event_id = events.id), false), `+store.InfoColumns("")+`
		FROM events WHERE id = $1`, id).Query(func(rows pgx.Rows) error {
		evs, err := collect(rows, func(sc scanner) (anyhook.Event, error) {
			var ev anyhook.Event
			dest, done := eventDest(&ev)
			if err := sc.Scan(append(append(dest, &ev.BodyPruned), store.InfoDest(&ev)...)...); err != nil {
				return ev, err
			}
			return ev, done()
		})
		if len(evs) == 1 {
			ev, found = evs[0], true
		}
		return err
	})
	b.Queue(`SELECT `+deliveryCols+` FROM deliveries WHERE event_id = $1 ORDER BY id`, id).Query(func(rows pgx.Rows) error {
		var err error
		ds, err = collect(rows, scanDelivery)
		return err
	})
	b.Queue(`SELECT a.delivery_id, a.number, a.started_at, a.duration_us, a.status_code, a.error, coalesce(a.response_body, '')
		FROM attempts a JOIN deliveries d ON d.id = a.delivery_id
		WHERE d.event_id = $1 ORDER BY a.delivery_id, a.number`, id).Query(func(rows pgx.Rows) error {
		var err error
		as, err = collect(rows, func(sc scanner) (attempt, error) {
			var a attempt
			var us int64
			err := sc.Scan(&a.delivery, &a.Number, &a.StartedAt, &us, &a.StatusCode, &a.Error, &a.ResponseBody)
			a.StartedAt, a.Duration = utc(a.StartedAt), time.Duration(us)*time.Microsecond
			return a, err
		})
		return err
	})
	var actions []anyhook.Action
	b.Queue(`SELECT id, event_id, action, delivery_id, destination, actor, reason, at FROM actions WHERE event_id = $1 ORDER BY id`, id).
		Query(func(rows pgx.Rows) error {
			var err error
			actions, err = collect(rows, func(sc scanner) (anyhook.Action, error) {
				var a anyhook.Action
				err := sc.Scan(&a.ID, &a.EventID, &a.Kind, &a.DeliveryID, &a.Destination, &a.Actor, &a.Reason, &a.At)
				a.At = utc(a.At)
				return a, err
			})
			return err
		})
	var arrivals []anyhook.Arrival
	b.Queue(`SELECT seq, received_at, remote_addr, headers, headers_cut FROM arrivals WHERE event_id = $1 ORDER BY seq`, id).Query(func(rows pgx.Rows) error {
		var err error
		arrivals, err = collect(rows, scanArrival)
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return ev, unavailable("event", err)
	}
	if !found {
		return ev, fmt.Errorf("event %s: %w", id, anyhook.ErrNotFound)
	}
	byID := make(map[string]int, len(ds))
	for i, d := range ds {
		byID[d.ID] = i
	}
	for _, a := range as {
		if i, ok := byID[a.delivery]; ok {
			ds[i].Attempts = append(ds[i].Attempts, a.Attempt)
		}
	}
	ev.Deliveries, ev.Actions, ev.Arrivals = ds, actions, arrivals
	return ev, nil
}

func scanArrival(sc scanner) (anyhook.Arrival, error) {
	var a anyhook.Arrival
	var h []byte
	if err := sc.Scan(&a.Seq, &a.ReceivedAt, &a.RemoteAddr, &h, &a.HeaderCut); err != nil {
		return a, err
	}
	a.ReceivedAt = utc(a.ReceivedAt)
	var err error
	a.Header, err = store.DecodeHeader(h)
	return a, err
}

// conds builds a WHERE clause with numbered parameters.
type conds struct {
	where []string
	args  []any
}

// add appends cond, in which ? stands for arg.
func (c *conds) add(cond string, arg any) {
	c.args = append(c.args, arg)
	c.where = append(c.where, strings.Replace(cond, "?", "$"+strconv.Itoa(len(c.args)), 1))
}

// raw appends a condition without a parameter.
func (c *conds) raw(cond string) {
	if cond != "" {
		c.where = append(c.where, cond)
	}
}

func (c *conds) String() string {
	if len(c.where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(c.where, " AND ")
}

// ListEvents implements store.Store.
func (s *Store) ListEvents(ctx context.Context, f store.EventFilter) ([]anyhook.Event, string, error) {
	var c conds
	if f.Source != "" {
		c.add("source = ?", f.Source)
	}
	if f.Q != "" {
		c.add("dedup_key = ?", f.Q)
	}
	if f.Type != "" {
		c.add(`coalesce(type, '') ILIKE ? ESCAPE '\'`, store.TypePattern(f.Type))
	}
	if f.Status != "" {
		stored, extra := store.StatusCond("d.", f.Status)
		if extra != "" {
			extra = " AND " + extra
		}
		c.add("EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = events.id AND d.status = ?"+extra+")", string(stored))
	}
	if !f.Since.IsZero() {
		c.add("received_at >= ?", f.Since)
	}
	if !f.Until.IsZero() {
		c.add("received_at < ?", f.Until)
	}
	if f.Cursor != "" {
		c.add("id < ?", f.Cursor)
	}
	limit := store.PageLimit(f.Limit)
	rows, err := s.pool.Query(ctx, `SELECT `+eventCols+`, `+store.InfoColumns("")+` FROM events`+c.String()+` ORDER BY id DESC LIMIT `+strconv.Itoa(limit+1), c.args...)
	if err != nil {
		return nil, "", unavailable("list events", err)
	}
	evs, err := collect(rows, func(sc scanner) (anyhook.Event, error) {
		var ev anyhook.Event
		dest, done := eventDest(&ev)
		if err := sc.Scan(append(dest, store.InfoDest(&ev)...)...); err != nil {
			return ev, err
		}
		return ev, done()
	})
	if err != nil {
		return nil, "", unavailable("list events", err)
	}
	evs, next := store.Page(evs, limit, func(ev anyhook.Event) string { return ev.ID })
	return evs, next, nil
}

// deliveryWhere selects deliveries d joined with their events e.
func deliveryWhere(f store.DeliveryFilter) (string, []any) {
	var c conds
	if f.Status != "" {
		stored, extra := store.StatusCond("d.", f.Status)
		c.add("d.status = ?", string(stored))
		c.raw(extra)
	}
	if f.Destination != "" {
		c.add("d.destination = ?", f.Destination)
	}
	if f.Source != "" {
		c.add("e.source = ?", f.Source)
	}
	if !f.Since.IsZero() {
		c.add("d.created_at >= ?", f.Since)
	}
	if !f.Until.IsZero() {
		c.add("d.created_at < ?", f.Until)
	}
	if f.Cursor != "" {
		c.add("d.id < ?", f.Cursor)
	}
	return c.String(), c.args
}

// ListDeliveries implements store.Store.
func (s *Store) ListDeliveries(ctx context.Context, f store.DeliveryFilter) ([]anyhook.Delivery, string, error) {
	where, args := deliveryWhere(f)
	limit := store.PageLimit(f.Limit)
	rows, err := s.pool.Query(ctx, `SELECT `+deliveryColumns("d.")+` FROM deliveries d JOIN events e ON e.id = d.event_id`+where+
		` ORDER BY d.id DESC LIMIT `+strconv.Itoa(limit+1), args...)
	if err != nil {
		return nil, "", unavailable("list deliveries", err)
	}
	ds, err := collect(rows, scanDelivery)
	if err != nil {
		return nil, "", unavailable("list deliveries", err)
	}
	ds, next := store.Page(ds, limit, func(d anyhook.Delivery) string { return d.ID })
	return ds, next, nil
}

// Counts implements store.Store.
func (s *Store) Counts(ctx context.Context) (map[anyhook.DeliveryStatus]int, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+store.StatusExpr("deliveries.")+`, count(*) FROM deliveries GROUP BY 1`)
	if err != nil {
		return nil, unavailable("counts", err)
	}
	m := map[anyhook.DeliveryStatus]int{}
	type count struct {
		status string
		n      int
	}
	cs, err := collect(rows, func(sc scanner) (count, error) {
		var c count
		return c, sc.Scan(&c.status, &c.n)
	})
	if err != nil {
		return nil, unavailable("counts", err)
	}
	for _, c := range cs {
		m[anyhook.DeliveryStatus(c.status)] = c.n
	}
	return m, nil
}
