package sqlite

import (
	"context"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

const qInsertArrival = `INSERT INTO arrivals (event_id, seq, received_at, remote_addr, headers, headers_cut) VALUES (?, ?, ?, ?, ?, ?)`

// arrive records the arrival of ev, a duplicate that raised the duplicate
// counter of event id to n, if it is among the first store.MaxArrivals.
func arrive(st *stmts, id string, n int64, ev *anyhook.Event) error {
	if n > store.MaxArrivals {
		return nil
	}
	h, cut := store.ArrivalHeader(ev.Header)
	_, err := st.exec(qInsertArrival, id, n, micros(ev.ReceivedAt), ev.RemoteAddr, h, cut)
	return err
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
