// Package sqlstore holds what the two SQL backends (store/sqlite and
// store/postgres) share: the column lists of events and deliveries, the
// scan helpers that read them, a row collector, and the WHERE builder of
// the delivery filter with each dialect's placeholders and time
// parameters. SQL that genuinely differs between the dialects stays in
// each backend.
package sqlstore

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// Scanner is a row: *sql.Row, *sql.Rows, pgx.Row and pgx.Rows are all one.
type Scanner interface{ Scan(...any) error }

// Rows is a result set being read: *sql.Rows and pgx.Rows are both one.
type Rows interface {
	Scanner
	Next() bool
	Err() error
}

// Collect scans every row of rows with scan. It does not close rows: the
// caller does, as it opened them.
func Collect[T any](rows Rows, scan func(Scanner) (T, error)) ([]T, error) {
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// Time is a scan destination for a time column as either dialect stores
// it: SQLite's integer Unix microseconds (0 for none), PostgreSQL's
// timestamptz; NULL is the zero time. A time read is in UTC.
func Time(t *time.Time) any { return timeDest{t} }

type timeDest struct{ t *time.Time }

// Scan implements sql.Scanner (which pgx honours too).
func (d timeDest) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*d.t = time.Time{}
	case int64:
		*d.t = time.Time{}
		if v != 0 {
			*d.t = time.UnixMicro(v).UTC()
		}
	case time.Time:
		*d.t = time.Time{}
		if !v.IsZero() {
			*d.t = v.UTC()
		}
	default:
		return fmt.Errorf("time column: got %T", src)
	}
	return nil
}

// DeliveryColumns lists what ScanDelivery reads, each name prefixed by p
// ("deliveries." for the table itself). The status is the shown one
// (StatusExpr): paused for a pending delivery of a paused
// destination.
func DeliveryColumns(p string) string { return deliveryColumnsWith(p, StatusExpr(p)) }

// StoredDeliveryColumns is DeliveryColumns with the status as stored: what
// the rescuer reports (pending = reclaimed, whether paused or not).
func StoredDeliveryColumns(p string) string { return deliveryColumnsWith(p, p+"status") }

func deliveryColumnsWith(p, status string) string {
	r := strings.NewReplacer("$", p)
	return r.Replace(`$id, $event_id, $destination, `) + status +
		r.Replace(`, $replay, $stale, $attempt_count, $probes, $next_attempt_at, $lease_until, $claimed_at, $created_at, $updated_at, $note,
		$resolution, $resolved_at, $resolved_by, $resolution_reason, coalesce($replayed_by, '')`)
}

// EventColumns lists what EventDest reads, each name prefixed by p.
func EventColumns(p string) string {
	return strings.NewReplacer("$", p).Replace(`$id, $source, coalesce($dedup_key, ''), $received_at, $method, $path, $headers, $body, coalesce($object, ''), coalesce($version, ''), $stale, $duplicates, coalesce($type, ''), coalesce($origin, 'webhook')`)
}

// DeliveryDest returns the scan destinations of DeliveryColumns into d,
// and a func to call after the scan to finish the conversion; more
// columns can be scanned alongside by appending their destinations.
func DeliveryDest(d *anyhook.Delivery) ([]any, func()) {
	var status string
	r := &d.Resolution
	dest := []any{&d.ID, &d.EventID, &d.Destination, &status, &d.Replay, &d.Stale, &d.AttemptCount, &d.Probes, Time(&d.NextAttemptAt), Time(&d.LeaseUntil),
		Time(&d.ClaimedAt), Time(&d.CreatedAt), Time(&d.UpdatedAt), &d.Note, &r.Kind, Time(&r.At), &r.By, &r.Reason, &r.ReplayedBy}
	return dest, func() { d.Status = anyhook.DeliveryStatus(status) }
}

// ScanDelivery scans one row of DeliveryColumns.
func ScanDelivery(sc Scanner) (anyhook.Delivery, error) {
	var d anyhook.Delivery
	dest, done := DeliveryDest(&d)
	if err := sc.Scan(dest...); err != nil {
		return d, err
	}
	done()
	return d, nil
}

