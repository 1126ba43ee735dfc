package gateway_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// get fetches path from the gateway with the admin token (or none).
func get(t *testing.T, e *env, path, token string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", e.url+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestRoutes(t *testing.T) {
	t.Parallel()
	e := setup(t, sinktest.New(t), "")
	for _, c := range []struct {
		path, token string
		code        int
		contains    string
	}{
		{"/healthz", "", 200, "ok"},
		{"/readyz", "", 200, "ok"},
		{"/api/events", "", 401, "unauthorized"},
		{"/api/events", "test-token", 200, `"items"`},
		{"/metrics", "", 401, "scope admin or read"},
		{"/metrics", "test-token", 200, "anyhook_queue_depth"},
		{"/login", "", 200, `name="token"`},
		{"/", "", 303, ""},
		{"/assets/app.css", "", 200, "--accent"},
	} {
		code, body := get(t, e, c.path, c.token)
		if code != c.code || !strings.Contains(body, c.contains) {
			t.Errorf("GET %s: %d, want %d containing %q; body: %.200s", c.path, code, c.code, c.contains, body)
		}
	}
}

// metricValue finds the sample of name with exactly labels in a text
// exposition.
func metricValue(t *testing.T, exposition, series string) (float64, bool) {
	t.Helper()
	for _, line := range strings.Split(exposition, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f, true
		}
	}
	return 0, false
}

