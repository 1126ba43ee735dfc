package metrics_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/auth"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/ingest"
	"github.com/anyhook/anyhook/internal/metrics"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

// TestDestinationPaused: anyhook_destination_paused tells a person's pause
// from the breaker's, read from a real store at each scrape.
func TestDestinationPaused(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	m := metrics.New(metrics.Options{Pauses: st, Destinations: []string{"billing", "audit", "ci"}})
	if err := st.SetPaused(t.Context(), "audit", true); err != nil {
		t.Fatal(err)
	}
	if _, err := st.TripBreaker(t.Context(), "billing", time.Now(), "20 consecutive failed attempts", time.Now()); err != nil {
		t.Fatal(err)
	}
	_, body := scrape(t, m.Handler(), "")
	for _, want := range []string{
		`anyhook_destination_paused{by="breaker",destination="billing"} 1`,
		`anyhook_destination_paused{by="person",destination="billing"} 0`,
		`anyhook_destination_paused{by="breaker",destination="audit"} 0`,
		`anyhook_destination_paused{by="person",destination="audit"} 1`,
		`anyhook_destination_paused{by="breaker",destination="ci"} 0`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("scrape lacks %s", want)
		}
	}
	if _, err := st.ResetBreaker(t.Context(), "billing"); err != nil {
		t.Fatal(err)
	}
	if _, body := scrape(t, m.Handler(), ""); !strings.Contains(body, `anyhook_destination_paused{by="breaker",destination="billing"} 0`+"\n") {
		t.Error("the breaker's reset is not seen at the next scrape")
	}
}

// fakeStats is a hand-written store.StatsReader.
type fakeStats struct {
	qs  store.QueueStats
	err error
}

// QueueStats answers DueSince, as the stores do, only for the
// destinations asked about.
func (f *fakeStats) QueueStats(_ context.Context, dests []string) (store.QueueStats, error) {
	qs := f.qs
	qs.DueSince = map[string]time.Time{}
	for d, t := range f.qs.DueSince {
		if slices.Contains(dests, d) {
			qs.DueSince[d] = t
		}
	}
	return qs, f.err
}
func (f *fakeStats) Activity(context.Context, store.ActivityQuery) (store.Activity, error) {
	return store.Activity{}, nil
}
func (f *fakeStats) DeliveryStates(context.Context, []string) (map[string][]store.DeliveryState, error) {
	return nil, nil
}

