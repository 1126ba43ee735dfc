package sqlstore

import (
	"fmt"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// Count is one row of a count by destination and status.
type Count struct {
	Dest   string
	Status anyhook.DeliveryStatus
	N      int
}

// ScanDepth scans a row of destination, status, count.
func ScanDepth(sc Scanner) (Count, error) {
	var c Count
	var st string
	err := sc.Scan(&c.Dest, &st, &c.N)
	c.Status = anyhook.DeliveryStatus(st)
	return c, err
}

// AddDepth adds depth counts to qs.Depth.
func AddDepth(qs *store.QueueStats, cs []Count) {
	for _, c := range cs {
		if qs.Depth[c.Dest] == nil {
			qs.Depth[c.Dest] = map[anyhook.DeliveryStatus]int{}
		}
		qs.Depth[c.Dest][c.Status] += c.N
	}
}

// MaxStateEvents is how many events DeliveryStates answers for at once.
const MaxStateEvents = 500

// DeliveryStates is store.StatsReader's DeliveryStates of a store whose
// query reads the rows of StatesColumns of the deliveries of ids, in id
// order: none for no ids, an anyhook.ErrInvalid for more than
// MaxStateEvents, store.Unavailable where query fails.
func DeliveryStates(ids []string, query func(ids []string) ([]EventState, error)) (map[string][]store.DeliveryState, error) {
	if len(ids) > MaxStateEvents {
		return map[string][]store.DeliveryState{}, fmt.Errorf("delivery states of %d events: at most %d: %w", len(ids), MaxStateEvents, anyhook.ErrInvalid)
	}
	if len(ids) == 0 {
		return map[string][]store.DeliveryState{}, nil
	}
	rs, err := query(ids)
	if err != nil {
		return nil, store.Unavailable("delivery states", err)
	}
	return StatesByEvent(rs), nil
}

// StatesColumns lists what ScanState reads.
var StatesColumns = `event_id, id, destination, ` + StatusExpr("deliveries.") + `, replay, next_attempt_at`

// EventState is one row of StatesColumns: a delivery's state and its
// event.
type EventState struct {
	EventID string
	State   store.DeliveryState
}

// ScanState scans one row of StatesColumns.
func ScanState(sc Scanner) (EventState, error) {
	var r EventState
	var st string
	err := sc.Scan(&r.EventID, &r.State.ID, &r.State.Destination, &st, &r.State.Replay, Time(&r.State.NextAttemptAt))
	r.State.Status = anyhook.DeliveryStatus(st)
	return r, err
}

// StatesByEvent groups rows of StatesColumns by event, in row order.
func StatesByEvent(rs []EventState) map[string][]store.DeliveryState {
	out := map[string][]store.DeliveryState{}
	for _, r := range rs {
		out[r.EventID] = append(out[r.EventID], r.State)
	}
	return out
}
