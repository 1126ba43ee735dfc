package incident_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/incident"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/testkit/testclock"
)

// TestRecorderBatchesAndSweeps: attempts from many goroutines reach the
// store in batches; Flush tells of the open once; the sweep at the
// recorder's clock resolves the incident once the destination has
// delivered for resolve_after; Stop writes what is buffered.
func TestRecorderBatchesAndSweeps(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock := testclock.New(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	var told []string
	r := incident.New(incident.Options{Store: st, Now: clock.Now, Interval: time.Hour, // flushed by hand
		Policy: store.IncidentPolicy{ResolveAfter: time.Minute},
		OnChange: func(c store.IncidentChange) {
			mu.Lock()
			told = append(told, c.Change+" "+c.Incident.Kind)
			mu.Unlock()
		}})
	r.Start(t.Context())
	refused := anyhook.Attempt{StartedAt: clock.Now(), Outcome: anyhook.OutcomeNotSent, Error: "dial tcp 127.0.0.1:9: connect: connection refused"}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 100 {
				r.Attempted("billing", fmt.Sprintf("ev-%d-%d", w, i), false, refused)
			}
		})
	}
	wg.Wait()
	r.Flush(t.Context())
	is, _, err := st.ListIncidents(t.Context(), store.IncidentFilter{})
	if err != nil || len(is) != 1 || is[0].Kind != incident.KindRefused || is[0].Attempts != 800 || is[0].Events != 800 {
		t.Fatalf("%+v, %v; want one refused incident of 800 attempts and events", is, err)
	}
	clock.Add(time.Second)
	r.Attempted("billing", "ev-ok", true, anyhook.Attempt{StartedAt: clock.Now(), Outcome: anyhook.OutcomeAnswered, StatusCode: 200})
	r.Flush(t.Context())
	clock.Add(time.Minute)
	r.Attempted("crm", "ev-crm", false, anyhook.Attempt{StartedAt: clock.Now(), Outcome: anyhook.OutcomeAnswered, StatusCode: 503, Error: "HTTP 503"})
	r.Stop() // writes the crm attempt, and sweeps
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(told) != "[opened refused opened 5xx resolved refused]" {
		t.Fatalf("told %v", told)
	}
}
