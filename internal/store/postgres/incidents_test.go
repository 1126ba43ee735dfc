package postgres_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
)

// TestIncidentsTwoStoresOneIncident: two stores on one database, as two
// gateway processes are, record failures of one (destination, kind) at
// once, in rounds, the second round after the incident resolved: each
// round makes one incident (then reopens it), whichever store's
// transaction wins, and every attempt and event is counted on it.
func TestIncidentsTwoStoresOneIncident(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	a, b := openDSN(t, dsn), openDSN(t, dsn)
	p := store.IncidentPolicy{ResolveAfter: time.Minute, ReopenWithin: time.Hour}
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	const perStore, writers = 20, 4
	round := func(at time.Time, tag string) map[string]int {
		var mu sync.Mutex
		changes := map[string]int{}
		var wg sync.WaitGroup
		for si, s := range []*postgresStore{{a}, {b}} {
			for w := range writers {
				wg.Go(func() {
					for i := range perStore {
						ev := fmt.Sprintf("%s-%d-%d-%d", tag, si, w, i)
						cs, err := s.RecordIncidents(t.Context(), []store.IncidentAttempt{{Destination: "billing", Kind: "refused", EventID: ev,
							Error: "connection refused", At: at.Add(time.Duration(i) * time.Millisecond)}}, p)
						if err != nil {
							t.Error(err)
							return
						}
						mu.Lock()
						for _, c := range cs {
							changes[c.Change+" "+c.Incident.ID]++
						}
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
		return changes
	}
	first := round(t0, "r1")
	is, _, err := b.ListIncidents(t.Context(), store.IncidentFilter{})
	if err != nil {
		t.Fatal(err)
	}
	const n = 2 * writers * perStore
	if len(is) != 1 || is[0].Attempts != n || is[0].Events != n || len(first) != 1 || first[store.ChangeOpened+" "+is[0].ID] != 1 {
		t.Fatalf("after the first round: %+v, changes %v; want one incident opened once, counting %d", is, first, n)
	}
	id := is[0].ID
	if _, err := a.RecordIncidents(t.Context(), []store.IncidentAttempt{{Destination: "billing", At: t0.Add(time.Second)}}, p); err != nil {
		t.Fatal(err)
	}
	if cs, err := b.SweepIncidents(t.Context(), t0.Add(2*time.Minute), p); err != nil || len(cs) != 1 {
		t.Fatalf("sweep: %v, %v; want the incident resolved", cs, err)
	}
	second := round(t0.Add(3*time.Minute), "r2")
	got, err := a.Incident(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if len(second) != 1 || second[store.ChangeReopened+" "+id] != 1 || got.State != store.IncidentOpen || got.Reopens != 1 || got.Attempts != 2*n {
		t.Fatalf("after the second round: %+v, changes %v; want the same incident reopened once", got, second)
	}
}

// postgresStore names the part of the store the test drives.
type postgresStore struct{ store.Incidents }
