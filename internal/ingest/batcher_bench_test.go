package ingest_test

import (
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/ingest"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

// BenchmarkBatcher measures the group commit of events: 64 concurrent
// callers each ingest one new event (one destination) through a Batcher.
// With store=nop the recorder does nothing, so the figure is the
// committer's own cost (queueing, batching, answering); with store=sqlite
// every batch is a durable SQLite transaction in a temporary directory:
//
//	go test ./internal/ingest -run '^$' -bench Batcher -benchmem
func BenchmarkBatcher(b *testing.B) {
	b.Run("store=nop", func(b *testing.B) { benchBatcher(b, nopRecorder{}) })
	b.Run("store=sqlite", func(b *testing.B) {
		st, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "anyhook.db"), sqlite.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { st.Close() })
		benchBatcher(b, st)
	})
}

func benchBatcher(b *testing.B, rec ingest.Recorder) {
	bt := ingest.NewBatcher(rec, 256)
	bt.Start(b.Context())
	defer bt.Stop()
	var seq atomic.Int64
	now := time.Now()
	b.SetParallelism(32) // 64 callers on 2 CPUs
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			key := "evt_" + strconv.FormatInt(seq.Add(1), 10)
			evs := []store.NewEvent{{
				Event:        anyhook.Event{ID: store.NewID(), Source: "stripe", DedupKey: key, ReceivedAt: now, Body: []byte(`{}`)},
				Destinations: []string{"d"},
			}}
			if _, err := bt.Ingest(b.Context(), evs); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
