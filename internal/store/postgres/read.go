package postgres

import (
	"cmp"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
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
	b.Queue(`SELECT `+eventCols+`, coalesce((SELECT l.body_pruned FROM ledger_entries l WHERE l.event_id = events.id), false), `+sqlstore.InfoColumns("")+`
		FROM events WHERE id = $1`, id).Query(func(rows pgx.Rows) error {
		evs, err := collect(rows, func(sc scanner) (anyhook.Event, error) {
			var ev anyhook.Event
			dest, done := sqlstore.EventDest(&ev)
			if err := sc.Scan(append(append(dest, &ev.BodyPruned), sqlstore.InfoDest(&ev)...)...); err != nil {
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
		ds, err = collect(rows, sqlstore.ScanDelivery)
		return err
	})
	b.Queue(`SELECT a.delivery_id, a.number, a.started_at, a.duration_us, a.status_code, a.error, coalesce(a.response_body, ''), a.outcome
		FROM attempts a JOIN deliveries d ON d.id = a.delivery_id
		WHERE d.event_id = $1 ORDER BY a.delivery_id, a.number`, id).Query(func(rows pgx.Rows) error {
		var err error
		as, err = collect(rows, func(sc scanner) (attempt, error) {
			var a attempt
			dest, done := sqlstore.AttemptDest(&a.Attempt)
			err := sc.Scan(append([]any{&a.delivery}, dest...)...)
			done()
			return a, err
		})
		return err
	})
	var actions []anyhook.Action
	b.Queue(`SELECT `+sqlstore.ActionColumns+` FROM actions WHERE event_id = $1 ORDER BY id`, id).Query(func(rows pgx.Rows) error {
		var err error
		actions, err = collect(rows, sqlstore.ScanAction)
		return err
	})
	var arrivals []anyhook.Arrival
	b.Queue(`SELECT `+sqlstore.ArrivalColumns+` FROM arrivals WHERE event_id = $1 ORDER BY seq`, id).Query(func(rows pgx.Rows) error {
		var err error
		arrivals, err = collect(rows, sqlstore.ScanArrival)
		return err
	})
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return ev, store.Unavailable("event", err)
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

// customPlans runs a list's query as an unnamed statement, planned for
// its parameters each time. A cached prepared statement moves to a
// generic plan after five runs, which judges a filter by its average
// selectivity: a source without deliveries then walked every delivery
// (2 s at 200,000 events) where its own plan reads none (BENCHMARKS.md,
// "The read side at scale").
const customPlans = pgx.QueryExecModeCacheDescribe

// ListEvents implements store.Store.
func (s *Store) ListEvents(ctx context.Context, f store.EventFilter) ([]anyhook.Event, string, error) {
	return listEvents(ctx, s, f, eventCols+`, `+sqlstore.InfoColumns(""), sqlstore.ScanEventInfo, sqlstore.EventKey, s.ListEvents)
}

// ListEventSizes implements store.BodyLister: ListEvents' query reading
// the sizes instead of the bodies.
func (s *Store) ListEventSizes(ctx context.Context, f store.EventFilter) ([]store.EventSize, string, error) {
	return listEvents(ctx, s, f, `id, received_at, octet_length(body)::bigint + octet_length(headers)::bigint`, sqlstore.ScanEventSize, sqlstore.SizeKey, s.ListEventSizes)
}

// EventBodies implements store.BodyLister.
func (s *Store) EventBodies(ctx context.Context, ids []string) ([]anyhook.Event, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+eventCols+`, `+sqlstore.InfoColumns("")+` FROM events WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, store.Unavailable("list events", err)
	}
	evs, err := collect(rows, sqlstore.ScanEventInfo)
	if err != nil {
		return nil, store.Unavailable("list events", err)
	}
	return evs, nil
}

// listEvents lists the events f selects, reading cols of each with scan.
func listEvents[T any](ctx context.Context, s *Store, f store.EventFilter, cols string, scan func(scanner) (T, error),
	key func(T) (string, time.Time), self func(context.Context, store.EventFilter) ([]T, string, error)) ([]T, string, error) {
	if strings.Contains(f.Type, "*") {
		from, to := sqlstore.TypeRange(f.Type)
		rows, err := s.pool.Query(ctx, sqlstore.Postgres.TypesQuery(), from, to, to)
		if err != nil {
			return nil, "", store.Unavailable("list events", err)
		}
		found, err := collect(rows, sqlstore.ScanString)
		if err != nil {
			return nil, "", store.Unavailable("list events", err)
		}
		if types, ok := sqlstore.GlobTypes(f.Type, found); ok {
			return sqlstore.ListTypes(ctx, f, types, self, key)
		}
	}
	if sqlstore.TypeBySource(f) {
		rows, err := s.pool.Query(ctx, sqlstore.Postgres.TypedSourcesQuery(), string(f.Status), string(f.Status))
		if err != nil {
			return nil, "", store.Unavailable("list events", err)
		}
		sources, err := collect(rows, sqlstore.ScanString)
		if err != nil {
			return nil, "", store.Unavailable("list events", err)
		}
		return sqlstore.ListSources(ctx, f, sources, self, key)
	}
	db, done, err := s.snapshot(ctx, f.Status)
	if err != nil {
		return nil, "", store.Unavailable("list events", err)
	}
	defer done()
	dests, ids, none, err := s.shown(ctx, db, f.Status, "", f.Source, "DISTINCT d.event_id")
	if err != nil {
		return nil, "", store.Unavailable("list events", err)
	}
	if none {
		return nil, "", nil
	}
	if ids == nil && typedList(f) && !typedPages(f) {
		if ids, err = s.fewTyped(ctx, db, f); err != nil {
			return nil, "", store.Unavailable("list events", err)
		}
	}
	q, args := eventsSQL(f, cols, dests, ids)
	limit := store.PageLimit(f.Limit)
	rows, err := db.Query(ctx, q, append([]any{customPlans}, args...)...)
	if err != nil {
		return nil, "", store.Unavailable("list events", err)
	}
	evs, err := collect(rows, scan)
	if err != nil {
		return nil, "", store.Unavailable("list events", err)
	}
	evs, next := store.Page(evs, limit, func(ev T) string { id, _ := key(ev); return id })
	return evs, next, nil
}

// typedList reports whether f's events are those with a delivery in a
// status of deliveries_status_source_type (dead, held, resolved) of a
// source and an exact type, which that index answers (0043).
func typedList(f store.EventFilter) bool {
	return f.Status != "" && sqlstore.TypedStatus(f.Status) && f.Source != "" && sqlstore.ExactType(f.Type)
}

// typedPages reports whether a typedList's page is read straight from the
// index, newest event first: with no window (which orders the list by
// receive time), id search or prefix.
func typedPages(f store.EventFilter) bool {
	return f.Q == "" && f.Prefix == "" && !store.EventsByTime(f)
}

// fewTyped reads the ids of the events with a delivery in f's status of
// its source and type when there are at most fewShown of them, for a
// typedList that is not typedPages (a window, say); nil when there are
// more. The planner took such a triple for a few hundred deliveries
// whatever their number (the type is kept only on the deliveries not
// delivered), read every one and sorted their events by receive time:
// dead of stripe's invoice.paid (24,550) over 31 days took 0.3 s warm,
// 1.3 s cold at ten million events.
func (s *Store) fewTyped(ctx context.Context, q queryer, f store.EventFilter) ([]string, error) {
	n := cmp.Or(s.fewShown, defaultFewShown)
	rows, err := q.Query(ctx, `SELECT DISTINCT d.event_id FROM (SELECT d.event_id FROM deliveries d WHERE `+sqlstore.TypedStatusIn("d.")+
		` AND d.status = $1 AND d.source = $2 AND `+sqlstore.Postgres.TypeExpr("d.type")+` = $3 LIMIT `+strconv.Itoa(n+1)+`) AS d`,
		customPlans, string(f.Status), f.Source, store.LowerType(f.Type))
	if err != nil {
		return nil, err
	}
	ids, err := collect(rows, sqlstore.ScanString)
	if err != nil || len(ids) > n {
		return nil, err
	}
	return append([]string{}, ids...), nil
}

// eventsSQL is the query of listEvents, reading cols of the events f
// selects (no glob: those are listed type by type); dests names the
// destinations shown in f's status when it is derived from the pause
// (shownIn); ids, when not nil, are the ids of all the events with a
// delivery in that status, read first.
func eventsSQL(f store.EventFilter, cols string, dests, ids []string) (string, []any) {
	c := sqlstore.NewWhere(sqlstore.Postgres)
	c.AddString("source = ?", f.Source)
	c.AddString("dedup_key = ?", f.Q)
	c.AddType("type", f.Type)
	c.AddPrefix("events.", f.Prefix)
	if ids != nil {
		c.Add("id = ANY(?)", ids)
	} else if f.Status != "" {
		// A delivery keeps its event's source: for a status derived
		// from the pause, the probe filters on it too, so that a source
		// none of whose deliveries go to a held-back destination (or all
		// of whose do) is answered from an index of the pending
		// deliveries by source (or by destination and source), not by
		// walking all its events (1.1 s at a million events). For a
		// stored status the planner then read all of the status's
		// deliveries of the source (dead of a source and type, 48 to
		// 315 ms), unless the type is named too, of a status a person
		// looks through: a delivery keeps its event's type (0043), and
		// the partial index deliveries_status_source_type answers
		// a pair none of whose events has a delivery in the status, where
		// probing each of the pair's events read them all to find none
		// (424,836 at ten million: 2.7 s, 9.8 s cold).
		cond, args, _ := sqlstore.StatusIs("d.", f.Status, dests)
		typed := false
		switch {
		case f.Source == "":
		case sqlstore.DerivedStatus(f.Status):
			cond += " AND d.source = ?"
			args = append(args, f.Source)
		case sqlstore.TypedStatus(f.Status) && sqlstore.ExactType(f.Type):
			cond += " AND " + sqlstore.TypedStatusIn("d.") + " AND d.source = ? AND " + sqlstore.Postgres.TypeExpr("d.type") + " = ?"
			args = append(args, f.Source, store.LowerType(f.Type))
			typed = true
		}
		switch {
		case typed && typedPages(f):
			// The page's events are the first of the index's, newest
			// event first: read them as such, a page's worth at most.
			// As an EXISTS, the planner took the triple for a few
			// hundred deliveries (the type's share of every delivery,
			// not of the status's) and read all of them, then sorted
			// the events: 24,550 for dead of stripe's invoice.paid at
			// ten million events, 0.3-0.45 s warm and 2 s cold.
			if f.Cursor != "" {
				cond += " AND d.event_id < ?"
				args = append(args, f.Cursor)
			}
			c.AddN("id IN (SELECT DISTINCT d.event_id FROM deliveries d WHERE "+cond+
				" ORDER BY d.event_id DESC LIMIT "+strconv.Itoa(store.PageLimit(f.Limit)+1)+")", args...)
		case typed:
			// Many (fewTyped read none): each event of the window, newest
			// first, is probed for one. OFFSET 0 keeps the probe a probe:
			// as a join, the planner read every delivery of the triple
			// and sorted their events.
			c.AddN("EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = events.id AND "+cond+" OFFSET 0)", args...)
		default:
			c.AddN("EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = events.id AND "+cond+")", args...)
		}
	}
	c.AddTime("received_at >= ?", f.Since)
	c.AddTime("received_at < ?", f.Until)
	order := ` ORDER BY id DESC`
	if store.EventsByTime(f) {
		c.AddAfter("events.received_at", "events.id", "events", "received_at", f.Cursor)
		order = ` ORDER BY received_at DESC, id DESC`
	} else {
		c.AddString("id < ?", f.Cursor)
	}
	return `SELECT ` + cols + ` FROM events` + c.String() + order + ` LIMIT ` + strconv.Itoa(store.PageLimit(f.Limit)+1), c.Args()
}

// ListDeliveries implements store.Store.
func (s *Store) ListDeliveries(ctx context.Context, f store.DeliveryFilter) ([]anyhook.Delivery, string, error) {
	db, done, err := s.snapshot(ctx, f.Status)
	if err != nil {
		return nil, "", store.Unavailable("list deliveries", err)
	}
	defer done()
	dests, ids, none, err := s.shown(ctx, db, f.Status, f.Destination, f.Source, "d.id")
	if err != nil {
		return nil, "", store.Unavailable("list deliveries", err)
	}
	if none {
		return nil, "", nil
	}
	q, args := deliveriesSQL(f, dests, ids)
	limit := store.PageLimit(f.Limit)
	rows, err := db.Query(ctx, q, append([]any{customPlans}, args...)...)
	if err != nil {
		return nil, "", store.Unavailable("list deliveries", err)
	}
	ds, err := collect(rows, sqlstore.ScanDelivery)
	if err != nil {
		return nil, "", store.Unavailable("list deliveries", err)
	}
	ds, next := store.Page(ds, limit, func(d anyhook.Delivery) string { return d.ID })
	return ds, next, nil
}

// deliveriesSQL is the query of ListDeliveries: the deliveries alone (a
// delivery keeps its event's source), newest first; dests as in
// sqlstore.DeliveryWhere; ids, when not nil, the ids of all the
// deliveries in f's status, read first.
func deliveriesSQL(f store.DeliveryFilter, dests, ids []string) (string, []any) {
	where, args := sqlstore.DeliveryWhere(sqlstore.Postgres, f, dests)
	if ids != nil {
		args = append(args, ids)
		cond := "d.id = ANY($" + strconv.Itoa(len(args)) + ")"
		if where == "" {
			where = " WHERE " + cond
		} else {
			where += " AND " + cond
		}
	}
	return `SELECT ` + sqlstore.DeliveryColumns("d.") + ` FROM deliveries d` + where +
		sqlstore.DeliveryOrder(f) + ` LIMIT ` + strconv.Itoa(store.PageLimit(f.Limit)+1), args
}

// snapshot is what a list of status st reads through, and done ends it:
// for a status derived from the pause, a repeatable read transaction, so
// that the destinations the list names (shownIn, from the counters,
// which apply the pause) agree with its rows' shown status
// (sqlstore.StatusExpr). Read apart (each
// statement its own snapshot), a pause or resume between the two put
// deliveries shown paused in a list of pending ones and the reverse.
func (s *Store) snapshot(ctx context.Context, st anyhook.DeliveryStatus) (queryer, func(), error) {
	if !sqlstore.DerivedStatus(st) {
		return s.pool, func() {}, nil
	}
	tx, err := s.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return nil, nil, err
	}
	// A read-only transaction has nothing to commit; a rollback ends it
	// even when ctx is done.
	return tx, func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }, nil
}

// defaultFewShown bounds the deliveries the counters show in a derived status
// that a list reads by id: their ids first (by an index on the
// destination, the query having no order to walk), then the page among
// them. Asked in one query, the planner judged the status's share by its
// statistics: with a paused destination's 300,000 untried deliveries it
// took another's one for thousands and walked every event of a window
// to find it (3.2 s at a million events).
const defaultFewShown = 2000

// shown reads, through q, what a list of status st (of destination dest
// and source, if not "") selects when st is derived from the pause: the
// destinations the counters show in st (shownIn) and, when they show few
// (defaultFewShown), col (an id column of the deliveries d, of text) of
// all of them, read by a query with no order, which an index on the
// destination serves whatever the planner thinks of the status's share.
// none reports that the list selects nothing.
func (s *Store) shown(ctx context.Context, q queryer, st anyhook.DeliveryStatus, dest, source, col string) (dests, ids []string, none bool, err error) {
	dests, n, err := shownIn(ctx, q, st, dest)
	if err != nil {
		return nil, nil, false, err
	}
	cond, args, none := sqlstore.StatusIs("d.", st, dests)
	if none || !sqlstore.DerivedStatus(st) || n > cmp.Or(s.fewShown, defaultFewShown) {
		return dests, nil, none, nil
	}
	w := sqlstore.NewWhere(sqlstore.Postgres)
	w.AddN(cond, args...)
	w.AddString("d.source = ?", source)
	rows, err := q.Query(ctx, `SELECT `+col+` FROM deliveries d`+w.String(), append([]any{customPlans}, w.Args()...)...)
	if err != nil {
		return nil, nil, false, err
	}
	if ids, err = collect(rows, sqlstore.ScanString); err != nil {
		return nil, nil, false, err
	}
	return dests, ids, len(ids) == 0, nil
}

// shownIn reads, through q, the delivery counters and names the
// destinations shown with deliveries in st (of dest, if not "") when st is
// derived from the pause (sqlstore.ShownIn), and how many deliveries they
// show in st; nil when st is not derived.
func shownIn(ctx context.Context, q queryer, st anyhook.DeliveryStatus, dest string) ([]string, int, error) {
	if !sqlstore.DerivedStatus(st) {
		return nil, 0, nil
	}
	rows, err := q.Query(ctx, sqlstore.CountersQuery)
	if err != nil {
		return nil, 0, err
	}
	cs, err := collect(rows, sqlstore.ScanDepth)
	if err != nil {
		return nil, 0, err
	}
	dests := sqlstore.ShownIn(cs, st, dest)
	return dests, sqlstore.ShownTotal(cs, st, dests), nil
}

// Counts implements store.Store.
func (s *Store) Counts(ctx context.Context) (map[anyhook.DeliveryStatus]int, error) {
	cs, err := s.counters(ctx)
	if err != nil {
		return nil, store.Unavailable("counts", err)
	}
	return sqlstore.CountsByStatus(cs), nil
}
