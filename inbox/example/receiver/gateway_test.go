package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/inbox"
	"github.com/anyhook/anyhook/inbox/inboxsql"
	"github.com/anyhook/anyhook/inbox/inboxtest"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// The example receiver behind a real gateway: Stripe-signed events go in at
// the gateway, which verifies, records and delivers them with its own
// Standard Webhooks signature; duplicates from the provider, and a replay
// from the gateway, each reach the downstream APIs at most once.
func TestReceiverBehindGateway(t *testing.T) {
	h := start(t)
	base, st := gatewayFor(t, h, 8) // 8: the default
	receipt := `{"id":"evt_receipt","type":"invoice.paid","created":1700000000,"data":{"object":{"id":"in_1","customer_email":"a@example.com"}}}`
	capture := `{"id":"evt_capture","type":"payment_intent.amount_capturable_updated","created":1700000001,"data":{"object":{"id":"pi_1"}}}`
	for range 2 { // Stripe retries: the gateway absorbs the duplicate
		postStripe(t, base, receipt)
		postStripe(t, base, capture)
	}
	waitFor(t, st, anyhook.StatusDelivered, 2)
	// A person replays everything: the receiver sees the same
	// X-AnyHook-Delivery again and must not email or capture twice.
	evs, _, err := st.ListEvents(t.Context(), store.EventFilter{})
	if err != nil || len(evs) != 2 {
		t.Fatalf("events = %d, %v; want 2", len(evs), err)
	}
	for _, ev := range evs {
		if _, err := st.Replay(t.Context(), ev.ID, []string{"receiver"}, store.Actor{Name: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, st, anyhook.StatusDelivered, 4)
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

// gatewayFor starts a real gateway that delivers the stripe source to h,
// giving up after maxAttempts.
func gatewayFor(t *testing.T, h *harness, maxAttempts int) (string, store.Store) {
	yaml := fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:gw.db
delivery: {poll_interval: 20ms}
sources:
  stripe: {provider: stripe, secrets: [whsec_stripe_test]}
destinations:
  receiver:
    url: %s
    sources: [stripe]
    signing_secret: %s
    max_attempts: %d
    backoff: {initial: 20ms, max: 100ms}
`, h.url, secret, maxAttempts)
	base, gw := gatewaytest.Start(t, yaml, gateway.Options{})
	return base, gw.Store()
}

// postStripe sends body to the gateway as Stripe would.
func postStripe(t *testing.T, base, body string) {
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

// waitFor polls the gateway's store until want deliveries have status.
func waitFor(t *testing.T, st store.Store, status anyhook.DeliveryStatus, want int) []anyhook.Delivery {
	t.Helper()
	return testwait.Value(t, fmt.Sprintf("%d deliveries %s", want, status), func() ([]anyhook.Delivery, error) {
		ds, _, err := st.ListDeliveries(t.Context(), store.DeliveryFilter{Status: status})
		if err != nil {
			t.Fatal(err)
		}
		if len(ds) < want {
			return ds, fmt.Errorf("%d deliveries %s", len(ds), status)
		}
		return ds, nil
	})
}

// stale collects the receiver's stale-claim reports.
func staleReports(m *Main) <-chan inbox.StaleClaim {
	ch := make(chan inbox.StaleClaim, 10)
	m.OnStale = func(c inbox.StaleClaim) { ch <- c }
	m.Config.SweepInterval = 20 * time.Millisecond
	return ch
}

// The downstream APIs fail in a way that leaves the effects uncertain, and
// the real gateway gives up (max_attempts 3: every answer was 503, so the
// deliveries are dead, shown and alerted on the gateway's side). No
// redelivery will come. The receiver's own sweeper surfaces both claims:
// the capture (Hold) is held for a person, the receipt (Reclaim) released.
// The person checks the payments API (not captured), chooses Rerun and
// replays both events from the gateway: each effect happens once.
func TestReceiverGatewayGaveUp(t *testing.T) {
	var reports <-chan inbox.StaleClaim
	h := startWith(t, func(m *Main) { reports = staleReports(m) })
	base, st := gatewayFor(t, h, 3)
	h.payments.fail(http.StatusBadGateway)
	h.email.fail(http.StatusBadGateway)
	receipt := `{"id":"evt_receipt","type":"invoice.paid","created":1700000000,"data":{"object":{"id":"in_1","customer_email":"a@example.com"}}}`
	capture := `{"id":"evt_capture","type":"payment_intent.amount_capturable_updated","created":1700000001,"data":{"object":{"id":"pi_1"}}}`
	postStripe(t, base, receipt)
	postStripe(t, base, capture)
	dead := waitFor(t, st, anyhook.StatusDead, 2)
	for _, d := range dead {
		if d.AttemptCount != 3 {
			t.Fatalf("dead delivery %s after %d attempts; want 3", d.ID, d.AttemptCount)
		}
	}
	db := h.db()
	ctx := context.Background()
	ib, err := inbox.New(inboxsql.New(db, inboxsql.SQLite), inbox.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.query(`SELECT group_concat(status) FROM (SELECT status FROM inbox_events ORDER BY handler)`); got != "claimed,claimed" {
		t.Fatalf("receiver rows %q after the gateway gave up; want both claimed", got)
	}
	// The stale durations pass (5m for the capture, 2m for the receipt).
	if n, err := inboxtest.AgeClaims(ctx, ib.Driver(), 10*time.Minute); n != 2 || err != nil {
		t.Fatalf("AgeClaims = %d, %v", n, err)
	}
	actions := map[string]inbox.StaleAction{}
	for range 2 {
		c := <-reports
		actions[c.Handler] = c.Action
	}
	if actions["capture"] != inbox.StaleHeld || actions["receipt"] != inbox.StaleReleased {
		t.Fatalf("sweeper reported %v; want capture held, receipt released", actions)
	}
	held, err := ib.Held(ctx)
	if err != nil || len(held) != 1 || held[0].Handler != "capture" {
		t.Fatalf("Held() = %+v, %v", held, err)
	}
	released, err := ib.Released(ctx)
	if err != nil || len(released) != 1 || released[0].Handler != "receipt" {
		t.Fatalf("Released() = %+v, %v", released, err)
	}
	// The person: the payments API shows no capture, the APIs are back.
	h.payments.fail(0)
	h.email.fail(0)
	if err := ib.Resolve(ctx, held[0].Source, held[0].Handler, held[0].EventID, inbox.Rerun); err != nil {
		t.Fatal(err)
	}
	for _, c := range []inbox.HeldClaim{held[0], released[0]} { // anyhook replay --event <id>
		if _, err := st.Replay(t.Context(), c.EventID, []string{"receiver"}, store.Actor{Name: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, st, anyhook.StatusDelivered, 2)
	if _, effects := h.payments.counts(); effects != 1 {
		t.Errorf("captures = %d, want 1", effects)
	}
	if _, effects := h.email.counts(); effects != 1 {
		t.Errorf("receipt emails = %d, want 1", effects)
	}
	if got := h.query(`SELECT (SELECT count(*) FROM captures) || ',' || (SELECT count(*) FROM receipts)`); got != "1,1" {
		t.Errorf("captures,receipts rows = %s; want 1,1", got)
	}
}

// While the gateway still retries (its attempts outlast the stale
// durations), the receiver's answers keep the delivery pending and visible
// rather than dead: 503 with a Retry-After until the claim is stale, then
// the sweep applies the policy and the retries that follow get the result.
// The receipt (Reclaim) is re-run by the next retry on its own; the capture
// (Hold) is delivered once a person marks it done.
func TestReceiverGatewayKeepsRetrying(t *testing.T) {
	var reports <-chan inbox.StaleClaim
	h := startWith(t, func(m *Main) { reports = staleReports(m) })
	base, st := gatewayFor(t, h, 1000)
	h.payments.fail(http.StatusBadGateway)
	h.email.fail(http.StatusBadGateway)
	postStripe(t, base, `{"id":"evt_receipt","type":"invoice.paid","created":1700000000,"data":{"object":{"id":"in_1","customer_email":"a@example.com"}}}`)
	postStripe(t, base, `{"id":"evt_capture","type":"payment_intent.amount_capturable_updated","created":1700000001,"data":{"object":{"id":"pi_1"}}}`)
	// Both effects ran once and failed uncertainly.
	testwait.For(t, "both effects to run", func() bool {
		p, _ := h.payments.counts()
		e, _ := h.email.counts()
		return p >= 1 && e >= 1
	})
	h.payments.fail(0)
	h.email.fail(0)
	db := h.db()
	ctx := context.Background()
	ib, err := inbox.New(inboxsql.New(db, inboxsql.SQLite), inbox.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if n, err := inboxtest.AgeClaims(ctx, ib.Driver(), 10*time.Minute); n != 2 || err != nil {
		t.Fatalf("AgeClaims = %d, %v", n, err)
	}
	// The receipt: released by the sweep (or reclaimed by a retry that got
	// there first), then re-run by a retry; delivered, one email.
	for (<-reports).Handler != "capture" {
	}
	waitFor(t, st, anyhook.StatusDelivered, 1)
	if _, effects := h.email.counts(); effects != 1 {
		t.Fatalf("receipt emails = %d, want 1", effects)
	}
	ds, _, err := st.ListDeliveries(t.Context(), store.DeliveryFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		if d.Status != anyhook.StatusDelivered && !d.Status.Waiting() && d.Status != anyhook.StatusDelivering {
			t.Fatalf("delivery %s is %s; want the held capture still retried (retrying)", d.ID, d.Status)
		}
	}
	// The capture is held: retries get 503 and the delivery stays pending
	// (not dead) until a person acts. They see it was captured.
	held, err := ib.Held(ctx)
	if err != nil || len(held) != 1 {
		t.Fatalf("Held() = %+v, %v", held, err)
	}
	if err := ib.Resolve(ctx, held[0].Source, held[0].Handler, held[0].EventID, inbox.MarkDone); err != nil {
		t.Fatal(err)
	}
	waitFor(t, st, anyhook.StatusDelivered, 2)
	if calls, _ := h.payments.counts(); calls != 1 {
		t.Fatalf("payments API called %d times; want 1 (never re-run under Hold)", calls)
	}
}
