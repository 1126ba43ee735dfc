package sqlstore

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// ActionColumns lists what ScanAction reads.
const ActionColumns = `id, event_id, action, delivery_id, destination, actor, reason, at`

// ScanAction scans one row of ActionColumns.
func ScanAction(sc Scanner) (anyhook.Action, error) {
	var a anyhook.Action
	err := sc.Scan(&a.ID, &a.EventID, &a.Kind, &a.DeliveryID, &a.Destination, &a.Actor, &a.Reason, Time(&a.At))
	return a, err
}

// ArrivalColumns lists what ScanArrival reads.
const ArrivalColumns = `seq, received_at, remote_addr, headers, headers_cut, coalesce(body_sha256, '')`

// ScanArrival scans one row of ArrivalColumns.
func ScanArrival(sc Scanner) (anyhook.Arrival, error) {
	var a anyhook.Arrival
	var h []byte
	if err := sc.Scan(&a.Seq, Time(&a.ReceivedAt), &a.RemoteAddr, &h, &a.HeaderCut, &a.BodySHA256); err != nil {
		return a, err
	}
	var err error
	a.Header, err = store.DecodeHeader(h)
	return a, err
}

// AttemptDest returns the scan destinations of an attempt's number,
// started_at, duration_us, status_code, error, response body (coalesced
// to empty in each dialect's own way) and outcome, and a func to call
// after the scan.
func AttemptDest(a *anyhook.Attempt) ([]any, func()) {
	var us int64
	return []any{&a.Number, Time(&a.StartedAt), &us, &a.StatusCode, &a.Error, &a.ResponseBody, &a.Outcome},
		func() { a.Duration = time.Duration(us) * time.Microsecond }
}

// ScanEventInfo scans one row of EventColumns followed by
// InfoColumns (the lists of events).
func ScanEventInfo(sc Scanner) (anyhook.Event, error) {
	var ev anyhook.Event
	dest, done := EventDest(&ev)
	if err := sc.Scan(append(dest, InfoDest(&ev)...)...); err != nil {
		return ev, err
	}
	return ev, done()
}

// QueueRowScan is a row holding a delivery id, its event's provider id, and
// its latest attempt's number, started_at, duration_us, status_code,
// error and outcome (0, NULL or empty without an attempt); each dialect selects them
// its own way.
type QueueRowScan struct {
	ID  string
	Row store.QueueRow
}

// ScanQueueRow scans one queue row.
func ScanQueueRow(sc Scanner) (QueueRowScan, error) {
	var q QueueRowScan
	var us int64
	r := &q.Row
	err := sc.Scan(&q.ID, &r.ProviderEventID, &r.Last.Number, Time(&r.Last.StartedAt), &us, &r.Last.StatusCode, &r.Last.Error, &r.Last.Outcome)
	if r.Last.Number > 0 {
		r.Last.Duration = time.Duration(us) * time.Microsecond
	}
	return q, err
}

// QueueRowMap is the rows of ScanQueueRow by delivery id.
func QueueRowMap(qs []QueueRowScan) map[string]store.QueueRow {
	out := make(map[string]store.QueueRow, len(qs))
	for _, q := range qs {
		out[q.ID] = q.Row
	}
	return out
}

// ScanPair scans a row of two text columns.
func ScanPair(sc Scanner) ([2]string, error) {
	var p [2]string
	return p, sc.Scan(&p[0], &p[1])
}

// Delivery is the delivery id as row (a query of DeliveryColumns for it)
// holds it: anyhook.ErrNotFound where the row's error is noRows (the
// driver's "no rows"), store.Unavailable for any other error.
func Delivery(id string, row Scanner, noRows error) (anyhook.Delivery, error) {
	d, err := ScanDelivery(row)
	if errors.Is(err, noRows) {
		return d, fmt.Errorf("delivery %s: %w", id, anyhook.ErrNotFound)
	}
	if err != nil {
		return d, store.Unavailable("delivery", err)
	}
	return d, nil
}

// QueueRows is store.QueueReader's QueueRows of a store whose query reads
// the queue rows (ScanQueueRow) of ids: none for no ids, an
// anyhook.ErrInvalid for more than 500, store.Unavailable where query fails.
func QueueRows(ids []string, query func(ids []string) ([]QueueRowScan, error)) (map[string]store.QueueRow, error) {
	if len(ids) == 0 {
		return map[string]store.QueueRow{}, nil
	}
	if len(ids) > 500 {
		return nil, fmt.Errorf("queue rows of %d deliveries: at most 500: %w", len(ids), anyhook.ErrInvalid)
	}
	qs, err := query(ids)
	if err != nil {
		return nil, store.Unavailable("queue rows", err)
	}
	return QueueRowMap(qs), nil
}

// InfoColumns lists, each name prefixed by p, the event columns that
// EventInfo scans: the remote address and the verification, NULL read as
// not recorded. They are read for event pages and lists, not for claims.
func InfoColumns(p string) string {
	return strings.NewReplacer("$", p).Replace(`coalesce($remote_addr, ''), coalesce($verify_method, ''), coalesce($verify_scheme, ''), coalesce($verify_secret, -1), coalesce($not_routed, '')`)
}

// InfoDest returns the scan destinations of InfoColumns for ev.
func InfoDest(ev *anyhook.Event) []any {
	return []any{&ev.RemoteAddr, &ev.Verification.Method, &ev.Verification.Scheme, &ev.Verification.Secret, &namesScanner{&ev.NotRouted}}
}

// namesScanner scans store.NotRoutedArg's form back into a list.
type namesScanner struct{ names *[]string }

func (n *namesScanner) Scan(src any) error {
	var s string
	switch v := src.(type) {
	case string:
		s = v
	case []byte:
		s = string(v)
	case nil:
	default:
		return fmt.Errorf("not_routed: unexpected %T", src)
	}
	*n.names = nil
	if s != "" {
		*n.names = strings.Split(s, ",")
	}
	return nil
}
