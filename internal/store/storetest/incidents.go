package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// runIncidents holds a backend's store.Incidents to the same behaviour:
// grouping, the windows (by the caller's times), the actions, paging,
// and one incident for concurrent recorders.
func runIncidents(t *testing.T, open Open) {
	runTable(t, []named[func(*testing.T, store.Incidents)]{
		{"OpenCountAndSample", testIncidentOpenCount},
		{"KindsAreSeparate", testIncidentKinds},
		{"ResolveAfterHealthyWindow", testIncidentResolve},
		{"ReopenWithinWindow", testIncidentReopen},
		{"Escalate", testIncidentEscalate},
		{"AcknowledgeAndResolveByHand", testIncidentActions},
		{"ListFiltersAndPages", testIncidentList},
		{"NoteBreaker", testIncidentBreaker},
		{"ConcurrentRecordersOneIncident", testIncidentConcurrent},
		{"LookupNotText", testIncidentLookupNotText},
		{"Prune", testIncidentPrune},
	}, func(t *testing.T, fn func(*testing.T, store.Incidents)) {
		fn(t, open(t))
	})
}

// incT0 is the suite's incident clock: any fixed instant does, as the
// incidents' windows are judged by the times the caller passes.
var incT0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

var incPolicy = store.IncidentPolicy{ResolveAfter: 5 * time.Minute, ReopenWithin: 30 * time.Minute, EscalateEvents: 3, EscalateAfter: time.Hour}

func failInc(dest, kind, ev string, at time.Duration) store.IncidentAttempt {
	return store.IncidentAttempt{Destination: dest, Kind: kind, EventID: ev, Error: kind + " at " + at.String(), At: incT0.Add(at)}
}

func successInc(dest string, at time.Duration) store.IncidentAttempt {
	return store.IncidentAttempt{Destination: dest, At: incT0.Add(at)}
}

func recordInc(t *testing.T, s store.Incidents, p store.IncidentPolicy, as ...store.IncidentAttempt) []store.IncidentChange {
	t.Helper()
	cs, err := s.RecordIncidents(ctx(t), as, p)
	if err != nil {
		t.Fatalf("RecordIncidents: %v", err)
	}
	return cs
}

func sweepInc(t *testing.T, s store.Incidents, at time.Duration, p store.IncidentPolicy) []store.IncidentChange {
	t.Helper()
	cs, err := s.SweepIncidents(ctx(t), incT0.Add(at), p)
	if err != nil {
		t.Fatalf("SweepIncidents: %v", err)
	}
	return cs
}

func changes(cs []store.IncidentChange) string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Change+" "+c.Incident.Destination+"/"+c.Incident.Kind)
	}
	return fmt.Sprint(out)
}

func readIncident(t *testing.T, s store.Incidents, id string) store.Incident {
	t.Helper()
	i, err := s.Incident(ctx(t), id)
	if err != nil {
		t.Fatalf("Incident(%s): %v", id, err)
	}
	return i
}

func testIncidentOpenCount(t *testing.T, s store.Incidents) {
	p := incPolicy
	p.EscalateEvents = 0
	cs := recordInc(t, s, p, failInc("billing", "refused", "e1", 0), failInc("billing", "refused", "e1", time.Second), failInc("billing", "refused", "e2", 2*time.Second))
	if changes(cs) != "[opened billing/refused]" {
		t.Fatalf("first batch: %s; want one open", changes(cs))
	}
	id := cs[0].Incident.ID
	var evs []store.IncidentAttempt
	for i := range 14 {
		evs = append(evs, failInc("billing", "refused", fmt.Sprintf("e%02d", i+3), time.Duration(10+i)*time.Second))
	}
	if cs := recordInc(t, s, p, evs...); len(cs) != 0 {
		t.Fatalf("second batch: %s; want no change", changes(cs))
	}
	i := readIncident(t, s, id)
	if i.State != store.IncidentOpen || i.Attempts != 17 || i.Events != 16 || !i.FirstSeen.Equal(incT0) || !i.LastSeen.Equal(incT0.Add(23*time.Second)) ||
		i.LatestError != "refused at 23s" || i.Reopens != 0 {
		t.Fatalf("incident: %+v", i)
	}
	want := []string{"e1", "e2", "e03", "e04", "e05", "e06", "e07", "e08", "e09", "e10"}
	if fmt.Sprint(i.Sample) != fmt.Sprint(want) {
		t.Fatalf("sample %v; want the first %d seen %v", i.Sample, store.IncidentSample, want)
	}
	if _, err := s.Incident(ctx(t), store.NewID()); !errors.Is(err, anyhook.ErrNotFound) {
		t.Fatalf("unknown id: %v; want ErrNotFound", err)
	}
}

