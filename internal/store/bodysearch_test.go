package store_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// bodies is a BodyLister over events held in memory, newest first.
type bodies []anyhook.Event

func (b bodies) ListEventSizes(_ context.Context, f store.EventFilter) ([]store.EventSize, string, error) {
	var in []store.EventSize
	for _, ev := range b {
		if !ev.ReceivedAt.Before(f.Since) && (f.Until.IsZero() || ev.ReceivedAt.Before(f.Until)) {
			in = append(in, store.EventSize{ID: ev.ID, ReceivedAt: ev.ReceivedAt, Size: int64(len(ev.Body))})
		}
	}
	from, _ := strconv.Atoi(f.Cursor)
	in = in[min(from, len(in)):]
	if len(in) > f.Limit {
		return in[:f.Limit], strconv.Itoa(from + f.Limit), nil
	}
	return in, "", nil
}

func (b bodies) EventBodies(_ context.Context, ids []string) ([]anyhook.Event, error) {
	var out []anyhook.Event
	for _, ev := range b {
		if slices.Contains(ids, ev.ID) {
			out = append(out, ev)
		}
	}
	return out, nil
}

// TestSearchBodiesTime: a search whose time bound is spent stops after
// the page of bodies that spent it, never before the first, and says how
// far back it looked; without the bound it reads on to the window's end.
func TestSearchBodiesTime(t *testing.T) {
	now := time.Now()
	var b bodies
	for i := range 1200 {
		b = append(b, anyhook.Event{ID: "evt_" + strconv.Itoa(i), ReceivedAt: now.Add(-time.Duration(i+1) * time.Millisecond), Body: []byte(`{}`)})
	}
	all := func(*anyhook.Event) (bool, uint64) { return true, 0 }
	budget := store.BodyBudget{Rows: 5000, Bytes: 1 << 30, Matches: 5000, Time: time.Nanosecond}
	evs, sr, err := store.SearchBodies(t.Context(), b, store.EventFilter{}, all, now, budget)
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 100 || sr.Complete || !sr.BackTo.Equal(b[99].ReceivedAt) {
		t.Errorf("time spent: %d events, %+v; want the first page's 100, back to the 100th's time %v", len(evs), sr, b[99].ReceivedAt)
	}
	budget.Time = 0
	if evs, sr, err = store.SearchBodies(t.Context(), b, store.EventFilter{}, all, now, budget); err != nil || len(evs) != 1200 || !sr.Complete {
		t.Errorf("no time bound: %d events, %+v, %v; want all 1200, complete", len(evs), sr, err)
	}
}
