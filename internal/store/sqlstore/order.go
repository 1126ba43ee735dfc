package sqlstore

import (
	"strings"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// QueuedQuery selects the unfinished deliveries (pending, delivering,
// held) of the objects of some deliveries, each to the destination of the
// delivery that names the object, for store.Heads and store.Behind. It
// goes from each delivery x to its event, to the events of the same
// (source, object) (index events_object), to their deliveries to x's
// destination. In SQLite the parameters are now (Unix microseconds) then
// n delivery ids; in PostgreSQL, one array of delivery ids ($1), and now
// is the database's.
func QueuedQuery(dl Dialect, n int) string {
	if dl.Numbered {
		return queuedQuery("now()", "x.id = ANY($1)", "JOIN events e", "JOIN deliveries d")
	}
	// SQLite without statistics would rather walk the destination's
	// whole queue (deliveries_due): the join order and indexes are
	// fixed (CROSS JOIN keeps the order).
	return queuedQuery("?", "x.id IN (?"+strings.Repeat(", ?", max(n-1, 0))+")",
		"CROSS JOIN events e INDEXED BY events_object", "CROSS JOIN deliveries d INDEXED BY deliveries_event")
}

func queuedQuery(due, ids, events, deliveries string) string {
	return `SELECT DISTINCT d.id, d.event_id, d.destination, e.source, e.object, coalesce(e.version, ''), d.status,
		d.status = 'pending' AND d.next_attempt_at <= ` + due + `, e.received_at, d.created_at
	FROM deliveries x JOIN events xe ON xe.id = x.event_id
	` + events + ` ON e.source = xe.source AND e.object = xe.object
	` + deliveries + ` ON d.event_id = e.id AND d.destination = x.destination
	WHERE ` + ids + ` AND xe.object IS NOT NULL AND d.status IN ('pending', 'delivering', 'held')`
}

// ScanQueued scans one row of QueuedQuery.
func ScanQueued(sc Scanner) (store.Queued, error) {
	var q store.Queued
	var status string
	err := sc.Scan(&q.ID, &q.EventID, &q.Destination, &q.Source, &q.Object, &q.Version, &status, &q.Due, Time(&q.Arrived), Time(&q.CreatedAt))
	q.Status = anyhook.DeliveryStatus(status)
	return q, err
}

// ScanOrderCandidate scans a row of (delivery id, its event's source,
// its object or "").
func ScanOrderCandidate(sc Scanner) (store.OrderCandidate, error) {
	var c store.OrderCandidate
	return c, sc.Scan(&c.ID, &c.Source, &c.Object)
}
