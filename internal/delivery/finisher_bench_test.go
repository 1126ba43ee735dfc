package delivery

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

// nopFinishStore records nothing: every claim is still held.
type nopFinishStore struct{ *finishStore }

func (nopFinishStore) Finish(context.Context, []store.Outcome) ([]string, error) { return nil, nil }

// BenchmarkFinisher measures the group commit of outcomes: 64 concurrent
// callers each record the outcome of one claimed delivery through the
// finisher. With store=nop the store does nothing, so the figure is the
// committer's own cost; with store=sqlite the deliveries were ingested
// and claimed (untimed) in a temporary SQLite database and every batch is
// a durable transaction:
//
//	go test ./internal/delivery -run '^$' -bench Finisher -benchmem
func BenchmarkFinisher(b *testing.B) {
	b.Run("store=nop", func(b *testing.B) {
		ids := make([]store.Outcome, b.N)
		for i := range ids {
			ids[i] = store.Outcome{DeliveryID: store.NewID(), Attempt: 1, Status: anyhook.StatusDelivered}
		}
		benchFinisher(b, nopFinishStore{&finishStore{}}, ids)
	})
	b.Run("store=sqlite", func(b *testing.B) {
		st, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "anyhook.db"), sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		benchFinisher(b, st, claimed(b, st, b.N))
	})
}

// claimed ingests n events for destination d, claims their deliveries and
// returns one delivered outcome per claim.
func claimed(b *testing.B, st store.Store, n int) []store.Outcome {
	now := time.Now()
	for left := n; left > 0; {
		evs := make([]store.NewEvent, min(left, 500))
		for i := range evs {
			id := store.NewID()
			evs[i] = store.NewEvent{Event: anyhook.Event{ID: id, Source: "s", DedupKey: id, ReceivedAt: now, Body: []byte(`{}`)}, Destinations: []string{"d"}}
		}
		if _, err := st.Ingest(b.Context(), evs); err != nil {
			b.Fatal(err)
		}
		left -= len(evs)
	}
	outs := make([]store.Outcome, 0, n)
	for len(outs) < n {
		cs, err := st.Claim(b.Context(), "d", 1000, time.Hour)
		if err != nil || len(cs) == 0 {
			b.Fatalf("claimed %d of %d: %v", len(outs), n, err)
		}
		for _, c := range cs {
			outs = append(outs, store.Outcome{DeliveryID: c.Delivery.ID, Attempt: c.Delivery.AttemptCount, Status: anyhook.StatusDelivered,
				Result: anyhook.Attempt{Number: c.Delivery.AttemptCount, StartedAt: now, StatusCode: 200}})
		}
	}
	return outs
}

func benchFinisher(b *testing.B, st recorder, outs []store.Outcome) {
	f := newFinisher(st, maxFinishBatch)
	f.Start(b.Context())
	defer f.Stop()
	var next atomic.Int64
	b.SetParallelism(32) // 64 callers on 2 CPUs
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			out := outs[next.Add(1)-1]
			lost, err := f.finish(b.Context(), out)
			if err != nil || lost {
				b.Errorf("finish %s: lost %v, %v", out.DeliveryID, lost, err)
				return
			}
		}
	})
}
