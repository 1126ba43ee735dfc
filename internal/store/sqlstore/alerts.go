package sqlstore

import (
	"cmp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anyhook/anyhook/internal/store"
)

// The alert outbox (store.AlertOutbox): tables alert_folds, alert_seen and
// alert_outbox. Its logic is written once, here, over AlertTx; each
// backend runs it in a transaction of its own. Times are the database's
// clock: PostgreSQL's now() (the transaction's start), for SQLite the
// store's clock, passed as now.

// AlertTx is a backend's transaction as the outbox's logic uses it. q is
// in the dialect's placeholders.
type AlertTx interface {
	Query(q string, args []any, row func(Scanner) error) error
	Exec(q string, args []any) (int64, error)
}

// maxSeen bounds the identities kept per fold and window for dropping
// exact repeats; past it, repeats are counted like any alert.
const maxSeen = 4096

// alertSQL writes the outbox's statements in a dialect at a time: ? are
// placeholders, {now} and {now±d} the database's clock.
type alertSQL struct {
	d   Dialect
	now time.Time
}

// at is the SQL of the clock offset by off, and its argument.
func (s alertSQL) at(off time.Duration) (string, any) {
	if s.d.Numbered {
		return "(now() + ? * interval '1 microsecond')", off.Microseconds()
	}
	return "?", s.d.Time(s.now.Add(off))
}

// stmt builds a statement from parts: a string is SQL, a time.Duration
// is the clock offset by it, an arg wraps a parameter.
func (s alertSQL) stmt(parts ...any) (string, []any) {
	var b strings.Builder
	var args []any
	for _, p := range parts {
		switch p := p.(type) {
		case string:
			b.WriteString(p)
		case time.Duration:
			q, a := s.at(p)
			b.WriteString(q)
			args = append(args, a)
		case arg:
			b.WriteString("?")
			args = append(args, p.v)
		}
	}
	return s.d.Rebind(b.String()), args
}

type arg struct{ v any }

// in is the list "(?, ?, …)" of values as parts of stmt.
func in(values []string) []any {
	out := []any{"("}
	for i, v := range values {
		if i > 0 {
			out = append(out, ", ")
		}
		out = append(out, arg{v})
	}
	return append(out, ")")
}

// RaiseAlerts is store.AlertOutbox's RaiseAlerts in tx. The folds are
// taken in (fold, destination) order, so that two processes raising at
// once never wait for each other crosswise; each fold's alerts keep
// their order.
func RaiseAlerts(d Dialect, tx AlertTx, now time.Time, as []store.RaisedAlert, channels []string, window time.Duration) error {
	s := alertSQL{d, now}
	order := make([]int, len(as))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(i, j int) int {
		return cmp.Or(cmp.Compare(as[i].Fold, as[j].Fold), cmp.Compare(as[i].Destination, as[j].Destination))
	})
	for _, i := range order {
		if err := raise(s, tx, as[i], channels, window); err != nil {
			return err
		}
	}
	return nil
}

func raise(s alertSQL, tx AlertTx, a store.RaisedAlert, channels []string, window time.Duration) error {
	// The upsert locks the fold's row (PostgreSQL) and reads it in one
	// statement; a new fold starts long ago, its window over.
	q, args := s.stmt(`INSERT INTO alert_folds (fold, destination, opened_at, pending) VALUES (`, arg{a.Fold}, `, `, arg{a.Destination}, `, `,
		arg{s.d.Time(time.Unix(0, 0).UTC())}, `, 0)
		ON CONFLICT (fold, destination) DO UPDATE SET pending = alert_folds.pending
		RETURNING pending, opened_at <= `, -window)
	var pending int
	var over bool
	if err := tx.Query(q, args, func(sc Scanner) error { return sc.Scan(&pending, &over) }); err != nil {
		return err
	}
	key := []any{` WHERE fold = `, arg{a.Fold}, ` AND destination = `, arg{a.Destination}}
	if over {
		q, args = s.stmt(append([]any{`UPDATE alert_folds SET opened_at = `, time.Duration(0),
			`, pending = 0, latest = NULL, latest_kind = NULL, latest_action = NULL, latest_dedup = NULL`}, key...)...)
		if _, err := tx.Exec(q, args); err != nil {
			return err
		}
		q, args = s.stmt(append([]any{`DELETE FROM alert_seen`}, key...)...)
		if _, err := tx.Exec(q, args); err != nil {
			return err
		}
		if _, err := seen(s, tx, a); err != nil {
			return err
		}
		return enqueue(s, tx, a.Fold, a.Destination, a.Kind, a.Action, a.DedupKey, a.Message, pending, channels)
	}
	if !a.Repeatable && a.Identity != "" && pending < maxSeen {
		if fresh, err := seen(s, tx, a); err != nil || !fresh {
			return err
		}
	}
	q, args = s.stmt(append([]any{`UPDATE alert_folds SET pending = pending + 1, latest = `, arg{a.Message},
		`, latest_kind = `, arg{a.Kind}, `, latest_action = `, arg{a.Action}, `, latest_dedup = `, arg{a.DedupKey}}, key...)...)
	_, err := tx.Exec(q, args)
	return err
}

