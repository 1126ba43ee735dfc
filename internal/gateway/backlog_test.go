package gateway_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// A pull destination whose deliveries wait longer than
// alert_backlog_after for a consumer raises one pull_backlog alert naming
// it (not one per check), and none while it is consumed.
func TestPullBacklogAlert(t *testing.T) {
	t.Parallel()
	alerts := sinktest.New(t)
	yaml := testTop + fmt.Sprintf(`sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  dev:
    type: pull
    sources: [stripe]
    alert_backlog_after: 1s
  idle:
    type: pull
    sources: [stripe]
    filter: 'type == "never.sent"'
    alert_backlog_after: 1s
alerts:
  - webhook: %s/alerts
alert_window: 1s
`, stripeSecret, alerts.URL)
	base, _ := gatewaytest.Start(t, yaml, gateway.Options{})
	body := []byte(`{"id":"evt_backlog","object":"event","type":"invoice.paid","created":1,"data":{"object":{"id":"in_1"}}}`)
	if a := do(t, stripeRequest(t, base+"/webhooks/stripe", stripeSecret, body, time.Now())); a.Status != "accepted" {
		t.Fatalf("send: %+v", a)
	}
	backlog := func() []map[string]any {
		var out []map[string]any
		for _, r := range alerts.Requests() {
			var a map[string]any
			if json.Unmarshal(r.Body, &a) == nil && a["kind"] == "pull_backlog" {
				out = append(out, a)
			}
		}
		return out
	}
	got := testwait.Value(t, "a pull_backlog alert", func() ([]map[string]any, error) {
		if b := backlog(); len(b) > 0 {
			return b, nil
		}
		return nil, fmt.Errorf("alerts so far: %d", len(alerts.Requests()))
	})
	if got[0]["destination"] != "dev" || !strings.Contains(got[0]["message"].(string), "waited") {
		t.Fatalf("the alert: %v", got[0])
	}
	time.Sleep(2 * time.Second) // more checks: still one alert (the next is due in an hour)
	for _, a := range backlog() {
		if a["destination"] != "dev" {
			t.Fatalf("an alert for %v, which has nothing waiting", a["destination"])
		}
	}
	if n := len(backlog()); n != 1 {
		t.Fatalf("%d pull_backlog alerts, want 1", n)
	}
}
