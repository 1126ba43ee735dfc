package gateway_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
)

// unpolledGateway starts a gateway whose dispatchers poll once an hour: a
// stripe source and one destination, dest, delivering to sk, with the
// destination's extra settings (a YAML line, or ""). What it delivers in a
// test, a wake made due.
func unpolledGateway(t *testing.T, sk *sinktest.Sink, dest, extra string) (string, *gateway.Gateway) {
	t.Helper()
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:anyhook.db
admin_token: test-token
delivery: {poll_interval: 1h}
sources:
  stripe:
    provider: stripe
    secrets: [%s]
destinations:
  %s:
    url: %s/%s
    sources: [stripe]
    %s
`, stripeSecret, dest, sk.URL, dest, extra)
	return gatewaytest.Start(t, yaml, gateway.Options{})
}

// TestOrderedDispatchWithoutPolling: a dispatcher whose claim came back
// short waits for a wake instead of claiming after every request (issue
// 15), but in order a short claim does not mean an empty queue: the
// object's later deliveries wait behind the one in flight and become due
// when its outcome is recorded. With the poll tick an hour away and every
// event ingested before the first is delivered, the recorded outcome alone
// must let the next one go.
func TestOrderedDispatchWithoutPolling(t *testing.T) {
	t.Parallel()
	sk := sinktest.New(t)
	base, g := unpolledGateway(t, sk, "ledger", "order: per_object")
	// Paused while the events arrive, so that all three wait in the queue
	// and the first claim after the unpause finds the object's head only.
	if err := g.Store().SetPaused(t.Context(), "ledger", true); err != nil {
		t.Fatal(err)
	}
	const n = 3
	for v := 1; v <= n; v++ {
		body := fmt.Appendf(nil, `{"id":"evt_%d","object":"event","type":"invoice.updated","created":%d,"data":{"object":{"id":"in_a"}}}`, v, v)
		if a := do(t, stripeRequest(t, base+"/webhooks/stripe", stripeSecret, body, time.Now())); a.Code != 200 {
			t.Fatalf("event %d: %+v", v, a)
		}
	}
	if err := g.Store().SetPaused(t.Context(), "ledger", false); err != nil {
		t.Fatal(err)
	}
	// One more event of another object wakes the dispatcher (an unpause
	// does not), as new deliveries do.
	body := []byte(`{"id":"evt_other","object":"event","type":"invoice.updated","created":1,"data":{"object":{"id":"in_b"}}}`)
	if a := do(t, stripeRequest(t, base+"/webhooks/stripe", stripeSecret, body, time.Now())); a.Code != 200 {
		t.Fatalf("wake event: %+v", a)
	}
	sk.Wait(t, n+1)
}

// TestAdminActionsWakeTheDispatcher: a resume and a replay through the
// admin API (the dashboard's buttons call it) make deliveries due, and the
// dispatcher claims them at once, not at its next poll (an hour away
// here, so without the wake neither would arrive).
func TestAdminActionsWakeTheDispatcher(t *testing.T) {
	t.Parallel()
	sk := sinktest.New(t)
	base, _ := unpolledGateway(t, sk, "billing", "")
	if code, b := gatewaytest.Admin(t, "POST", base+"/api/destinations/billing/pause", ""); code != 200 {
		t.Fatalf("pause: %d %s", code, b)
	}
	body := []byte(`{"id":"evt_wake","object":"event","type":"invoice.paid","created":1,"data":{"object":{"id":"in_w"}}}`)
	a := do(t, stripeRequest(t, base+"/webhooks/stripe", stripeSecret, body, time.Now()))
	if a.Code != 200 {
		t.Fatalf("ingest: %+v", a)
	}
	if code, b := gatewaytest.Admin(t, "POST", base+"/api/destinations/billing/resume", ""); code != 200 {
		t.Fatalf("resume: %d %s", code, b)
	}
	sk.Wait(t, 1)
	if code, b := gatewaytest.Admin(t, "POST", base+"/api/events/"+a.ID+"/replay", `{"reason":"test"}`); code != 200 && code != 201 && code != 202 {
		t.Fatalf("replay: %d %s", code, b)
	}
	sk.Wait(t, 2)
}