// seen notes a's identity in its fold's window and reports whether it is
// new there. The identity is kept as its hash: any bytes, a bounded size.
func seen(s alertSQL, tx AlertTx, a store.RaisedAlert) (bool, error) {
	if a.Identity == "" {
		return true, nil
	}
	id := store.BodySHA256([]byte(a.Identity))
	q, args := s.stmt(`INSERT INTO alert_seen (fold, destination, identity) VALUES (`, arg{a.Fold}, `, `, arg{a.Destination}, `, `, arg{id},
		`) ON CONFLICT DO NOTHING`)
	n, err := tx.Exec(q, args)
	return n == 1, err
}

// enqueue queues one message per channel.
func enqueue(s alertSQL, tx AlertTx, fold, destination, kind, action, dedup string, message []byte, more int, channels []string) error {
	for _, ch := range channels {
		q, args := s.stmt(`INSERT INTO alert_outbox (created_at, channel, fold, destination, kind, action, dedup_key, message, more, state, attempts, next_at)
			VALUES (`, time.Duration(0), `, `, arg{ch}, `, `, arg{fold}, `, `, arg{destination}, `, `, arg{kind}, `, `, arg{action}, `, `, arg{dedup},
			`, `, arg{NonNil(message)}, `, `, arg{more}, `, 'pending', 0, `, time.Duration(0), `)`)
		if _, err := tx.Exec(q, args); err != nil {
			return err
		}
	}
	return nil
}

// FlushAlerts is store.AlertOutbox's FlushAlerts in tx. On PostgreSQL
// the due folds are locked, skipping those another transaction holds (a
// raise, or another process's flush: its summary is that process's).
func FlushAlerts(d Dialect, tx AlertTx, now time.Time, channels []string, window time.Duration) (int, error) {
	s := alertSQL{d, now}
	type due struct {
		fold, destination   string
		pending             int
		latest              []byte
		kind, action, dedup string
	}
	lock := ""
	if d.Numbered {
		lock = ` FOR UPDATE SKIP LOCKED`
	}
	q, args := s.stmt(`SELECT fold, destination, pending, latest, latest_kind, latest_action, latest_dedup FROM alert_folds
		WHERE pending > 0 AND latest IS NOT NULL AND opened_at <= `, -window, ` ORDER BY fold, destination`+lock)
	var dues []due
	err := tx.Query(q, args, func(sc Scanner) error {
		var x due
		err := sc.Scan(&x.fold, &x.destination, &x.pending, &x.latest, &x.kind, &x.action, &x.dedup)
		dues = append(dues, x)
		return err
	})
	if err != nil {
		return 0, err
	}
	for _, x := range dues {
		key := []any{` WHERE fold = `, arg{x.fold}, ` AND destination = `, arg{x.destination}}
		q, args := s.stmt(append([]any{`UPDATE alert_folds SET opened_at = `, time.Duration(0),
			`, pending = 0, latest = NULL, latest_kind = NULL, latest_action = NULL, latest_dedup = NULL`}, key...)...)
		if _, err := tx.Exec(q, args); err != nil {
			return 0, err
		}
		q, args = s.stmt(append([]any{`DELETE FROM alert_seen`}, key...)...)
		if _, err := tx.Exec(q, args); err != nil {
			return 0, err
		}
		if err := enqueue(s, tx, x.fold, x.destination, x.kind, x.action, x.dedup, x.latest, x.pending-1, channels); err != nil {
			return 0, err
		}
	}
	// Folds idle for a window are forgotten: the next alert opens one.
	idle := []any{` WHERE pending = 0 AND opened_at <= `, -window}
	q, args = s.stmt(append([]any{`DELETE FROM alert_seen WHERE (fold, destination) IN (SELECT fold, destination FROM alert_folds`}, append(idle, `)`)...)...)
	if _, err := tx.Exec(q, args); err != nil {
		return 0, err
	}
	q, args = s.stmt(append([]any{`DELETE FROM alert_folds`}, idle...)...)
	if _, err := tx.Exec(q, args); err != nil {
		return 0, err
	}
	return len(dues), nil
}