func testIncidentKinds(t *testing.T, s store.Incidents) {
	cs := recordInc(t, s, incPolicy, failInc("billing", "refused", "e1", 0), failInc("billing", "timeout", "e1", time.Second), failInc("crm", "refused", "e2", 0))
	if changes(cs) != "[opened billing/refused opened billing/timeout opened crm/refused]" {
		t.Fatalf("%s; want one incident per (destination, kind)", changes(cs))
	}
}

func testIncidentResolve(t *testing.T, s store.Incidents) {
	cs := recordInc(t, s, incPolicy, failInc("billing", "5xx", "e1", 0), failInc("crm", "5xx", "e2", 0))
	// billing succeeds at 1m, then fails at 2m: its healthy time starts
	// again at 3m. crm succeeds at 1m and stays healthy.
	recordInc(t, s, incPolicy, successInc("billing", time.Minute), successInc("crm", time.Minute))
	recordInc(t, s, incPolicy, failInc("billing", "timeout", "e3", 2*time.Minute))
	recordInc(t, s, incPolicy, successInc("billing", 3*time.Minute))
	if cs := sweepInc(t, s, 5*time.Minute, incPolicy); len(cs) != 0 {
		t.Fatalf("sweep at 5m: %s; want nothing yet (healthy for 4m at most)", changes(cs))
	}
	if cs := sweepInc(t, s, 6*time.Minute, incPolicy); changes(cs) != "[resolved crm/5xx]" {
		t.Fatalf("sweep at 6m: %s; want crm resolved", changes(cs))
	}
	cs2 := sweepInc(t, s, 8*time.Minute, incPolicy)
	if changes(cs2) != "[resolved billing/5xx resolved billing/timeout]" {
		t.Fatalf("sweep at 8m: %s; want billing's two resolved", changes(cs2))
	}
	i := readIncident(t, s, cs[0].Incident.ID)
	if i.State != store.IncidentResolved || i.ResolvedBy != store.ResolvedByAuto || !i.ResolvedAt.Equal(incT0.Add(8*time.Minute)) {
		t.Fatalf("resolved: %+v", i)
	}
	if cs := sweepInc(t, s, 20*time.Minute, incPolicy); len(cs) != 0 {
		t.Fatalf("a second sweep: %s; want nothing", changes(cs))
	}
}

func testIncidentReopen(t *testing.T, s store.Incidents) {
	cs := recordInc(t, s, incPolicy, failInc("billing", "5xx", "e1", 0))
	id := cs[0].Incident.ID
	recordInc(t, s, incPolicy, successInc("billing", time.Minute))
	sweepInc(t, s, 10*time.Minute, incPolicy)
	// Within 30m of its resolve: the same incident, reopened.
	cs = recordInc(t, s, incPolicy, failInc("billing", "5xx", "e2", 20*time.Minute))
	if changes(cs) != "[reopened billing/5xx]" || cs[0].Incident.ID != id || cs[0].Incident.Reopens != 1 || cs[0].Incident.State != store.IncidentOpen ||
		cs[0].Incident.Attempts != 2 || cs[0].Incident.Events != 2 {
		t.Fatalf("reopen: %s %+v", changes(cs), cs)
	}
	recordInc(t, s, incPolicy, successInc("billing", 21*time.Minute))
	sweepInc(t, s, 30*time.Minute, incPolicy)
	// Past the window: a new incident.
	cs = recordInc(t, s, incPolicy, failInc("billing", "5xx", "e3", 2*time.Hour))
	if changes(cs) != "[opened billing/5xx]" || cs[0].Incident.ID == id {
		t.Fatalf("after the window: %s; want a new incident", changes(cs))
	}
}

