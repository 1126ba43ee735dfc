package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

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

// TestIncidentsReopenRacesInsert: one process's upsert has inserted a new
// incident of (billing, refused) and not yet committed (its reopen ran
// before a sweep resolved the old one), while another process's batch
// reopens the resolved one. The reopen's unique-index check waits for the
// insert and then fails; the second process's whole batch (every
// destination in it) must not be lost to that race: it counts on the
// incident the first one made.
func TestIncidentsReopenRacesInsert(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	a := openDSN(t, dsn)
	p := store.IncidentPolicy{ResolveAfter: time.Minute, ReopenWithin: time.Hour}
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx := t.Context()
	fail := func(dest, ev string, at time.Time) store.IncidentAttempt {
		return store.IncidentAttempt{Destination: dest, Kind: "refused", EventID: ev, Error: "connection refused", At: at}
	}
	if _, err := a.RecordIncidents(ctx, []store.IncidentAttempt{fail("billing", "e1", t0), {Destination: "billing", At: t0.Add(time.Second)}}, p); err != nil {
		t.Fatal(err)
	}
	if cs, err := a.SweepIncidents(ctx, t0.Add(2*time.Minute), p); err != nil || len(cs) != 1 {
		t.Fatalf("sweep: %v, %v; want the incident resolved", cs, err)
	}
	// The other process, mid-transaction: the INSERT its upsert made.
	other, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.WithoutCancel(ctx))
	tx, err := other.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const newID = "01900000-0000-7000-8000-000000000001"
	if _, err := tx.Exec(ctx, `INSERT INTO incidents (id, destination, kind, state, first_seen, last_seen, attempts, events, latest_error)
		VALUES ($1, 'billing', 'refused', 'open', $2, $2, 1, 0, 'connection refused')`, newID, t0.Add(3*time.Minute)); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := a.RecordIncidents(ctx, []store.IncidentAttempt{fail("billing", "e2", t0.Add(3*time.Minute)), fail("search", "e3", t0.Add(3*time.Minute))}, p)
		done <- err
	}()
	// Wait until the recorder waits on the other transaction's lock.
	for {
		var waiting bool
		if err := other.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE NOT granted)`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the recorder did not wait for the other transaction (err %v)", err)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("RecordIncidents lost its batch to the race: %v", err)
	}
	is, _, err := a.ListIncidents(ctx, store.IncidentFilter{State: "unresolved"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, i := range is {
		got[i.Destination] += i.Attempts
	}
	if len(is) != 2 || got["billing"] != 2 || got["search"] != 1 {
		t.Fatalf("unresolved incidents %+v; want billing's counting 2 attempts and search's 1", is)
	}
}
