package gateway_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
)

// TestOneClock: the gateway hands Options.Now to its parts. On a clock
// years from the real one, a Stripe request signed at that clock's time is
// inside the tolerance (ingest reads it), the event is received then, and
// the delivery's signature is stamped then (delivery reads it).
func TestOneClock(t *testing.T) {
	t.Parallel()
	at := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	sk := sinktest.New(t)
	yaml := testTop + fmt.Sprintf(`sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  billing: {url: %s/hooks, sources: [stripe], signing_secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw}
`, stripeSecret, sk.URL)
	base, g := gatewaytest.Start(t, yaml, gateway.Options{Now: func() time.Time { return at }})
	body := []byte(`{"id":"evt_clock","object":"event","type":"payment_intent.succeeded","created":981173106,"data":{"object":{"id":"pi_1"}}}`)
	a := do(t, stripeRequest(t, base+"/webhooks/stripe", stripeSecret, body, at))
	if a.Code != 202 && a.Code != 200 {
		t.Fatalf("signed at the gateway's clock: %+v, want accepted", a)
	}
	ev, err := g.Store().Event(t.Context(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !ev.ReceivedAt.Equal(at) {
		t.Errorf("received at %s, want %s (the gateway's clock)", ev.ReceivedAt, at)
	}
	got := sk.Wait(t, 1)
	if ts, want := got[0].Header.Get("Webhook-Timestamp"), strconv.FormatInt(at.Unix(), 10); ts != want {
		t.Errorf("Webhook-Timestamp = %s, want %s (the gateway's clock)", ts, want)
	}
}