func testIncidentEscalate(t *testing.T, s store.Incidents) {
	cs := recordInc(t, s, incPolicy, failInc("billing", "5xx", "e1", 0), failInc("billing", "5xx", "e2", 0))
	if changes(cs) != "[opened billing/5xx]" {
		t.Fatalf("%s", changes(cs))
	}
	if cs := recordInc(t, s, incPolicy, failInc("billing", "5xx", "e2", time.Second)); len(cs) != 0 {
		t.Fatalf("a repeat event: %s; want no escalation (2 events)", changes(cs))
	}
	if cs := recordInc(t, s, incPolicy, failInc("billing", "5xx", "e3", 2*time.Second)); changes(cs) != "[escalated billing/5xx]" {
		t.Fatalf("third event: %s; want an escalation", changes(cs))
	}
	if cs := recordInc(t, s, incPolicy, failInc("billing", "5xx", "e4", 3*time.Second)); len(cs) != 0 {
		t.Fatalf("fourth event: %s; want none (once)", changes(cs))
	}
	recordInc(t, s, incPolicy, failInc("crm", "4xx", "e1", 0))
	if cs := sweepInc(t, s, 59*time.Minute, incPolicy); len(cs) != 0 {
		t.Fatalf("sweep at 59m: %s", changes(cs))
	}
	if cs := sweepInc(t, s, time.Hour, incPolicy); changes(cs) != "[escalated crm/4xx]" {
		t.Fatalf("sweep at 1h: %s; want crm escalated by time", changes(cs))
	}
}

func testIncidentActions(t *testing.T, s store.Incidents) {
	cs := recordInc(t, s, incPolicy, failInc("billing", "5xx", "e1", 0))
	id := cs[0].Incident.ID
	by := store.Actor{Name: "dashboard session 1", Reason: "looking at it"}
	i, err := s.AcknowledgeIncident(ctx(t), id, by, incT0.Add(time.Minute))
	if err != nil || i.State != store.IncidentAcknowledged || i.AcknowledgedBy != by.Name || i.Note != by.Reason || !i.AcknowledgedAt.Equal(incT0.Add(time.Minute)) {
		t.Fatalf("acknowledge: %+v, %v", i, err)
	}
	if _, err := s.AcknowledgeIncident(ctx(t), id, by, incT0); !errors.Is(err, anyhook.ErrInvalid) {
		t.Fatalf("acknowledge twice: %v; want ErrInvalid", err)
	}
	// Failures still count on an acknowledged incident.
	if cs := recordInc(t, s, incPolicy, failInc("billing", "5xx", "e2", 2*time.Minute)); len(cs) != 0 {
		t.Fatalf("%s", changes(cs))
	}
	i, err = s.ResolveIncident(ctx(t), id, store.Actor{Name: "api"}, incT0.Add(3*time.Minute))
	if err != nil || i.State != store.IncidentResolved || i.ResolvedBy != "api" || i.Note != by.Reason || i.Attempts != 2 {
		t.Fatalf("resolve: %+v, %v", i, err)
	}
	if _, err := s.ResolveIncident(ctx(t), id, by, incT0); !errors.Is(err, anyhook.ErrInvalid) {
		t.Fatalf("resolve twice: %v; want ErrInvalid", err)
	}
	if _, err := s.ResolveIncident(ctx(t), store.NewID(), by, incT0); !errors.Is(err, anyhook.ErrNotFound) {
		t.Fatalf("resolve unknown: %v; want ErrNotFound", err)
	}
	// Failing again soon after a person resolved it reopens it.
	if cs := recordInc(t, s, incPolicy, failInc("billing", "5xx", "e3", 4*time.Minute)); changes(cs) != "[reopened billing/5xx escalated billing/5xx]" {
		t.Fatalf("after a resolve by hand: %s; want a reopen (and its third event escalates)", changes(cs))
	}
}