func scrape(t *testing.T, h http.Handler, auth string) (int, string) {
	t.Helper()
	req := httptest.NewRequest("GET", "/metrics", nil)
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

func TestExposition(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	fs := &fakeStats{qs: store.QueueStats{Now: now, OldestPending: now.Add(-90 * time.Second),
		Depth: map[string]map[anyhook.DeliveryStatus]int{"billing": {anyhook.StatusPending: 3, anyhook.StatusDead: 2},
			"gone": {anyhook.StatusHeld: 1}, "removed": {anyhook.StatusPending: 1}},
		LastDelivered: map[string]time.Time{"billing": now},
		DueSince:      map[string]time.Time{"billing": now.Add(-time.Second), "removed": now.Add(-2 * time.Minute)}}}
	m := metrics.New(metrics.Options{Stats: fs, Destinations: []string{"billing"}})
	m.Ingested("stripe", "accepted", 3*time.Millisecond)
	m.Attempted("billing", anyhook.StatusPending, anyhook.Attempt{Duration: 20 * time.Millisecond, Outcome: anyhook.OutcomeAnswered})
	m.Attempted("billing", anyhook.StatusDead, anyhook.Attempt{Duration: 20 * time.Millisecond, Outcome: anyhook.OutcomeNoAnswer})
	m.Rescued("billing", anyhook.StatusHeld)
	m.Released("billing", delivery.ReleaseLease)
	rt := m.AlertTransport(roundTrip(func(*http.Request) (*http.Response, error) { return &http.Response{StatusCode: 200}, nil }))
	rt.RoundTrip(httptest.NewRequest("POST", "http://sink/", nil))

	h := metrics.RequireToken(auth.New([]auth.Token{
		{Name: "admin", Secret: "tok", Scopes: []string{auth.ScopeAdmin}},
		{Name: "grafana", Secret: "read-token", Scopes: []string{auth.ScopeRead}},
		{Name: "alice", Secret: "pull-token", Scopes: []string{"pull:billing"}},
	}), m.Handler())
	if code, _ := scrape(t, h, ""); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
	if code, _ := scrape(t, h, "Bearer nope"); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", code)
	}
	if code, _ := scrape(t, h, "Bearer pull-token"); code != http.StatusForbidden {
		t.Fatalf("pull token: %d, want 403", code)
	}
	if code, _ := scrape(t, h, "Bearer read-token"); code != http.StatusOK {
		t.Fatalf("read token: %d, want 200", code)
	}
	code, body := scrape(t, h, "Bearer tok")
	if code != 200 {
		t.Fatalf("scrape: %d", code)
	}
	for _, line := range []string{
		`anyhook_ingest_requests_total{outcome="accepted",source="stripe"} 1`,
		`anyhook_ingest_duration_seconds_count{source="stripe"} 1`,
		`anyhook_delivery_attempts_total{destination="billing",outcome="answered",result="failure"} 1`,
		`anyhook_delivery_attempts_total{destination="billing",outcome="no_answer",result="failure"} 1`,
		`anyhook_deliveries_total{destination="billing",outcome="retry"} 1`,
		`anyhook_deliveries_total{destination="billing",outcome="dead"} 1`,
		`anyhook_deliveries_total{destination="billing",outcome="delivered"} 0`,
		`anyhook_rescues_total{destination="billing",status="held"} 1`,
		`anyhook_releases_total{destination="billing",reason="lease"} 1`,
		`anyhook_alerts_sent_total{result="ok"} 1`,
		`anyhook_queue_depth{destination="billing",status="pending"} 3`,
		`anyhook_queue_depth{destination="billing",status="held"} 0`,
		`anyhook_queue_depth{destination="gone",status="held"} 1`,
		`anyhook_oldest_due_age_seconds{destination="billing"} 1`,
		// A destination no longer in the config whose delivery is due:
		// nobody will pick it up, and the overdue alert must see it.
		`anyhook_queue_depth{destination="removed",status="pending"} 1`,
		`anyhook_oldest_due_age_seconds{destination="removed"} 120`,
		`anyhook_oldest_due_age_seconds{destination="gone"} 0`,
		`anyhook_oldest_pending_age_seconds 90`,
		`anyhook_last_delivered_timestamp_seconds{destination="billing"} 1.7e+09`,
		`anyhook_store_scrape_error 0`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("exposition lacks %s", line)
		}
	}

	fs.err = errors.New("down")
	_, body = scrape(t, h, "Bearer tok")
	if !strings.Contains(body, "anyhook_store_scrape_error 1\n") || !strings.Contains(body, `anyhook_ingest_requests_total{outcome="accepted",source="stripe"} 1`) {
		t.Errorf("with the store down, the counters must still be served and the error flagged:\n%s", body)
	}
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestDocs keeps docs/operations.md and the Grafana dashboard in step
// with the metrics: every series is documented, and the dashboard asks
// for no series that does not exist.
func TestDocs(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Options{Stats: &fakeStats{}, Destinations: []string{"billing"}})
	m.Ingested("s", "accepted", 0)
	m.Attempted("billing", anyhook.StatusDelivered, anyhook.Attempt{Outcome: anyhook.OutcomeAnswered})
	m.Rescued("billing", anyhook.StatusPending)
	m.WatchAdmission(func() ingest.Admission { return ingest.Admission{} })
	m.AlertTransport(roundTrip(func(*http.Request) (*http.Response, error) { return &http.Response{StatusCode: 200}, nil })).
		RoundTrip(httptest.NewRequest("POST", "http://sink/", nil))
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range fams {
		names[f.GetName()] = true
		if !strings.Contains(string(doc), "`"+f.GetName()+"`") {
			t.Errorf("docs/operations.md does not document %s", f.GetName())
		}
	}
	dash, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, used := range regexp.MustCompile(`anyhook_[a-z_]+`).FindAllString(string(dash), -1) {
		base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(used, "_bucket"), "_count"), "_sum")
		if !names[base] {
			t.Errorf("docs/grafana-dashboard.json uses %s, which is not exposed", used)
		}
	}
}