// EventDest is DeliveryDest for an event (EventColumns).
func EventDest(ev *anyhook.Event) ([]any, func() error) {
	var headers []byte
	dest := []any{&ev.ID, &ev.Source, &ev.DedupKey, Time(&ev.ReceivedAt), &ev.Method, &ev.Path, &headers, &ev.Body, &ev.Object, &ev.Version, &ev.Stale, &ev.Duplicates, &ev.Type, &ev.Origin}
	return dest, func() error {
		if ev.Body == nil {
			ev.Body = []byte{}
		}
		var err error
		ev.Header, err = store.DecodeHeader(headers)
		if err != nil {
			return fmt.Errorf("event %s: headers: %w", ev.ID, err)
		}
		return nil
	}
}

// Dialect is what the shared WHERE builder needs to know of a database.
type Dialect struct {
	// Numbered parameters are $1, $2… (PostgreSQL); otherwise ? (SQLite).
	Numbered bool
	// Time is a time as a query parameter.
	Time func(time.Time) any
}

// The two dialects.
var (
	SQLite   = Dialect{Time: func(t time.Time) any { return t.UnixMicro() }}
	Postgres = Dialect{Numbered: true, Time: func(t time.Time) any { return t }}
)

// Rebind numbers the ? placeholders of q ($1, $2, …) in a dialect of
// numbered parameters; q has no other question marks.
func (d Dialect) Rebind(q string) string {
	if !d.Numbered {
		return q
	}
	var b strings.Builder
	n := 0
	for _, c := range q {
		if c == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}

// Where builds a WHERE clause in a dialect.
type Where struct {
	d     Dialect
	conds []string
	args  []any
}

// NewWhere starts an empty clause in dialect d.
func NewWhere(d Dialect) *Where { return &Where{d: d} }

// Add appends cond, in which ? stands for arg.
func (w *Where) Add(cond string, arg any) {
	w.args = append(w.args, arg)
	if w.d.Numbered {
		cond = strings.Replace(cond, "?", "$"+strconv.Itoa(len(w.args)), 1)
	}
	w.conds = append(w.conds, cond)
}

// AddN appends cond, in which the i-th ? stands for args[i].
func (w *Where) AddN(cond string, args ...any) {
	for _, a := range args {
		w.args = append(w.args, a)
		if w.d.Numbered {
			cond = strings.Replace(cond, "?", "$"+strconv.Itoa(len(w.args)), 1)
		}
	}
	w.conds = append(w.conds, cond)
}

// AddString is Add for a filter's text field: nothing when arg is empty
// (the field not set).
func (w *Where) AddString(cond, arg string) {
	if arg != "" {
		w.Add(cond, arg)
	}
}

// AddTime is Add for a filter's time field, passed as the dialect stores
// it: nothing when t is zero (the field not set).
func (w *Where) AddTime(cond string, t time.Time) {
	if !t.IsZero() {
		w.Add(cond, w.d.Time(t))
	}
}

// In appends "col IN (…)" with one parameter per value; no values
// select nothing.
func (w *Where) In(col string, values []string) {
	if len(values) == 0 {
		w.Raw("1 = 0")
		return
	}
	marks := make([]string, len(values))
	for i, v := range values {
		w.args = append(w.args, v)
		marks[i] = "?"
		if w.d.Numbered {
			marks[i] = "$" + strconv.Itoa(len(w.args))
		}
	}
	w.conds = append(w.conds, col+" IN ("+strings.Join(marks, ", ")+")")
}

// AddType adds that the type column col matches the glob (EventFilter.Type),
// on TypeExpr: a glob without * is an equality, which the events_type index
// answers in keyset order; one with * a LIKE, which reads what the other
// conditions select (ListEvents answers most globs with ListTypes instead).
func (w *Where) AddType(col, glob string) {
	switch {
	case glob == "":
	case !strings.Contains(glob, "*"):
		w.Add(w.d.TypeExpr(col)+` = ?`, store.LowerType(glob))
	default:
		w.Add(w.d.TypeExpr(col)+` LIKE ? ESCAPE '\'`, store.TypePattern(store.LowerType(glob)))
	}
}

// AddPrefix adds that the event whose columns are prefixed by p matches
// EventFilter.Prefix: a prefix of its id, dedup key or object, or of one
// of its deliveries' ids (compared by substr, the same in both dialects
// whatever the column's collation).
func (w *Where) AddPrefix(p, prefix string) {
	if prefix == "" {
		return
	}
	n := strconv.Itoa(len([]rune(prefix)))
	// A delivery id prefix is a range of the deliveries' primary key
	// (ids compare bytewise: COLLATE "C" on PostgreSQL); U+10FFFF sorts
	// after every character an id can hold.
	w.args = append(w.args, prefix, prefix, prefix, prefix, prefix+"\U0010FFFF")
	m := w.marks(5)
	byDelivery := p + "id IN (SELECT pd.event_id FROM deliveries pd WHERE pd.id >= " + m[3] + " AND pd.id < " + m[4] + ")"
	if w.d.Numbered {
		// On PostgreSQL, each event's own deliveries (deliveries_event):
		// as an IN, a short prefix (01a2, which every id of a month
		// starts with) was costed as every delivery for each event, and
		// the planner read all of a source's events from events_source
		// to test fewer of them (0.5-1 s at ten million events, for an
		// hour's window of a few thousand).
		byDelivery = "EXISTS (SELECT 1 FROM deliveries pd WHERE pd.event_id = " + p + "id AND pd.id >= " + m[3] + " AND pd.id < " + m[4] + ")"
	}
	w.conds = append(w.conds, "(substr("+p+"id, 1, "+n+") = "+m[0]+
		" OR substr(coalesce("+p+"dedup_key, ''), 1, "+n+") = "+m[1]+
		" OR substr(coalesce("+p+"object, ''), 1, "+n+") = "+m[2]+
		" OR "+byDelivery+")")
}

// AddAfter adds the keyset condition of a list in time order (timeCol,
// then idCol, both descending) after the row of table whose id is cursor,
// whose time is its column col: nothing when cursor is empty. The
// cursor's time is read by subquery (its primary key); an unknown cursor
// selects nothing.
func (w *Where) AddAfter(timeCol, idCol, table, col, cursor string) {
	if cursor == "" {
		return
	}
	w.args = append(w.args, cursor, cursor, cursor)
	m := w.marks(3)
	at := func(mark string) string {
		return "(SELECT c." + col + " FROM " + table + " c WHERE c.id = " + mark + ")"
	}
	w.conds = append(w.conds, timeCol+" <= "+at(m[0])+" AND ("+timeCol+" < "+at(m[1])+" OR "+idCol+" < "+m[2]+")")
}

// marks are the placeholders of the last k arguments added.
func (w *Where) marks(k int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = "?"
		if w.d.Numbered {
			out[i] = "$" + strconv.Itoa(len(w.args)-k+1+i)
		}
	}
	return out
}

