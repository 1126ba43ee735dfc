package gateway_test

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/testclock"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

type incidentView struct {
	ID          string `json:"id"`
	Destination string `json:"destination"`
	Kind        string `json:"kind"`
	State       string `json:"state"`
	Attempts    int    `json:"attempts"`
	Events      int    `json:"events"`
	Reopens     int    `json:"reopens"`
	ResolvedBy  string `json:"resolved_by"`
	LatestError string `json:"latest_error"`
	Healthy     string `json:"healthy_since"`
}

type alertView struct {
	Kind        string `json:"kind"`
	Destination string `json:"destination"`
	IncidentID  string `json:"incident_id"`
	Message     string `json:"message"`
	URL         string `json:"url"`
}

// TestIncidentsFollowAnOutage: a destination refuses connections (its
// port is closed), then times out, then answers 500, then recovers. Each
// way it fails opens an incident of its own, each alerts once on a real
// alert sink, and all resolve once the destination has delivered for
// resolve_after on the gateway's clock; failing again within
// reopen_within reopens the same incident. No delivery_dead alert comes:
// those are opt-in.
func TestIncidentsFollowAnOutage(t *testing.T) {
	t.Parallel()
	// The destination's address, held closed: connections are refused.
	hold, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := hold.Addr().String()
	hold.Close()

	alerts := sinktest.New(t)
	clock := testclock.New(time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC))
	yaml := testTop + fmt.Sprintf(`dashboard_url: https://hooks.example.com/
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  billing:
    url: http://%s/hooks
    sources: [stripe]
    timeout: 300ms
    max_attempts: 1
alerts:
  - webhook: %s/alerts
alert_window: 1s
incidents: {resolve_after: 1m, reopen_within: 10m, escalate_events: 0, escalate_after: 0s}
`, stripeSecret, addr, alerts.URL)
	sig := newSignals()
	base, g := gatewaytest.Start(t, yaml, gateway.Options{Now: clock.Now, Observer: sig, IncidentInterval: 10 * time.Millisecond})
	n := 0
	send := func() string {
		t.Helper()
		n++
		body := fmt.Appendf(nil, `{"id":"evt_inc_%d","object":"event","type":"invoice.paid","created":1,"data":{"object":{"id":"in_1"}}}`, n)
		a := do(t, stripeRequest(t, base+"/webhooks/stripe", stripeSecret, body, clock.Now()))
		if a.Status != "accepted" {
			t.Fatalf("send: %+v", a)
		}
		return a.ID
	}
	list := func() []incidentView {
		code, b := gatewaytest.Admin(t, "GET", base+"/api/incidents", "")
		var l struct{ Items []incidentView }
		if code != http.StatusOK || json.Unmarshal(b, &l) != nil {
			t.Fatalf("GET /api/incidents: %d %s", code, b)
		}
		return l.Items
	}
	// waitIncident waits for the incident of kind to be in state and
	// count attempts (0: any).
	waitIncident := func(kind, state string, attempts int) incidentView {
		t.Helper()
		return testwait.Value(t, "a "+state+" "+kind+" incident", func() (incidentView, error) {
			is := list()
			for _, i := range is {
				if i.Kind == kind && i.State == state && (attempts == 0 || i.Attempts == attempts) {
					return i, nil
				}
			}
			return incidentView{}, fmt.Errorf("incidents: %+v", is)
		})
	}
	attempted := func(status anyhook.DeliveryStatus, k int) {
		t.Helper()
		sig.wait(t, fmt.Sprintf("%d attempts %s", k, status), func() error {
			if got := sig.count("attempted billing " + string(status)); got < k {
				return fmt.Errorf("%d so far", got)
			}
			return nil
		})
	}

	// 1. Refused: two events, one incident.
	send()
	send()
	attempted(anyhook.StatusDead, 2)
	refused := waitIncident("refused", "open", 2)
	if refused.Attempts != 2 || refused.Events != 2 || refused.Destination != "billing" || !strings.Contains(refused.LatestError, "connection refused") {
		t.Fatalf("refused: %+v", refused)
	}

	// 2. Timeout: the destination listens now, and holds the request
	// past the timeout; then 3. it answers 500; then 4. 200.
	var mode atomic.Value
	mode.Store("hang")
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on the destination's address again: %v", err)
	}
	sinktest.Start(t, sinktest.Options{Listener: ln, Answer: func(r *http.Request, _ []byte) int {
		switch mode.Load() {
		case "hang":
			<-r.Context().Done()
			return 0
		case "500":
			return http.StatusInternalServerError
		}
		return http.StatusOK
	}})
	clock.Add(time.Second)
	send()
	attempted(anyhook.StatusDead, 3)
	timeout := waitIncident("timeout", "open", 1)

	mode.Store("500")
	clock.Add(time.Second)
	send()
	attempted(anyhook.StatusDead, 4)
	fivexx := waitIncident("5xx", "open", 1)

	// Each opened once, alerted once, keyed by its id.
	opened := alerts.Await(t, "three incident_opened alerts", func(rs []sinktest.Request) bool { return len(rs) >= 3 })
	ids := map[string]string{refused.ID: "refused", timeout.ID: "timeout", fivexx.ID: "5xx"}
	for _, r := range opened {
		var a alertView
		if err := json.Unmarshal(r.Body, &a); err != nil {
			t.Fatal(err)
		}
		if a.Kind != "incident_opened" || ids[a.IncidentID] == "" || a.Destination != "billing" ||
			a.URL != "https://hooks.example.com/incidents/"+a.IncidentID {
			t.Fatalf("alert %+v; want an incident_opened of one of %v", a, ids)
		}
	}

	// 4. Recovery: delivered at t, healthy since; resolved at t+1m (the
	// window's edges are the conformance suite's: storetest).
	mode.Store("ok")
	clock.Add(time.Second)
	send()
	attempted(anyhook.StatusDelivered, 1)
	testwait.For(t, "the incidents healthy", func() bool {
		for _, i := range list() {
			if i.Healthy == "" {
				return false
			}
		}
		return true
	})
	for _, i := range list() {
		if i.State != "open" {
			t.Fatalf("before resolve_after: %+v", i)
		}
	}
	clock.Add(time.Minute)
	for _, kind := range []string{"refused", "timeout", "5xx"} {
		if i := waitIncident(kind, "resolved", 0); i.ResolvedBy != "auto" {
			t.Fatalf("%s: %+v", kind, i)
		}
	}
	resolved := alerts.Await(t, "three incident_resolved alerts", func(rs []sinktest.Request) bool {
		k := 0
		for _, r := range rs {
			var a alertView
			json.Unmarshal(r.Body, &a)
			if a.Kind == "incident_resolved" {
				k++
			}
		}
		return k >= 3
	})

	// 5. A 500 again within reopen_within: the same incident, reopened.
	mode.Store("500")
	clock.Add(time.Minute)
	send()
	attempted(anyhook.StatusDead, 5)
	again := waitIncident("5xx", "open", 2)
	if again.ID != fivexx.ID || again.Reopens != 1 || again.Attempts != 2 {
		t.Fatalf("reopened: %+v; want %s with reopens 1", again, fivexx.ID)
	}
	all := alerts.Await(t, "the reopen's alert", func(rs []sinktest.Request) bool { return len(rs) > len(resolved) })
	var last alertView
	json.Unmarshal(all[len(all)-1].Body, &last)
	if last.Kind != "incident_opened" || last.IncidentID != fivexx.ID || !strings.Contains(last.Message, "reopened") {
		t.Fatalf("reopen alert %+v", last)
	}
	g.Stop(t.Context())
	for _, r := range alerts.Requests() {
		var a alertView
		json.Unmarshal(r.Body, &a)
		if !strings.HasPrefix(a.Kind, "incident_") {
			t.Errorf("alert %+v: only incident alerts are on by default", a)
		}
	}
}

