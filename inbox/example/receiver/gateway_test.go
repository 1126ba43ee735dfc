package main

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/store"
)

// The example receiver behind a real gateway: Stripe-signed events go in at
// the gateway, which verifies, records and delivers them with its own
// Standard Webhooks signature; duplicates from the provider, and a replay
// from the gateway, each reach the downstream APIs at most once.
func TestReceiverBehindGateway(t *testing.T) {
	h := start(t)
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:gw.db
delivery: {poll_interval: 50ms}
sources:
  stripe: {provider: stripe, secrets: [whsec_stripe_test]}
destinations:
  receiver:
    url: %s
    sources: [stripe]
    signing_secret: %s
    backoff: {initial: 20ms, max: 100ms}
`, h.url, secret)
	base, gw := gatewaytest.Start(t, yaml, gateway.Options{})

	post := func(body string) {
		t.Helper()
		pr := &provider.Request{Method: "POST", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(body)}
		if err := provider.Sign("stripe", "whsec_stripe_test", pr, time.Now()); err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("POST", base+"/webhooks/stripe", bytes.NewReader(pr.Body))
		req.Header = pr.Header
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("gateway answered %d", resp.StatusCode)
		}
	}
	receipt := `{"id":"evt_receipt","type":"invoice.paid","created":1700000000,"data":{"object":{"id":"in_1","customer_email":"a@example.com"}}}`
	capture := `{"id":"evt_capture","type":"payment_intent.amount_capturable_updated","created":1700000001,"data":{"object":{"id":"pi_1"}}}`
	for range 2 { // Stripe retries: the gateway absorbs the duplicate
		post(receipt)
		post(capture)
	}
	st := gw.Store()
	waitDelivered := func(want int) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			ds, _, err := st.ListDeliveries(t.Context(), store.DeliveryFilter{Status: anyhook.StatusDelivered})
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) >= want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d deliveries delivered, want %d", len(ds), want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitDelivered(2)
	// A person replays everything: the receiver sees the same
	// X-AnyHook-Delivery again and must not email or capture twice.
	evs, _, err := st.ListEvents(t.Context(), store.EventFilter{})
	if err != nil || len(evs) != 2 {
		t.Fatalf("events = %d, %v; want 2", len(evs), err)
	}
	for _, ev := range evs {
		if _, err := st.Replay(t.Context(), ev.ID, []string{"receiver"}); err != nil {
			t.Fatal(err)
		}
	}
	waitDelivered(4)
	if _, effects := h.email.counts(); effects != 1 {
		t.Errorf("receipt emails = %d, want 1", effects)
	}
	if _, effects := h.payments.counts(); effects != 1 {
		t.Errorf("captures = %d, want 1", effects)
	}
	var receipts int
	if err := h.db().QueryRow(`SELECT count(*) FROM receipts`).Scan(&receipts); err != nil || receipts != 1 {
		t.Errorf("receipt rows = %d, %v; want 1", receipts, err)
	}
}