func TestMetricsAfterTraffic(t *testing.T) {
	t.Parallel()
	e := setup(t, sinktest.New(t), "")
	a := e.sendStripe(t, "evt_m1")
	if a.Status != "accepted" {
		t.Fatalf("send: %+v", a)
	}
	if d := e.sendStripe(t, "evt_m1"); d.Status != "duplicate" {
		t.Fatalf("resend: %+v", d)
	}
	forged := stripeRequest(t, e.url+"/webhooks/stripe", "whsec_wrong", []byte(`{"id":"evt_forged"}`), time.Now())
	if r := do(t, forged); r.Code != 400 {
		t.Fatalf("forged: %+v", r)
	}
	if r := do(t, stripeRequest(t, e.url+"/webhooks/made-up-name", stripeSecret, []byte(`{"id":"x"}`), time.Now())); r.Code != 404 {
		t.Fatalf("unknown source: %+v", r)
	}
	e.waitStatus(t, a.ID, anyhook.StatusDelivered)

	// The worker counts the attempt just after the store records it: its
	// signal comes once the metrics counted it.
	e.signals.waitCount(t, "attempted billing delivered", 1)
	code, body := get(t, e, "/metrics", "test-token")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for series, want := range map[string]float64{
		`anyhook_ingest_requests_total{outcome="accepted",source="stripe"}`:                          1,
		`anyhook_ingest_requests_total{outcome="duplicate",source="stripe"}`:                         1,
		`anyhook_ingest_requests_total{outcome="rejected_signature",source="stripe"}`:                1,
		`anyhook_ingest_requests_total{outcome="unknown_source",source=""}`:                          1,
		`anyhook_ingest_duration_seconds_count{source="stripe"}`:                                     3,
		`anyhook_deliveries_total{destination="billing",outcome="delivered"}`:                        1,
		`anyhook_deliveries_total{destination="billing",outcome="dead"}`:                             0,
		`anyhook_delivery_attempts_total{destination="billing",outcome="answered",result="success"}`: 1,
		`anyhook_delivery_attempt_duration_seconds_count{destination="billing"}`:                     1,
		`anyhook_queue_depth{destination="billing",status="pending"}`:                                0,
		`anyhook_queue_depth{destination="billing",status="dead"}`:                                   0,
		`anyhook_oldest_pending_age_seconds`:                                                         0,
		`anyhook_store_scrape_error`:                                                                 0,
		`anyhook_ingest_in_progress`:                                                                 0, // all answered
		`anyhook_ingest_bound_halved`:                                                                0,
	} {
		got, ok := metricValue(t, body, series)
		if !ok || got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	if _, ok := metricValue(t, body, `anyhook_ingest_commit_rate`); !ok {
		t.Error("no anyhook_ingest_commit_rate") // 0 here: no batch big enough to time it
	}
	if _, ok := metricValue(t, body, `anyhook_last_delivered_timestamp_seconds{destination="billing"}`); !ok {
		t.Error("no anyhook_last_delivered_timestamp_seconds for billing")
	}
	if !strings.Contains(body, "go_goroutines") || !strings.Contains(body, "# TYPE anyhook_ingest_duration_seconds histogram") {
		t.Error("runtime collectors or histogram type missing")
	}
	if strings.Contains(body, "made-up-name") {
		t.Error("an unknown source name became a label value")
	}
}

// TestPlainHTTPSlackAlertCounted: a Slack channel on plain http:// to a
// loopback host (a local proxy that adds TLS) posts through the loopback-only
// transport, and its posts are still counted in anyhook_alerts_sent_total.
func TestPlainHTTPSlackAlertCounted(t *testing.T) {
	t.Parallel()
	alerts := sinktest.New(t)
	e := setup(t, sinktest.New(t, http.StatusInternalServerError), "    max_attempts: 1", "alerts:\n  - slack: "+alerts.URL+"/services/T000/B000/XXXX")
	a := e.sendStripe(t, "evt_slack_counted")
	e.waitStatus(t, a.ID, anyhook.StatusDead)
	alerts.Wait(t, 1)
	testwait.For(t, `anyhook_alerts_sent_total{result="ok"} ≥ 1 after the Slack channel got its post`, func() bool {
		_, exposition := get(t, e, "/metrics", "test-token")
		v, _ := metricValue(t, exposition, `anyhook_alerts_sent_total{result="ok"}`)
		return v >= 1
	})
}

// TestDestinationOutageAlerts: 500 deliveries fail against one
// destination; the alert channel gets a handful of messages (not 500):
// one incident opened, then escalated (more than escalate_events events
// affected). The dead deliveries raise no alert of their own
// (alert_delivery_dead is off by default). Resolving is
// TestIncidentsFollowAnOutage's.
func TestDestinationOutageAlerts(t *testing.T) {
	t.Parallel()
	const n = 500
	script := make([]int, n)
	for i := range script {
		script[i] = http.StatusInternalServerError
	}
	alerts := sinktest.New(t)
	e := setup(t, sinktest.New(t, script...), "    max_attempts: 1", "alerts:\n  - webhook: "+alerts.URL+"/alerts")

	var wg sync.WaitGroup
	ids := make(chan string, n)
	for w := range 16 {
		wg.Go(func() {
			for i := w; i < n; i += 16 {
				a := e.sendStripe(t, fmt.Sprintf("evt_out_%d", i))
				if a.Status != "accepted" {
					t.Errorf("send %d: %+v", i, a)
				}
				ids <- a.ID
			}
		})
	}
	wg.Wait()
	close(ids)
	// Each worker signals its outcome once the store recorded it and the
	// metrics counted it (on a loaded machine a lease can expire first:
	// the rescuer's verdict is then the one signalled).
	e.signals.wait(t, fmt.Sprintf("%d deliveries dead", n), func() error {
		if got := e.signals.count("attempted billing dead") + e.signals.count("rescued billing dead"); got < n {
			return fmt.Errorf("%d so far", got)
		}
		return nil
	})
	if counts, err := e.store.Counts(t.Context()); err != nil || counts[anyhook.StatusDead] != n {
		t.Fatalf("counts %v, %v; want %d dead", counts, err, n)
	}
	// The destination answers again (the sink's script has run out).
	ok := e.sendStripe(t, "evt_back")
	e.waitStatus(t, ok.ID, anyhook.StatusDelivered)

	// Every dead delivery is counted once: by its worker, or by the rescuer
	// when its lease ran out first (a loaded machine). Both were signalled.
	// The incident's alert is raised by the recorder within its interval.
	testwait.For(t, "an alert sent", func() bool {
		_, x := get(t, e, "/metrics", "test-token")
		v, _ := metricValue(t, x, `anyhook_alerts_sent_total{result="ok"}`)
		return v >= 1
	})
	_, exposition := get(t, e, "/metrics", "test-token")
	byWorker, _ := metricValue(t, exposition, `anyhook_deliveries_total{destination="billing",outcome="dead"}`)
	byRescuer, _ := metricValue(t, exposition, `anyhook_rescues_total{destination="billing",status="dead"}`)
	if v := byWorker + byRescuer; v != n {
		t.Errorf("dead deliveries counted = %v (%v by the workers, %v by the rescuer), want %d", v, byWorker, byRescuer, n)
	}
	if v, _ := metricValue(t, exposition, `anyhook_alerts_sent_total{result="ok"}`); v < 1 {
		t.Errorf("anyhook_alerts_sent_total{result=\"ok\"} = %v, want ≥ 1", v)
	}

	e.gw.Stop(context.Background()) // sends the summaries still waiting for their window
	var bodies [][]byte
	for _, r := range alerts.Requests() {
		bodies = append(bodies, r.Body)
	}
	var kinds []string
	var incident []map[string]any
	for _, b := range bodies {
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, fmt.Sprint(m["kind"]))
		if k := fmt.Sprint(m["kind"]); strings.HasPrefix(k, "incident_") {
			incident = append(incident, m)
		} else {
			t.Errorf("alert %v; want only incident alerts", m)
		}
	}
	t.Logf("%d deliveries failed; %d alert messages: %v", n, len(bodies), kinds)
	if len(bodies) > 6 {
		t.Errorf("%d alert messages for one outage, want a handful", len(bodies))
	}
	if len(incident) < 2 || incident[0]["kind"] != "incident_opened" || incident[len(incident)-1]["kind"] != "incident_escalated" {
		t.Fatalf("incident alerts %v, want opened first and escalated last", incident)
	}
	if incident[0]["destination"] != "billing" || !strings.Contains(fmt.Sprint(incident[0]["message"]), "answering 5xx") ||
		incident[0]["incident_id"] == nil || incident[0]["incident_id"] != incident[len(incident)-1]["incident_id"] {
		t.Errorf("incident alerts %v", incident)
	}
}
