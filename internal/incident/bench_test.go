package incident_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/incident"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

// BenchmarkAttempted is what a delivery pays for incidents: one append
// under the recorder's lock (the store is not touched).
func BenchmarkAttempted(b *testing.B) {
	r := incident.New(incident.Options{})
	a := anyhook.Attempt{StartedAt: time.Now(), Outcome: anyhook.OutcomeAnswered, StatusCode: 503, Error: "HTTP 503"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Attempted("billing", "ev", false, a)
			if r.Buffered() >= 4096 {
				r.Drop()
			}
		}
	})
}

// BenchmarkRecordBatchSQLite is one write of a full batch (512 failed
// attempts of distinct events, one destination and kind) to a SQLite
// file: the recorder's cost to the store's one writer, once a second at
// most during an outage.
func BenchmarkRecordBatchSQLite(b *testing.B) {
	st, err := sqlite.Open(b.Context(), filepath.Join(b.TempDir(), "anyhook.db"), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	p := store.IncidentPolicy{ResolveAfter: time.Minute, ReopenWithin: time.Hour, EscalateEvents: 10}
	n := 0
	for b.Loop() {
		as := make([]store.IncidentAttempt, 512)
		for i := range as {
			n++
			as[i] = store.IncidentAttempt{Destination: "billing", Kind: "5xx", EventID: fmt.Sprint("ev-", n), Error: "HTTP 503", At: t0.Add(time.Duration(n) * time.Millisecond)}
		}
		if _, err := st.RecordIncidents(b.Context(), as, p); err != nil {
			b.Fatal(err)
		}
	}
}