// Every series of a known label combination is there at 0 before anything
// happened, so that dashboards show 0 instead of "No data".
func TestSeriesExistFromTheStart(t *testing.T) {
	t.Parallel()
	m := metrics.New(metrics.Options{Stats: &fakeStats{}, Sources: []string{"stripe", "gh"}, Destinations: []string{"billing", "crm"}})
	_, body := scrape(t, m.Handler(), "")
	var want []string
	for _, src := range []string{"stripe", "gh"} {
		for _, o := range metrics.IngestOutcomes {
			want = append(want, `anyhook_ingest_requests_total{outcome="`+o+`",source="`+src+`"} 0`)
		}
		want = append(want, `anyhook_ingest_duration_seconds_count{source="`+src+`"} 0`)
	}
	want = append(want, `anyhook_ingest_requests_total{outcome="unknown_source",source=""} 0`,
		`anyhook_alerts_sent_total{result="ok"} 0`, `anyhook_alerts_sent_total{result="error"} 0`)
	for _, d := range []string{"billing", "crm"} {
		want = append(want,
			`anyhook_delivery_attempts_total{destination="`+d+`",outcome="answered",result="success"} 0`,
			`anyhook_delivery_attempts_total{destination="`+d+`",outcome="answered",result="failure"} 0`,
			`anyhook_delivery_attempts_total{destination="`+d+`",outcome="no_answer",result="failure"} 0`,
			`anyhook_delivery_attempts_total{destination="`+d+`",outcome="not_sent",result="failure"} 0`,
			`anyhook_deliveries_total{destination="`+d+`",outcome="delivered"} 0`,
			`anyhook_deliveries_total{destination="`+d+`",outcome="retry"} 0`,
			`anyhook_deliveries_total{destination="`+d+`",outcome="dead"} 0`,
			`anyhook_delivery_attempt_duration_seconds_count{destination="`+d+`"} 0`,
			`anyhook_rescues_total{destination="`+d+`",status="pending"} 0`,
			`anyhook_rescues_total{destination="`+d+`",status="held"} 0`,
			`anyhook_rescues_total{destination="`+d+`",status="dead"} 0`,
			`anyhook_releases_total{destination="`+d+`",reason="lease"} 0`,
			`anyhook_queue_depth{destination="`+d+`",status="paused"} 0`,
			`anyhook_oldest_due_age_seconds{destination="`+d+`"} 0`,
		)
	}
	for _, line := range want {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("a fresh registry lacks %s", line)
		}
	}
	// The only series that may wait for something to happen is the time of
	// a destination's last successful delivery: there is none to show.
	for _, name := range []string{"anyhook_ingest_requests_total", "anyhook_ingest_duration_seconds", "anyhook_delivery_attempts_total",
		"anyhook_deliveries_total", "anyhook_delivery_attempt_duration_seconds", "anyhook_rescues_total", "anyhook_releases_total", "anyhook_alerts_sent_total",
		"anyhook_queue_depth", "anyhook_oldest_pending_age_seconds", "anyhook_oldest_due_age_seconds", "anyhook_store_scrape_error"} {
		if !strings.Contains(body, "\n"+name) {
			t.Errorf("%s has no series before its first increment", name)
		}
	}
}
