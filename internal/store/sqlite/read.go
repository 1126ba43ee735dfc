package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// Event implements store.Store.
func (s *Store) Event(ctx context.Context, id string) (anyhook.Event, error) {
	var ev anyhook.Event
	dest, done := sqlstore.EventDest(&ev)
	err := s.r.QueryRowContext(ctx, `SELECT `+eventCols+`, `+prunedCol+`, `+sqlstore.InfoColumns("")+` FROM events WHERE id = ?`, id).
		Scan(append(append(dest, &ev.BodyPruned), sqlstore.InfoDest(&ev)...)...)
	if err == nil {
		err = done()
	}
	if errors.Is(err, sql.ErrNoRows) {
		return ev, fmt.Errorf("event %s: %w", id, anyhook.ErrNotFound)
	}
	if err != nil {
		return ev, store.Unavailable("event", err)
	}
	if ev.Deliveries, err = query(ctx, s.r, sqlstore.ScanDelivery, `SELECT `+deliveryCols+` FROM deliveries WHERE event_id = ? ORDER BY id`, id); err != nil {
		return ev, store.Unavailable("event", err)
	}
	if ev.Actions, err = query(ctx, s.r, sqlstore.ScanAction, `SELECT `+sqlstore.ActionColumns+` FROM actions WHERE event_id = ? ORDER BY id`, id); err != nil {
		return ev, store.Unavailable("event", err)
	}
	if ev.Arrivals, err = query(ctx, s.r, sqlstore.ScanArrival, `SELECT `+sqlstore.ArrivalColumns+` FROM arrivals WHERE event_id = ? ORDER BY seq`, id); err != nil {
		return ev, store.Unavailable("event", err)
	}
	for i := range ev.Deliveries {
		d := &ev.Deliveries[i]
		d.Attempts, err = query(ctx, s.r, func(sc scanner) (anyhook.Attempt, error) {
			var a anyhook.Attempt
			dest, done := sqlstore.AttemptDest(&a)
			err := sc.Scan(dest...)
			done()
			return a, err
		}, `SELECT number, started_at, duration_us, status_code, error, coalesce(response_body, x''), outcome
			FROM attempts WHERE delivery_id = ? ORDER BY number`, d.ID)
		if err != nil {
			return ev, store.Unavailable("event", err)
		}
	}
	return ev, nil
}

// ListEvents implements store.Store.
func (s *Store) ListEvents(ctx context.Context, f store.EventFilter) ([]anyhook.Event, string, error) {
	return listEvents(ctx, s, f, sqlstore.EventColumns("events.")+`, `+sqlstore.InfoColumns("events."), sqlstore.ScanEventInfo, sqlstore.EventKey, s.ListEvents)
}

// ListEventSizes implements store.BodyLister: ListEvents' query reading
// the sizes instead of the bodies. CAST: length() of a TEXT value counts
// characters.
func (s *Store) ListEventSizes(ctx context.Context, f store.EventFilter) ([]store.EventSize, string, error) {
	return listEvents(ctx, s, f, `events.id, events.received_at, length(CAST(events.body AS BLOB)) + length(CAST(events.headers AS BLOB))`,
		sqlstore.ScanEventSize, sqlstore.SizeKey, s.ListEventSizes)
}

// EventBodies implements store.BodyLister.
func (s *Store) EventBodies(ctx context.Context, ids []string) ([]anyhook.Event, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	args := make([]any, len(ids))
	for i, id := range ids {
		args[i] = id
	}
	evs, err := query(ctx, s.r, sqlstore.ScanEventInfo, `SELECT `+sqlstore.EventColumns("")+`, `+sqlstore.InfoColumns("")+
		` FROM events WHERE id IN (?`+strings.Repeat(",?", len(ids)-1)+`)`, args...)
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
		found, err := query(ctx, s.r, sqlstore.ScanString, sqlstore.SQLite.TypesQuery(), from, to, to)
		if err != nil {
			return nil, "", store.Unavailable("list events", err)
		}
		if types, ok := sqlstore.GlobTypes(f.Type, found); ok {
			return sqlstore.ListTypes(ctx, f, types, self, key)
		}
	}
	if sqlstore.TypeBySource(f) {
		sources, err := query(ctx, s.r, sqlstore.ScanString, sqlstore.SQLite.TypedSourcesQuery(), string(f.Status), string(f.Status))
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
	q, args, err := s.eventsSQL(ctx, db, f, cols)
	if err != nil {
		return nil, "", store.Unavailable("list events", err)
	}
	if q == "" {
		return nil, "", nil
	}
	limit := store.PageLimit(f.Limit)
	evs, err := query(ctx, db, scan, q, args...)
	if err != nil {
		return nil, "", store.Unavailable("list events", err)
	}
	evs, next := store.Page(evs, limit, func(ev T) string { id, _ := key(ev); return id })
	return evs, next, nil
}