// Raw appends a condition without a parameter; "" appends nothing.
func (w *Where) Raw(cond string) {
	if cond != "" {
		w.conds = append(w.conds, cond)
	}
}

// Args are the parameters of the conditions, in order.
func (w *Where) Args() []any { return w.args }

// String is " WHERE a AND b", or "" without conditions.
func (w *Where) String() string {
	if len(w.conds) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(w.conds, " AND ")
}

// DeliveryWhere selects the deliveries d that filter f names, in dialect
// dl. It reads no other table: the source is the delivery's copy of its
// event's (migration 0039), which indexes in the list's order serve.
// dests names the destinations shown in f's status (ShownIn) when it is
// derived from the pause.
func DeliveryWhere(dl Dialect, f store.DeliveryFilter, dests []string) (string, []any) {
	w := NewWhere(dl)
	if f.Status != "" {
		cond, args, _ := StatusIs("d.", f.Status, dests)
		w.AddN(cond, args...)
	}
	w.AddString("d.destination = ?", f.Destination)
	if f.Destinations != nil {
		w.In("d.destination", f.Destinations)
	}
	w.AddString("d.source = ?", f.Source)
	if f.EventIDs != nil {
		w.In("d.event_id", f.EventIDs)
	}
	w.AddTime("d.created_at >= ?", f.Since)
	w.AddTime("d.created_at < ?", f.Until)
	if store.DeliveriesByTime(f) {
		w.AddAfter("d.created_at", "d.id", "deliveries", "created_at", f.Cursor)
	} else {
		w.AddString("d.id < ?", f.Cursor)
	}
	return w.String(), w.Args()
}

// DeliveryOrder is the ORDER BY of the deliveries list of f (d the
// deliveries): newest first, by creation time when f has a time window
// (store.DeliveriesByTime), else by id.
func DeliveryOrder(f store.DeliveryFilter) string {
	if store.DeliveriesByTime(f) {
		return ` ORDER BY d.created_at DESC, d.id DESC`
	}
	return ` ORDER BY d.id DESC`
}

// Nullable is s as a parameter of a nullable text column: NULL when empty.
func Nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// NonNil is b as a parameter of a NOT NULL blob column: empty, never NULL.
func NonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}