func testIncidentList(t *testing.T, s store.Incidents) {
	for i := range 5 {
		recordInc(t, s, incPolicy, failInc("billing", fmt.Sprint(500+i), "e", time.Duration(i)*time.Second))
	}
	cs := recordInc(t, s, incPolicy, failInc("crm", "4xx", "e", 0))
	if _, err := s.ResolveIncident(ctx(t), cs[0].Incident.ID, tester, incT0); err != nil {
		t.Fatal(err)
	}
	var got []string
	cursor := ""
	for {
		is, next, err := s.ListIncidents(ctx(t), store.IncidentFilter{Destination: "billing", Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range is {
			got = append(got, i.Kind)
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if fmt.Sprint(got) != "[504 503 502 501 500]" {
		t.Fatalf("billing's, newest first, in pages of 2: %v", got)
	}
	for _, c := range []struct {
		state string
		want  int
	}{{"unresolved", 5}, {store.IncidentResolved, 1}, {store.IncidentOpen, 5}, {"", 6}} {
		is, _, err := s.ListIncidents(ctx(t), store.IncidentFilter{State: c.state})
		if err != nil || len(is) != c.want {
			t.Fatalf("state %q: %d, %v; want %d", c.state, len(is), err, c.want)
		}
	}
}

func testIncidentBreaker(t *testing.T, s store.Incidents) {
	cs := recordInc(t, s, incPolicy, failInc("billing", "5xx", "e1", 0), failInc("crm", "5xx", "e1", 0))
	if err := s.NoteBreaker(ctx(t), "billing", true, incT0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if err := s.NoteBreaker(ctx(t), "billing", false, incT0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	b := readIncident(t, s, cs[0].Incident.ID)
	if !b.BreakerTrippedAt.Equal(incT0.Add(time.Minute)) || !b.BreakerResumedAt.Equal(incT0.Add(2*time.Minute)) {
		t.Fatalf("billing: %+v", b)
	}
	if c := readIncident(t, s, cs[1].Incident.ID); !c.BreakerTrippedAt.IsZero() {
		t.Fatalf("crm noted too: %+v", c)
	}
}

// testIncidentConcurrent has recorders racing on one (destination, kind):
// on PostgreSQL each is a transaction of its own on its own connection,
// as two processes' would be.
func testIncidentConcurrent(t *testing.T, s store.Incidents) {
	const n = 8
	var wg sync.WaitGroup
	opened := make(chan string, n)
	errs := make(chan error, n)
	for w := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs, err := s.RecordIncidents(ctx(t), []store.IncidentAttempt{failInc("billing", "refused", fmt.Sprint("e", w), time.Duration(w)*time.Millisecond)}, incPolicy)
			if err != nil {
				errs <- err
				return
			}
			for _, c := range cs {
				if c.Change == store.ChangeOpened {
					opened <- c.Incident.ID
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	close(opened)
	for err := range errs {
		t.Fatal(err)
	}
	var ids []string
	for id := range opened {
		ids = append(ids, id)
	}
	is, _, err := s.ListIncidents(ctx(t), store.IncidentFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || len(is) != 1 || is[0].ID != ids[0] || is[0].Attempts != n || is[0].Events != n {
		t.Fatalf("opened %v, stored %+v; want one incident counting %d attempts and events", ids, is, n)
	}
}

// testIncidentLookupNotText: an id or destination that no store can hold
// (not UTF-8, a NUL: store.TextProblem), as a URL can carry to the
// dashboard's incident pages, finds nothing on both stores alike; it is
// not the store failing (PostgreSQL refuses such bytes in a query).
func testIncidentLookupNotText(t *testing.T, s store.Incidents) {
	if _, err := s.RecordIncidents(ctx(t), []store.IncidentAttempt{failInc("billing", "5xx", "e1", 0)}, incPolicy); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"\xff", "a\x00b"} {
		if _, err := s.Incident(ctx(t), bad); !errors.Is(err, anyhook.ErrNotFound) {
			t.Errorf("Incident(%q) = %v, want not found", bad, err)
		}
		if _, err := s.AcknowledgeIncident(ctx(t), bad, store.Actor{Name: "ann"}, incT0); !errors.Is(err, anyhook.ErrNotFound) {
			t.Errorf("AcknowledgeIncident(%q) = %v, want not found", bad, err)
		}
		if is, _, err := s.ListIncidents(ctx(t), store.IncidentFilter{Destination: bad}); err != nil || len(is) != 0 {
			t.Errorf("ListIncidents(destination %q) = %v, %v, want none", bad, is, err)
		}
		if is, _, err := s.ListIncidents(ctx(t), store.IncidentFilter{Cursor: bad}); err != nil {
			t.Errorf("ListIncidents(cursor %q) = %v, %v, want no error", bad, is, err)
		}
	}
}

// testIncidentPrune: pruning deletes the incidents resolved before the
// cutoff, oldest first and a batch at a time, with their events; never
// one still open, nor one resolved since the cutoff.
func testIncidentPrune(t *testing.T, s store.Incidents) {
	// crm resolves at 6m, billing's at 8m (testIncidentResolve's story);
	// audit stays open.
	cs := recordInc(t, s, incPolicy, failInc("billing", "5xx", "e1", 0), failInc("crm", "5xx", "e2", 0), failInc("audit", "5xx", "e3", 0))
	recordInc(t, s, incPolicy, successInc("crm", time.Minute))
	sweepInc(t, s, 6*time.Minute, incPolicy)
	recordInc(t, s, incPolicy, successInc("billing", 2*time.Minute))
	sweepInc(t, s, 8*time.Minute, incPolicy)
	ids := map[string]string{}
	for _, c := range cs {
		ids[c.Incident.Destination] = c.Incident.ID
	}
	billing, crm, audit := ids["billing"], ids["crm"], ids["audit"]
	prune := func(before time.Duration, limit int) int {
		t.Helper()
		n, err := s.PruneIncidents(ctx(t), incT0.Add(before), limit)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	gone := func(id string) bool {
		_, err := s.Incident(ctx(t), id)
		if err != nil && !errors.Is(err, anyhook.ErrNotFound) {
			t.Fatal(err)
		}
		return err != nil
	}
	if n := prune(6*time.Minute, 10); n != 0 {
		t.Errorf("before 6m: pruned %d, want none (crm resolved at 6m)", n)
	}
	// Both resolved before 1h, one a batch: crm first (the older).
	if n := prune(time.Hour, 1); n != 1 || !gone(crm) || gone(billing) {
		t.Errorf("a batch of one: pruned %d; crm gone %v, billing gone %v; want crm only", n, gone(crm), gone(billing))
	}
	if n := prune(time.Hour, 10); n != 1 || !gone(billing) {
		t.Errorf("the next batch: pruned %d, billing gone %v", n, gone(billing))
	}
	if n := prune(1000*time.Hour, 10); n != 0 || gone(audit) {
		t.Errorf("far ahead: pruned %d, the open incident gone %v; want it kept", n, gone(audit))
	}
	// A new failure of billing/5xx opens a new incident (its events
	// start afresh: none left behind by the pruned one).
	cs = recordInc(t, s, incPolicy, failInc("billing", "5xx", "e1", 2*time.Hour))
	if changes(cs) != "[opened billing/5xx]" || cs[0].Incident.Events != 1 {
		t.Errorf("after the prune: %s %+v", changes(cs), cs)
	}
	if i := readIncident(t, s, cs[0].Incident.ID); len(i.Sample) != 1 || i.Sample[0] != "e1" {
		t.Errorf("the new incident's sample: %v", i.Sample)
	}
}
