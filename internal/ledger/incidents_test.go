package ledger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/ledger"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// TestCheckpointerPrunesIncidents: the checkpointer's pruning round
// deletes the incidents resolved longer ago than incidents.retention
// (by its clock) and keeps the others.
func TestCheckpointerPrunesIncidents(t *testing.T) {
	forEachEnv(t, func(t *testing.T, e *env) {
		now := time.Now()
		p := store.IncidentPolicy{ResolveAfter: time.Minute}
		record := func(dest string, at time.Time) string {
			cs, err := e.st.RecordIncidents(t.Context(), []store.IncidentAttempt{{Destination: dest, Kind: "5xx", EventID: "e", Error: "HTTP 500", At: at}}, p)
			if err != nil || len(cs) != 1 {
				t.Fatalf("%v %v", cs, err)
			}
			return cs[0].Incident.ID
		}
		// old resolved 100 days ago, recent a day ago; open never.
		old, recent, open := record("billing", now.Add(-100*24*time.Hour)), record("crm", now.Add(-48*time.Hour)), record("audit", now)
		for id, at := range map[string]time.Time{old: now.Add(-100 * 24 * time.Hour), recent: now.Add(-24 * time.Hour)} {
			if _, err := e.st.ResolveIncident(t.Context(), id, store.Actor{Name: "test"}, at); err != nil {
				t.Fatal(err)
			}
		}
		cpr := ledger.NewCheckpointer(e.st, ledger.CheckpointerOptions{Key: e.key, Interval: 10 * time.Millisecond,
			Incidents: e.st, IncidentRetention: 90 * 24 * time.Hour, Now: func() time.Time { return now }})
		cpr.Start(t.Context())
		defer cpr.Stop()
		exists := func(id string) bool {
			_, err := e.st.Incident(t.Context(), id)
			if err != nil && !errors.Is(err, anyhook.ErrNotFound) {
				t.Fatal(err)
			}
			return err == nil
		}
		testwait.For(t, "the incident resolved 100 days ago pruned", func() bool { return !exists(old) })
		if !exists(recent) || !exists(open) {
			t.Errorf("pruned too much: recent kept %v, open kept %v", exists(recent), exists(open))
		}
	})
}