// alertColumns are what ScanAlert reads.
const alertColumns = `id, channel, kind, destination, action, dedup_key, message, more, attempts, created_at, coalesce(last_error, '')`

// ScanAlert scans one row of alertColumns.
func ScanAlert(sc Scanner) (store.AlertMessage, error) {
	var m store.AlertMessage
	err := sc.Scan(&m.ID, &m.Channel, &m.Kind, &m.Destination, &m.Action, &m.DedupKey, &m.Message, &m.More, &m.Attempt,
		Time(&m.CreatedAt), &m.LastError)
	return m, err
}

// ClaimAlerts is the statement of store.AlertOutbox's ClaimAlerts, and its
// arguments; its rows are ScanAlert's, in no order.
func ClaimAlerts(d Dialect, now time.Time, channels []string, limit int, lease time.Duration) (string, []any) {
	s := alertSQL{d, now}
	lock := ""
	if d.Numbered {
		lock = ` FOR UPDATE OF o SKIP LOCKED`
	}
	parts := []any{`UPDATE alert_outbox SET lease_until = `, lease, `, attempts = attempts + 1
		WHERE id IN (SELECT o.id FROM alert_outbox o
			WHERE o.state = 'pending' AND o.next_at <= `, time.Duration(0), ` AND (o.lease_until IS NULL OR o.lease_until <= `, time.Duration(0), `)
			AND o.channel IN `}
	parts = append(parts, in(channels)...)
	parts = append(parts, `
			AND NOT EXISTS (SELECT 1 FROM alert_outbox p WHERE p.state = 'pending' AND p.channel = o.channel AND p.fold = o.fold
				AND p.destination = o.destination AND p.id < o.id)
			ORDER BY o.id LIMIT `+strconv.Itoa(limit)+lock+`)
		RETURNING `+alertColumns)
	return s.stmt(parts...)
}

// FinishAlert is the statement of store.AlertOutbox's FinishAlert, and
// its arguments: it changes one row when the claim holds.
func FinishAlert(d Dialect, now time.Time, o store.AlertOutcome) (string, []any) {
	s := alertSQL{d, now}
	fence := []any{` WHERE id = `, arg{o.ID}, ` AND attempts = `, arg{o.Attempt}, ` AND state = 'pending'`}
	if o.Sent {
		return s.stmt(append([]any{`UPDATE alert_outbox SET state = 'sent', done_at = `, time.Duration(0),
			`, lease_until = NULL, last_error = NULL`}, fence...)...)
	}
	return s.stmt(append([]any{`UPDATE alert_outbox SET next_at = `, max(o.RetryIn, 0), `, lease_until = NULL, last_error = `,
		arg{store.Text(o.Error)}}, fence...)...)
}

// GiveUpAlerts and DeleteAlerts are the statements of store.AlertOutbox's
// PruneAlerts, and their arguments; GiveUpAlerts' rows are ScanAlert's.
func GiveUpAlerts(d Dialect, now time.Time, giveUp time.Duration) (string, []any) {
	s := alertSQL{d, now}
	return s.stmt(`UPDATE alert_outbox SET state = 'failed', done_at = `, time.Duration(0), `, lease_until = NULL
		WHERE state = 'pending' AND created_at <= `, -giveUp, ` AND (lease_until IS NULL OR lease_until <= `, time.Duration(0), `)
		RETURNING `+alertColumns)
}

// DeleteAlerts: see GiveUpAlerts.
func DeleteAlerts(d Dialect, now time.Time, keep time.Duration) (string, []any) {
	s := alertSQL{d, now}
	return s.stmt(`DELETE FROM alert_outbox WHERE state <> 'pending' AND done_at <= `, -keep)
}