// eventsSQL is the query of listEvents, reading cols of the events f
// selects (no glob: those are listed type by type); "" when f selects
// none (a derived status no destination is shown in).
func (s *Store) eventsSQL(ctx context.Context, db querier, f store.EventFilter, cols string) (string, []any, error) {
	dests, err := shownIn(ctx, db, f.Status, "")
	if err != nil {
		return "", nil, err
	}
	return s.eventsHeldSQL(ctx, db, f, cols, dests)
}

// snapshot is what a list of status st reads through, and done ends it:
// for a status derived from the pause, a read transaction, so that the
// destinations the list names (shownIn, from the counters, which apply
// the pause) agree with its rows'
// shown status (sqlstore.StatusExpr) reads. Read apart, a pause or resume
// between the two put deliveries shown paused in a list of pending ones,
// and pending ones in a list of paused ones.
func (s *Store) snapshot(ctx context.Context, st anyhook.DeliveryStatus) (querier, func(), error) {
	if !sqlstore.DerivedStatus(st) {
		return s.r, func() {}, nil
	}
	// Read-only: a plain (deferred) BEGIN, not the DSN's immediate one,
	// which would take the write lock.
	tx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, nil, err
	}
	return tx, func() { _ = tx.Rollback() }, nil
}

// eventsHeldSQL is eventsSQL with dests, the destinations shown in f's
// status (shownIn), read.
func (s *Store) eventsHeldSQL(ctx context.Context, db querier, f store.EventFilter, cols string, dests []string) (string, []any, error) {
	w := sqlstore.NewWhere(sqlstore.SQLite)
	from, order := ` FROM events`, ` ORDER BY events.id DESC`
	byTime := store.EventsByTime(f)
	if f.Status != "" {
		cond, args, none := sqlstore.StatusIs("d.", f.Status, dests)
		if none {
			return "", nil, nil
		}
		// A delivery keeps its event's source: with a source, the
		// deliveries compared are its own.
		if f.Source != "" {
			cond += ` AND d.source = ?`
			args = append(args, f.Source)
		}
		// And its type (0043), for a status of a source whose
		// deliveries' index holds the three (sqlstore.TypedStatus).
		typed := f.Source != "" && sqlstore.TypedStatus(f.Status)
		exactType := sqlstore.ExactType(f.Type)
		if typed {
			cond += ` AND ` + sqlstore.TypedStatusIn("d.")
			if exactType {
				cond += ` AND ` + sqlstore.SQLite.TypeExpr("d.type") + ` = ?`
				args = append(args, store.LowerType(f.Type))
			}
		}
		// Without a window, walk the deliveries in that status newest
		// first (index deliveries_status_event, or a derived status's
		// own, derivedIndex): a rare status such as held must not make
		// the query read every event to find none. With one, that walk
		// would read every delivery in the status received after the
		// window (and, for a window matching none, all of them): unless
		// the status has few deliveries, walk the window instead, each
		// event probed for one in the status.
		// An exact provider event id, or a source or type with few
		// events, reads those events first: walking the status would
		// read all its deliveries to find theirs (none, say).
		evFew, err := s.fewEvents(ctx, db, f)
		if err != nil {
			return "", nil, err
		}
		few := !byTime || evFew != ""
		indexed, counted := "", false
		if i := derivedIndex(f.Status, f.Source); i != "" {
			indexed = ` INDEXED BY ` + i
		} else if typed {
			// A status of a source: its deliveries in the status
			// (of the type) are walked through deliveries_status_source_type,
			// newest event first, for an exact type without a window: a
			// pair of source and type with none in the status is answered
			// at once, where walking the status read every one of its
			// deliveries to find none. Else they are read through it and
			// sorted only when few; otherwise the status's index, in
			// event order.
			bySST := exactType && !byTime
			if !bySST && evFew == "" {
				// Ten times the usual few: what the window's walk would
				// probe instead is every event of the window, and a
				// triple's few thousand read and sorted cost less (the
				// resolved of a type over 31 days, 2,701 of one source at
				// ten million events, walked 560 ms).
				if bySST, err = s.fewerThan(ctx, db, 10*s.fewRows, `SELECT 1 FROM deliveries d INDEXED BY deliveries_status_source_type WHERE `+cond, args...); err != nil {
					return "", nil, err
				}
				counted = true
			}
			indexed = ` INDEXED BY deliveries_status_event`
			if bySST {
				indexed, few = ` INDEXED BY deliveries_status_source_type`, true
			}
		}
		if !few && !counted {
			if few, err = s.fewer(ctx, db, `SELECT 1 FROM deliveries d`+indexed+` WHERE `+cond, args...); err != nil {
				return "", nil, err
			}
		}
		switch {
		case few && evFew == "" && !byTime && len(dests) > 1:
			// Several destinations: deliveries_waiting is in event order
			// for one destination only, and an IN over their names would
			// read, join and group every pending delivery of all of them
			// (1.1 s at 300,000 events, two holding 25,700 back). Each
			// one's newest page instead, merged.
			return s.heldEventsSQL(ctx, db, f, cols, dests)
		case few:
			from = ` FROM deliveries d` + indexed + ` CROSS JOIN events ON events.id = d.event_id`
			if evFew != "" {
				from = ` FROM events INDEXED BY ` + evFew + ` CROSS JOIN deliveries d ON d.event_id = events.id`
			}
			w.AddN(cond, args...)
			order = ` GROUP BY d.event_id ORDER BY d.event_id DESC`
			if byTime {
				order = ` GROUP BY d.event_id ORDER BY events.received_at DESC, events.id DESC`
				w.AddAfter("events.received_at", "events.id", "events", "received_at", f.Cursor)
			} else {
				w.AddString("d.event_id < ?", f.Cursor)
			}
		default:
			from, order = ` FROM events INDEXED BY events_received`, ` ORDER BY events.received_at DESC, events.id DESC`
			w.AddN("EXISTS (SELECT 1 FROM deliveries d WHERE d.event_id = events.id AND "+cond+")", args...)
			w.AddAfter("events.received_at", "events.id", "events", "received_at", f.Cursor)
		}
	} else if byTime {
		// A time window (a prefix search has one) walks the receive time
		// index from its end: walking the ids newest first would read
		// every event after the window too. Unless a filter selecting few
		// events has an index of its own (an exact provider event id, a
		// source with few events): then those are read and sorted.
		order = ` ORDER BY events.received_at DESC, events.id DESC`
		w.AddAfter("events.received_at", "events.id", "events", "received_at", f.Cursor)
		few, err := s.fewEvents(ctx, db, f)
		if err != nil {
			return "", nil, err
		}
		if few == "" {
			few = "events_received"
		}
		from = ` FROM events INDEXED BY ` + few
	} else {
		w.AddString("events.id < ?", f.Cursor)
		if f.Q != "" {
			from = ` FROM events INDEXED BY events_dedup` // its few events, sorted
		}
	}
	w.AddString("events.source = ?", f.Source)
	w.AddString("events.dedup_key = ?", f.Q)
	if f.Q != "" && f.Source == "" {
		w.Raw(`events.source IN (` + storedSources + `)`)
	}
	w.AddType("events.type", f.Type)
	w.AddPrefix("events.", f.Prefix)
	w.AddTime("events.received_at >= ?", f.Since)
	w.AddTime("events.received_at < ?", f.Until)
	return `SELECT ` + cols + from + w.String() + order + ` LIMIT ` + strconv.Itoa(store.PageLimit(f.Limit)+1), w.Args(), nil
}

