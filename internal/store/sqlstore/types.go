package sqlstore

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// A type glob (EventFilter.Type with a *) names a few of the store's types,
// and no index holds the events of several types newest first. So the
// store lists the distinct types the glob's literal prefix allows from the
// events_type index (one seek per type), matches them, and answers one
// exact type at a time, each an index walk of a page at most, merged by
// id. A glob that matches more types than MaxGlobTypes (a broad one, whose
// events are common) is answered by walking the events newest first.

// MaxGlobTypes bounds the types a glob is answered by one at a time.
const MaxGlobTypes = 32

// TypeExpr is the expression the events_type index holds over the type
// column col: the type lowered (ASCII letters: the glob ignores ASCII case),
// ” for none, compared bytewise (on PostgreSQL COLLATE "C", whatever the
// database's collation, so that a prefix is a range).
func (d Dialect) TypeExpr(col string) string {
	if d.Numbered {
		return `lower(coalesce(` + col + `, '') COLLATE "C")`
	}
	return `lower(coalesce(` + col + `, ''))`
}

// TypesQuery (dialect d) lists the distinct TypeExpr values of the events
// from the first parameter (included) to the second (excluded), at most
// MaxGlobTypes+1 of them: a loose scan of the events_type index, one seek
// per distinct type, however many events have it.
func (d Dialect) TypesQuery() string {
	e := d.TypeExpr("type")
	next := func(op string) string {
		return `(SELECT ` + e + ` FROM events WHERE ` + e + ` ` + op + ` ORDER BY ` + e + ` LIMIT 1)`
	}
	return d.Rebind(`WITH RECURSIVE t(v, n) AS (
		SELECT ` + next(">= ?") + `, 0
		UNION ALL
		SELECT ` + next("> t.v") + `, t.n + 1 FROM t WHERE t.v < ? AND t.n < ` + strconv.Itoa(MaxGlobTypes) + `
	) SELECT v FROM t WHERE v IS NOT NULL AND v < ?`)
}

// TypeRange is the range of TypeExpr values a glob can match: those that
// start with its literal prefix, lowered.
func TypeRange(glob string) (from, to string) {
	prefix, _, _ := strings.Cut(store.LowerType(glob), "*")
	// U+10FFFF sorts after every character a type can hold.
	return prefix, prefix + "\U0010FFFF"
}

// GlobTypes picks, of the distinct types (TypeExpr values) found in the
// glob's range, those it matches. ok is false when the glob is to be
// answered by a walk instead: more than MaxGlobTypes types in its range,
// or a match no exact filter selects (no type, or one holding a *).
func GlobTypes(glob string, found []string) (types []string, ok bool) {
	if len(found) > MaxGlobTypes {
		return nil, false
	}
	for _, t := range found {
		if !store.TypeMatches(glob, t) {
			continue
		}
		if !ExactType(t) {
			return nil, false
		}
		types = append(types, t)
	}
	return types, true
}

// ListTypes answers f (whose Type is a glob) with one list per exact type,
// merged newest first; key gives a listed item's id and receive time
// (events, or their sizes: store.EventSize).
func ListTypes[T any](ctx context.Context, f store.EventFilter, types []string,
	list func(context.Context, store.EventFilter) ([]T, string, error), key func(T) (string, time.Time)) ([]T, string, error) {
	return listEach(ctx, f, types, func(g *store.EventFilter, t string) { g.Type = t }, list, key)
}

// TypeBySource reports whether f (a status of the partial index
// deliveries_status_source_type and an exact type, no source) is answered
// source by source (ListSources, over TypedSourcesQuery): the index leads
// with the status and the source, and without them the list walked every
// delivery in the status, probing each one's event for the type (0.8 s
// warm, 3 s cold for resolved of a type over 31 days at ten million
// events on PostgreSQL).
func TypeBySource(f store.EventFilter) bool {
	return f.Source == "" && TypedStatus(f.Status) && ExactType(f.Type)
}

// ExactType reports whether t names one type (case aside), not a glob.
func ExactType(t string) bool { return t != "" && !strings.Contains(t, "*") }

// TypedSourcesQuery selects the sources of the deliveries in a status of
// deliveries_status_source_type, a seek each; its arguments are the
// status twice.
func (d Dialect) TypedSourcesQuery() string {
	from := `deliveries x`
	if !d.Numbered {
		from += ` INDEXED BY deliveries_status_source_type` // no statistics to find it by
	}
	next := func(more string) string {
		return `(SELECT min(x.source) FROM ` + from + ` WHERE ` + TypedStatusIn("x.") + ` AND x.status = ?` + more + `)`
	}
	return d.Rebind(`WITH RECURSIVE s(v) AS (
		SELECT ` + next("") + `
		UNION ALL
		SELECT ` + next(" AND x.source > s.v") + ` FROM s WHERE s.v IS NOT NULL
	) SELECT v FROM s WHERE v IS NOT NULL`)
}

// ListSources answers f with one list per source of sources, merged
// newest first, as ListTypes does types; none lists nothing.
func ListSources[T any](ctx context.Context, f store.EventFilter, sources []string,
	list func(context.Context, store.EventFilter) ([]T, string, error), key func(T) (string, time.Time)) ([]T, string, error) {
	return listEach(ctx, f, sources, func(g *store.EventFilter, s string) { g.Source = s }, list, key)
}

// listEach answers f with one list per value of vals (set puts one in a
// filter), merged newest first.
func listEach[T any](ctx context.Context, f store.EventFilter, vals []string, set func(*store.EventFilter, string),
	list func(context.Context, store.EventFilter) ([]T, string, error), key func(T) (string, time.Time)) ([]T, string, error) {
	limit := store.PageLimit(f.Limit)
	var all []T
	more := false
	for _, v := range vals {
		g := f
		set(&g, v)
		g.Limit = limit
		evs, next, err := list(ctx, g)
		if err != nil {
			return nil, "", err
		}
		all = append(all, evs...)
		more = more || next != ""
	}
	slices.SortFunc(all, func(a, b T) int {
		aid, aat := key(a)
		bid, bat := key(b)
		if store.EventsByTime(f) {
			if c := bat.Compare(aat); c != 0 {
				return c
			}
		}
		return strings.Compare(bid, aid)
	})
	last := func(i int) string { id, _ := key(all[i]); return id }
	if len(all) > limit {
		return all[:limit], last(limit - 1), nil
	}
	if more {
		// A list had more than a page, all of it here: the next page
		// starts after its last event.
		return all, last(len(all) - 1), nil
	}
	return all, "", nil
}

// EventKey is ListTypes' key of an event.
func EventKey(ev anyhook.Event) (string, time.Time) { return ev.ID, ev.ReceivedAt }

// SizeKey is ListTypes' key of an event's size.
func SizeKey(e store.EventSize) (string, time.Time) { return e.ID, e.ReceivedAt }

// ScanEventSize scans EventSizeColumns.
func ScanEventSize(sc Scanner) (store.EventSize, error) {
	var e store.EventSize
	err := sc.Scan(&e.ID, Time(&e.ReceivedAt), &e.Size)
	return e, err
}
