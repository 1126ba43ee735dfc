package postgres_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/ledger"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/postgres"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
)

// BenchmarkSequenceRound measures one round of the log's sequencer on
// PostgreSQL under steady load: logged events were received recently (all
// within the last minutes, as under sustained traffic), 14 new ones wait,
// and the round logs them. A round must cost what the new events cost,
// not what the log already holds:
//
//	go test ./internal/store/postgres -run '^$' -bench SequenceRound -benchtime 50x
//
// Compare the time per round across logged=…: a round that grows with
// the log is the defect this guards against (before ledger_pending, 7, 12
// and 38 ms at 1,000, 10,000 and 40,000).
func BenchmarkSequenceRound(b *testing.B) {
	for _, logged := range []int{1000, 10000, 40000} {
		b.Run(fmt.Sprintf("logged=%d", logged), func(b *testing.B) {
			s, err := postgres.Open(b.Context(), pgtest.DSN(b), postgres.Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			seq := ledger.NewSequencer(s, ledger.SequencerOptions{})
			ingest := func(n int) {
				for left := n; left > 0; left -= 500 {
					evs := make([]store.NewEvent, min(left, 500))
					for i := range evs {
						id := store.NewID()
						evs[i] = store.NewEvent{Event: anyhook.Event{ID: id, Source: "s", DedupKey: id, ReceivedAt: time.Now(),
							Method: "POST", Path: "/webhooks/s", Body: []byte(`{"amount":1}`)}}
					}
					if _, err := s.Ingest(b.Context(), evs); err != nil {
						b.Fatal(err)
					}
				}
			}
			ingest(logged)
			if _, err := seq.Run(b.Context()); err != nil {
				b.Fatal(err)
			}
			// The sweep's first pass (a new database's is due at once) walks
			// the ids in chunks, one a round: let it end, as it has under
			// steady load between passes.
			for range logged/10000 + 2 {
				if _, err := seq.Once(b.Context()); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				ingest(14)
				b.StartTimer()
				if n, err := seq.Once(b.Context()); err != nil || n != 14 {
					b.Fatalf("round: %d logged, %v", n, err)
				}
			}
		})
	}
}