// heldEventsSQL is the query of the events with a delivery in f's status
// (derived from the pause) when several destinations (dests) are shown in
// it and no window orders the list by time: the newest page of each
// destination's (the list's query for that one alone, in
// deliveries_waiting's order), the union of those ids newest first. An
// event in none of those pages is older than a page's worth of events of
// each destination: not on this page.
func (s *Store) heldEventsSQL(ctx context.Context, db querier, f store.EventFilter, cols string, dests []string) (string, []any, error) {
	var arms []string
	var args []any
	for _, h := range dests {
		q, a, err := s.eventsHeldSQL(ctx, db, f, "d.event_id", []string{h})
		if err != nil {
			return "", nil, err
		}
		arms = append(arms, `SELECT event_id FROM (`+q+`)`)
		args = append(args, a...)
	}
	return `SELECT ` + cols + ` FROM (` + strings.Join(arms, ` UNION `) + `) AS h CROSS JOIN events ON events.id = h.event_id` +
		` ORDER BY h.event_id DESC LIMIT ` + strconv.Itoa(store.PageLimit(f.Limit)+1), args, nil
}

// derivedIndex is the partial index of the stored pending deliveries by
// destination (and source, when the list names one), newest event first,
// holding the attempt count (migration 0040), that a list of st, a status
// derived from the pause, walks for the destinations it names
// (sqlstore.ShownIn); "" for a status stored as shown. Without statistics SQLite would walk
// deliveries_status_event, which holds every pending delivery, and test
// each one's row; through an index of every destination's, a paused
// destination's untried backlog was read to find the few of the others.
func derivedIndex(st anyhook.DeliveryStatus, source string) string {
	switch {
	case !sqlstore.DerivedStatus(st):
		return ""
	case source != "":
		return "deliveries_waiting_source"
	}
	return "deliveries_waiting"
}

