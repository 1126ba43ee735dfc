package gateway_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
)

// A dead delivery's alert names what a person searches for: the source,
// the provider's event id, and the event's page in the dashboard.
func TestDeadAlertNamesSourceProviderIDAndLink(t *testing.T) {
	t.Parallel()
	alerts := sinktest.New(t)
	e := setup(t, sinktest.New(t, 500), "    max_attempts: 1",
		"dashboard_url: https://anyhook.example.com/ops/", "alert_delivery_dead: true", "alerts:\n  - webhook: "+alerts.URL+"/alerts")
	a := e.sendStripe(t, "evt_alert_link")
	d := e.waitStatus(t, a.ID, anyhook.StatusDead)
	var msg map[string]any
	err := json.Unmarshal(deadAlert(t, alerts), &msg)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"kind": "delivery_dead", "destination": "billing", "source": "stripe", "event_id": a.ID,
		"provider_event_id": "evt_alert_link", "delivery_id": d.ID,
		"url": "https://anyhook.example.com/ops/events/" + a.ID,
	}
	for k, v := range want {
		if msg[k] != v {
			t.Errorf("alert %s = %v, want %v", k, msg[k], v)
		}
	}
}

// A dead delivery's alert says how many times the destination's handler
// may have run, apart from the requests that were never sent.
func TestDeadAlertSaysHowOftenTheHandlerMayHaveRun(t *testing.T) {
	t.Parallel()
	alerts := sinktest.New(t)
	e := setup(t, sinktest.New(t, 500), "    max_attempts: 1", "alert_delivery_dead: true", "alerts:\n  - webhook: "+alerts.URL+"/alerts")
	a := e.sendStripe(t, "evt_alert_outcome")
	e.waitStatus(t, a.ID, anyhook.StatusDead)
	var msg struct{ Message string }
	if err := json.Unmarshal(deadAlert(t, alerts), &msg); err != nil {
		t.Fatal(err)
	}
	if want := "; the handler may have run 1 time (1 answered)"; !strings.Contains(msg.Message, want) {
		t.Fatalf("alert message %q, want it to say %q", msg.Message, want)
	}
}

// A dead delivery of a destination with order: per_object says that the
// next delivery of its object is released.
func TestDeadAlertSaysOrderReleased(t *testing.T) {
	t.Parallel()
	alerts := sinktest.New(t)
	e := setup(t, sinktest.New(t, 500), "    max_attempts: 1\n    order: per_object", "alert_delivery_dead: true", "alerts:\n  - webhook: "+alerts.URL+"/alerts")
	a := e.sendStripe(t, "evt_alert_order") // about pi_1
	e.waitStatus(t, a.ID, anyhook.StatusDead)
	var msg struct{ Message string }
	err := json.Unmarshal(deadAlert(t, alerts), &msg)
	if err != nil {
		t.Fatal(err)
	}
	if want := "; the next delivery of object pi_1 (source stripe) is released (order: per_object)"; !strings.HasSuffix(msg.Message, want) {
		t.Fatalf("alert message %q, want it to end %q", msg.Message, want)
	}
}

// An alert's link is for people, and goes to the alert channels: a user name
// and password in dashboard_url (a proxy's basic auth) stay out of it.
func TestAlertLinkHasNoCredentials(t *testing.T) {
	t.Parallel()
	alerts := sinktest.New(t)
	e := setup(t, sinktest.New(t, 500), "    max_attempts: 1",
		"dashboard_url: https://ops:SECRET-PW@anyhook.example.com/ops/", "alert_delivery_dead: true", "alerts:\n  - webhook: "+alerts.URL+"/alerts")
	a := e.sendStripe(t, "evt_alert_creds")
	e.waitStatus(t, a.ID, anyhook.StatusDead)
	body := string(deadAlert(t, alerts))
	if strings.Contains(body, "SECRET-PW") || strings.Contains(body, "ops:") ||
		!strings.Contains(body, `"url":"https://anyhook.example.com/ops/events/`+a.ID+`"`) {
		t.Errorf("alert: %s", body)
	}
}

// deadAlert waits for the first delivery_dead alert the channel got (its
// incident's alerts come too) and returns its body.
func deadAlert(t *testing.T, alerts *sinktest.Sink) []byte {
	t.Helper()
	var body []byte
	alerts.Await(t, "a delivery_dead alert", func(rs []sinktest.Request) bool {
		for _, r := range rs {
			if strings.Contains(string(r.Body), `"kind":"delivery_dead"`) {
				body = r.Body
				return true
			}
		}
		return false
	})
	return body
}