// TestIncidentsTwoGatewaysOnePostgres: two gateways on one PostgreSQL
// database deliver to a destination that refuses connections; each
// counts its own attempts on one incident, which both list, and its
// opening alerts once.
func TestIncidentsTwoGatewaysOnePostgres(t *testing.T) {
	t.Parallel()
	hold, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := hold.Addr().String()
	hold.Close()
	alerts := sinktest.New(t)
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
database: %q
admin_token: test-token
log: {key_file: %q} # one log, one key
delivery: {poll_interval: 50ms, grace: 1s}
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  billing: {url: http://%s/hooks, sources: [stripe], timeout: 5s, max_attempts: 1}
alerts:
  - webhook: %s/alerts
`, pgtest.DSN(t), filepath.Join(t.TempDir(), "anyhook-log.key"), stripeSecret, addr, alerts.URL)
	opt := gateway.Options{IncidentInterval: 10 * time.Millisecond}
	a, ga := gatewaytest.Start(t, yaml, opt)
	b, gb := gatewaytest.Start(t, yaml, opt)
	const each = 6
	for i := range each {
		for j, base := range []string{a, b} {
			body := fmt.Appendf(nil, `{"id":"evt_two_%d_%d","object":"event","type":"invoice.paid","created":1,"data":{"object":{"id":"in_1"}}}`, j, i)
			if r := do(t, stripeRequest(t, base+"/webhooks/stripe", stripeSecret, body, time.Now())); r.Status != "accepted" {
				t.Fatalf("send: %+v", r)
			}
		}
	}
	for _, base := range []string{a, b} {
		testwait.Value(t, "one incident counting every attempt, listed by "+base, func() (string, error) {
			code, body := gatewaytest.Admin(t, "GET", base+"/api/incidents", "")
			var l struct{ Items []incidentView }
			if code != http.StatusOK || json.Unmarshal(body, &l) != nil {
				t.Fatalf("GET /api/incidents: %d %s", code, body)
			}
			if len(l.Items) != 1 || l.Items[0].Kind != "refused" || l.Items[0].Attempts != 2*each || l.Items[0].Events != 2*each {
				return "", fmt.Errorf("incidents %+v", l.Items)
			}
			return l.Items[0].ID, nil
		})
	}
	opened := alerts.Await(t, "the incident's alert", func(rs []sinktest.Request) bool { return len(rs) >= 1 })
	var first alertView
	json.Unmarshal(opened[0].Body, &first)
	// Stopping writes what each recorder holds and sends what is due.
	ga.Stop(t.Context())
	gb.Stop(t.Context())
	n := 0
	for _, r := range alerts.Requests() {
		var x alertView
		json.Unmarshal(r.Body, &x)
		if x.Kind == "incident_opened" {
			n++
		}
	}
	if first.Kind != "incident_opened" || n != 1 {
		t.Fatalf("alerts: first %+v, %d incident_opened; want one", first, n)
	}
}

// TestBreakerTripRecordedOnIncident: a destination with auto_pause that
// refuses connections opens a refused incident, trips its breaker after
// two failures, and the incident records the trip (the breaker's hook
// reaches the store through the wiring, after the failures that tripped
// it were written).
func TestBreakerTripRecordedOnIncident(t *testing.T) {
	t.Parallel()
	hold, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := hold.Addr().String()
	hold.Close()
	yaml := testTop + fmt.Sprintf(`sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  billing:
    url: http://%s/hooks
    sources: [stripe]
    timeout: 300ms
    max_attempts: 20
    backoff: {initial: 10ms, max: 20ms}
    auto_pause: {consecutive_failures: 2, probe_every: 1h}
`, stripeSecret, addr)
	// The recorder writes once an hour: only the breaker's own flush can
	// have made the incident by the time it trips.
	base, _ := gatewaytest.Start(t, yaml, gateway.Options{IncidentInterval: time.Hour})
	body := []byte(`{"id":"evt_trip","object":"event","type":"invoice.paid","created":1,"data":{"object":{"id":"in_1"}}}`)
	if a := do(t, stripeRequest(t, base+"/webhooks/stripe", stripeSecret, body, time.Now())); a.Status != "accepted" {
		t.Fatalf("send: %+v", a)
	}
	testwait.For(t, "the refused incident to record the breaker's trip", func() bool {
		code, b := gatewaytest.Admin(t, "GET", base+"/api/incidents", "")
		var l struct {
			Items []struct {
				Kind    string    `json:"kind"`
				Tripped time.Time `json:"breaker_tripped_at"`
			}
		}
		if code != http.StatusOK || json.Unmarshal(b, &l) != nil {
			t.Fatalf("GET /api/incidents: %d %s", code, b)
		}
		return len(l.Items) == 1 && l.Items[0].Kind == "refused" && !l.Items[0].Tripped.IsZero()
	})
}