// shownIn reads, through q, the delivery counters and names the
// destinations shown with deliveries in st (of dest, if not "") when st is
// derived from the pause (sqlstore.ShownIn); nil when it is not.
func shownIn(ctx context.Context, q querier, st anyhook.DeliveryStatus, dest string) ([]string, error) {
	if !sqlstore.DerivedStatus(st) {
		return nil, nil
	}
	cs, err := query(ctx, q, sqlstore.ScanDepth, sqlstore.CountersQuery)
	if err != nil {
		return nil, err
	}
	return sqlstore.ShownIn(cs, st, dest), nil
}

// fewEvents names the index of events through which f selects few of
// them: an exact provider event id's, or a source's, a source and exact
// type's (each common, rarely together), or an exact type's with few
// events; "" when none does.
func (s *Store) fewEvents(ctx context.Context, db querier, f store.EventFilter) (string, error) {
	if f.Q != "" {
		return "events_dedup", nil
	}
	if f.Source != "" {
		if few, err := s.fewer(ctx, db, `SELECT 1 FROM events WHERE source = ?`, f.Source); few || err != nil {
			return "events_source", err
		}
	}
	if !sqlstore.ExactType(f.Type) {
		return "", nil
	}
	typ := sqlstore.SQLite.TypeExpr("type") + ` = ?`
	if f.Source != "" {
		few, err := s.fewer(ctx, db, `SELECT 1 FROM events WHERE source = ? AND `+typ, f.Source, store.LowerType(f.Type))
		if few || err != nil {
			return "events_source_type", err
		}
	}
	if few, err := s.fewer(ctx, db, `SELECT 1 FROM events WHERE `+typ, store.LowerType(f.Type)); few || err != nil {
		return "events_type", err
	}
	return "", nil
}

// storedSources is a query of the sources the events name, one index seek
// each (SQLite has no skip scan without statistics): a provider event id
// without a source is looked up in each source's entries of events_dedup,
// the unique index that deduplicates, where an index of its own (dropped in
// 0062) cost every ingest a page write at a random place.
const storedSources = `WITH RECURSIVE src(name) AS (
	SELECT (SELECT min(source) FROM events)
	UNION ALL
	SELECT (SELECT min(source) FROM events WHERE source > src.name) FROM src WHERE src.name IS NOT NULL
) SELECT name FROM src WHERE name IS NOT NULL`

// defaultFewRows bounds the rows a list reads and sorts instead of
// walking an index in its order (Store.fewRows): SQLite has no statistics
// to choose by, so the store counts (through an index, at most this many
// entries) before it chooses.
const defaultFewRows = 2000

// fewer says whether the rows of q (a SELECT 1 that an index answers)
// are fewer than s.fewRows, reading at most that many through db.
func (s *Store) fewer(ctx context.Context, db querier, q string, args ...any) (bool, error) {
	return s.fewerThan(ctx, db, s.fewRows, q, args...)
}

// fewerThan is fewer with limit in place of s.fewRows.
func (s *Store) fewerThan(ctx context.Context, db querier, limit int, q string, args ...any) (bool, error) {
	n, err := query(ctx, db, func(r scanner) (int, error) {
		var n int
		return n, r.Scan(&n)
	}, `SELECT count(*) FROM (`+q+` LIMIT `+strconv.Itoa(limit)+`)`, args...)
	if err != nil || len(n) != 1 {
		return false, err
	}
	return n[0] < limit, nil
}

// ListDeliveries implements store.Store.
func (s *Store) ListDeliveries(ctx context.Context, f store.DeliveryFilter) ([]anyhook.Delivery, string, error) {
	db, done, err := s.snapshot(ctx, f.Status)
	if err != nil {
		return nil, "", store.Unavailable("list deliveries", err)
	}
	defer done()
	q, args, err := s.deliveriesSQL(ctx, db, f)
	if err != nil {
		return nil, "", store.Unavailable("list deliveries", err)
	}
	if q == "" {
		return nil, "", nil
	}
	ds, err := query(ctx, db, sqlstore.ScanDelivery, q, args...)
	if err != nil {
		return nil, "", store.Unavailable("list deliveries", err)
	}
	ds, next := store.Page(ds, store.PageLimit(f.Limit), func(d anyhook.Delivery) string { return d.ID })
	return ds, next, nil
}

// deliveriesSQL is the query of ListDeliveries; "" when f selects none.
func (s *Store) deliveriesSQL(ctx context.Context, db querier, f store.DeliveryFilter) (string, []any, error) {
	dests, err := shownIn(ctx, db, f.Status, f.Destination)
	if err != nil {
		return "", nil, err
	}
	status, statusArgs, none := sqlstore.StatusIs("d.", f.Status, dests)
	if none {
		return "", nil, nil
	}
	where, args := sqlstore.DeliveryWhere(sqlstore.SQLite, f, dests)
	limit := store.PageLimit(f.Limit)
	// The deliveries are read alone (a delivery keeps its event's source),
	// walked newest first through an index of theirs. A time window walks
	// the creation time index from its end.
	from := ` FROM deliveries d`
	// sourced is the index of f's source (with its destination if any), ""
	// without a source; sourceCond and sourceArgs select its rows.
	sourced, sourceCond, sourceArgs := "", "", []any(nil)
	switch {
	case f.Source != "" && f.Destination != "":
		sourced, sourceCond, sourceArgs = "deliveries_destination_source", `destination = ? AND source = ?`, []any{f.Destination, f.Source}
	case f.Source != "" && sqlstore.DerivedStatus(f.Status):
		// A derived status's deliveries are the named destinations'
		// (sqlstore.ShownIn), as a destination filter would name them.
		sourceCond = `destination IN (` + strings.TrimSuffix(strings.Repeat("?, ", len(dests)), ", ") + `) AND source = ?`
		for _, h := range dests {
			sourceArgs = append(sourceArgs, h)
		}
		sourced, sourceArgs = "deliveries_destination_source", append(sourceArgs, f.Source)
	case f.Source != "":
		sourced, sourceCond, sourceArgs = "deliveries_source", `source = ?`, []any{f.Source}
	}
	order := sqlstore.DeliveryOrder(f) + ` LIMIT ` + strconv.Itoa(limit+1)
	// A derived status (pending, retrying, paused) has a partial index of
	// its own, holding the destination and the source (migration 0040):
	// when few of its deliveries are the list's, they are read through it
	// and sorted. Through the indexes below, pending of a source with none
	// untried walked every delivery of the source (0.8 s at a million
	// events), and pending with none untried every pending one.
	if idx := derivedIndex(f.Status, f.Source); idx != "" {
		cond, condArgs := status, slices.Clone(statusArgs)
		if f.Source != "" {
			cond, condArgs = cond+` AND d.source = ?`, append(condArgs, f.Source)
		}
		if f.Destination != "" {
			cond, condArgs = cond+` AND d.destination = ?`, append(condArgs, f.Destination)
		}
		few, err := s.fewer(ctx, db, `SELECT 1 FROM deliveries d INDEXED BY `+idx+` WHERE `+cond, condArgs...)
		if err != nil {
			return "", nil, err
		}
		if few {
			return `SELECT ` + sqlstore.DeliveryColumns("d.") + ` FROM deliveries d INDEXED BY ` + idx + where + order, args, nil
		}
	}
	if f.Source != "" && sqlstore.TypedStatus(f.Status) {
		// A source's deliveries in a status a person looks through, when
		// few (a source none of whose deliveries died), are read through
		// their own index (0043) and sorted: through the source's or the
		// status's index the list read every one of theirs to find them.
		typed := sqlstore.TypedStatusIn("d.")
		few, err := s.fewer(ctx, db, `SELECT 1 FROM deliveries d INDEXED BY deliveries_status_source_type WHERE `+typed+` AND `+status+` AND d.source = ?`,
			append(slices.Clone(statusArgs), f.Source)...)
		if err != nil {
			return "", nil, err
		}
		if few {
			return `SELECT ` + sqlstore.DeliveryColumns("d.") + ` FROM deliveries d INDEXED BY deliveries_status_source_type` + and(where, typed) + order, args, nil
		}
	}
	if store.DeliveriesByTime(f) {
		// Unless the status (a held queue, say), the destination or the
		// source has few deliveries: walking a long window would read
		// every delivery in it to find those few; they are read and
		// sorted. (A derived status with few is read above.)
		few := false
		if f.Status != "" && !sqlstore.DerivedStatus(f.Status) {
			if few, err = s.fewer(ctx, db, `SELECT 1 FROM deliveries d WHERE `+status, statusArgs...); err != nil {
				return "", nil, err
			}
		}
		if !few && sourced != "" {
			if few, err = s.fewer(ctx, db, `SELECT 1 FROM deliveries WHERE `+sourceCond, sourceArgs...); err != nil {
				return "", nil, err
			}
			if few {
				from = ` FROM deliveries d INDEXED BY ` + sourced
			}
		}
		if !few && f.Destination != "" {
			if few, err = s.fewer(ctx, db, `SELECT 1 FROM deliveries WHERE destination = ?`, f.Destination); err != nil {
				return "", nil, err
			}
		}
		if !few {
			from = ` FROM deliveries d INDEXED BY deliveries_created`
		}
	} else if sourced != "" {
		// The source's index, in the list's order: without statistics
		// SQLite may walk the status's or the destination's instead and
		// read every one of their deliveries of other sources. A status
		// with few deliveries (a held queue) of a source with many walks
		// the status's index instead (not a part of a status, as paused
		// is of pending: that index would walk all the status's).
		from = ` FROM deliveries d INDEXED BY ` + sourced
		if f.Status != "" && !sqlstore.DerivedStatus(f.Status) && f.Destination == "" {
			fewStatus, err := s.fewer(ctx, db, `SELECT 1 FROM deliveries d WHERE `+status, statusArgs...)
			if err != nil {
				return "", nil, err
			}
			fewSource, err := s.fewer(ctx, db, `SELECT 1 FROM deliveries WHERE `+sourceCond, sourceArgs...)
			if err != nil {
				return "", nil, err
			}
			if fewStatus && !fewSource {
				from = ` FROM deliveries d INDEXED BY deliveries_status`
			}
		}
	}
	return `SELECT ` + sqlstore.DeliveryColumns("d.") + from + where + order, args, nil
}

// Counts implements store.Store.
func (s *Store) Counts(ctx context.Context) (map[anyhook.DeliveryStatus]int, error) {
	cs, err := query(ctx, s.r, sqlstore.ScanDepth, sqlstore.CountersQuery)
	if err != nil {
		return nil, store.Unavailable("counts", err)
	}
	return sqlstore.CountsByStatus(cs), nil
}

// and adds cond to a WHERE clause.
func and(w, cond string) string {
	if w == "" {
		return " WHERE " + cond
	}
	return w + " AND " + cond
}
