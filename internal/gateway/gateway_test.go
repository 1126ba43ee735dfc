package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

const stripeSecret = "whsec_test_secret"

type env struct {
	url   string
	gw    *gateway.Gateway
	store store.Store
	sink  *sinktest.Sink
	// signals, when set, reports each delivery attempt the gateway
	// recorded: waits wake on it rather than poll.
	signals *signals
}

// testTop is the top of the tests' configs: a new SQLite database, the
// admin token test-token, and deliveries polled often with a short grace.
const testTop = `
listen: 127.0.0.1:0
database: sqlite:anyhook.db
admin_token: test-token
delivery: {poll_interval: 50ms, grace: 1s}
`

// setup runs a gateway on 127.0.0.1:0 with a stripe source delivering to
// the sink. extra is appended to the destination's settings, top to the
// file.
func setup(t *testing.T, sk *sinktest.Sink, extra string, top ...string) *env {
	t.Helper()
	yaml := testTop + fmt.Sprintf(`sources:
  stripe:
    provider: stripe
    secrets: [%s]
    max_body: 64KiB
destinations:
  billing:
    url: %s/hooks
    sources: [stripe]
    timeout: 5s
    backoff: {initial: 10ms, max: 40ms}
%s
%s`, stripeSecret, sk.URL, extra, strings.Join(top, "\n"))
	sig := newSignals()
	base, g := gatewaytest.Start(t, yaml, gateway.Options{Observer: sig})
	return &env{url: base, gw: g, store: g.Store(), sink: sk, signals: sig}
}

// stripeRequest signs body as Stripe would at now with secret.
func stripeRequest(t *testing.T, url, secret string, body []byte, now time.Time) *http.Request {
	t.Helper()
	pr := &provider.Request{Method: "POST", URL: url, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
	if err := provider.Sign("stripe", secret, pr, now); err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest("POST", url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = pr.Header
	return req
}

type answer struct {
	Code   int
	Status string `json:"status"`
	ID     string `json:"id"`
	Error  string `json:"error"`
}

func do(t *testing.T, req *http.Request) answer {
	t.Helper()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	json.NewDecoder(resp.Body).Decode(&a)
	a.Code = resp.StatusCode
	return a
}

func (e *env) sendStripe(t *testing.T, id string) answer {
	t.Helper()
	body := []byte(`{"id":"` + id + `","object":"event","type":"payment_intent.succeeded","created":1700000000,"data":{"object":{"id":"pi_1"}}}`)
	return do(t, stripeRequest(t, e.url+"/webhooks/stripe", stripeSecret, body, time.Now()))
}

// waitStatus waits until the event's only delivery has status want: it
// looks again at each attempt the gateway reports (e.signals), or polls
// without them.
func (e *env) waitStatus(t *testing.T, eventID string, want anyhook.DeliveryStatus) anyhook.Delivery {
	t.Helper()
	what := fmt.Sprintf("event %s's one delivery %s", eventID, want)
	var got anyhook.Delivery
	check := func() error {
		ev, err := e.store.Event(t.Context(), eventID)
		if err != nil {
			t.Fatal(err)
		}
		if len(ev.Deliveries) == 1 && ev.Deliveries[0].Status == want {
			got = ev.Deliveries[0]
			return nil
		}
		return fmt.Errorf("deliveries = %+v", ev.Deliveries)
	}
	if e.signals != nil {
		e.signals.wait(t, what, check)
		return got
	}
	testwait.Value(t, what, func() (struct{}, error) { return struct{}{}, check() })
	return got
}

func TestSameEventTwice(t *testing.T) {
	t.Parallel()
	e := setup(t, sinktest.New(t), "")
	first := e.sendStripe(t, "evt_twice")
	second := e.sendStripe(t, "evt_twice")
	if first.Code != 200 || first.Status != "accepted" || first.ID == "" {
		t.Fatalf("first = %+v, want 200 accepted", first)
	}
	if second.Code != 200 || second.Status != "duplicate" || second.ID != first.ID {
		t.Fatalf("second = %+v, want 200 duplicate of %s", second, first.ID)
	}
	e.waitStatus(t, first.ID, anyhook.StatusDelivered)
	evs, _, _ := e.store.ListEvents(t.Context(), store.EventFilter{})
	if len(evs) != 1 {
		t.Fatalf("%d events, want 1", len(evs))
	}
	if n := len(e.sink.Requests()); n != 1 {
		t.Fatalf("sink got %d requests, want 1", n)
	}
}

func TestHundredIdenticalAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t, sinktest.New(t), "")
	body := []byte(`{"id":"evt_storm","object":"event","created":1700000000}`)
	proto := stripeRequest(t, e.url+"/webhooks/stripe", stripeSecret, body, time.Now())
	const n = 100
	answers := make([]answer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			req, _ := http.NewRequest("POST", proto.URL.String(), bytes.NewReader(body))
			req.Header = proto.Header.Clone()
			<-start
			answers[i] = do(t, req)
		})
	}
	close(start)
	wg.Wait()
	accepted := 0
	for _, a := range answers {
		if a.Code != 200 || a.ID != answers[0].ID {
			t.Fatalf("answer = %+v, want 200 with id %s", a, answers[0].ID)
		}
		if a.Status == "accepted" {
			accepted++
		}
	}
	if accepted != 1 {
		t.Fatalf("%d answers said accepted, want exactly 1", accepted)
	}
	e.waitStatus(t, answers[0].ID, anyhook.StatusDelivered)
	ev, _ := e.store.Event(t.Context(), answers[0].ID)
	if ev.Duplicates != n-1 {
		t.Fatalf("duplicates = %d, want %d", ev.Duplicates, n-1)
	}
	evs, _, _ := e.store.ListEvents(t.Context(), store.EventFilter{})
	if len(evs) != 1 || len(ev.Deliveries) != 1 {
		t.Fatalf("%d events, %d deliveries; want 1 and 1", len(evs), len(ev.Deliveries))
	}
}

func TestForgedRequestDoesNotPoisonDedup(t *testing.T) {
	t.Parallel()
	e := setup(t, sinktest.New(t), "")
	body := []byte(`{"id":"evt_target","object":"event"}`)
	forged := do(t, stripeRequest(t, e.url+"/webhooks/stripe", "whsec_attacker", body, time.Now()))
	if forged.Code != 400 || forged.Error == "" {
		t.Fatalf("forged = %+v, want 400 with a reason", forged)
	}
	if strings.Contains(forged.Error, stripeSecret) {
		t.Fatalf("error leaks the secret: %q", forged.Error)
	}
	if evs, _, _ := e.store.ListEvents(t.Context(), store.EventFilter{}); len(evs) != 0 {
		t.Fatalf("forged request recorded %d events", len(evs))
	}
	genuine := e.sendStripe(t, "evt_target")
	if genuine.Code != 200 || genuine.Status != "accepted" {
		t.Fatalf("genuine after forged = %+v, want accepted", genuine)
	}
	e.waitStatus(t, genuine.ID, anyhook.StatusDelivered)
}

func TestRetriedUntilDelivered(t *testing.T) {
	t.Parallel()
	e := setup(t, sinktest.New(t, 500, 500, 200), "")
	a := e.sendStripe(t, "evt_retry")
	d := e.waitStatus(t, a.ID, anyhook.StatusDelivered)
	got := e.sink.Requests()
	if len(got) != 3 {
		t.Fatalf("sink got %d requests, want 3", len(got))
	}
	for i, r := range got {
		if r.Header.Get("X-AnyHook-Delivery") != a.ID {
			t.Errorf("request %d X-AnyHook-Delivery = %q, want %s", i+1, r.Header.Get("X-AnyHook-Delivery"), a.ID)
		}
		if r.Header.Get("X-AnyHook-Attempt") != fmt.Sprint(i+1) {
			t.Errorf("request %d X-AnyHook-Attempt = %q", i+1, r.Header.Get("X-AnyHook-Attempt"))
		}
		if r.Header.Get("X-AnyHook-Replay") != "false" || r.Header.Get("X-AnyHook-Source") != "stripe" || r.Header.Get("X-AnyHook-Event-Id") != "evt_retry" {
			t.Errorf("request %d headers = %v", i+1, r.Header)
		}
		if r.Header.Get("Stripe-Signature") == "" {
			t.Errorf("request %d lost the provider's signature header", i+1)
		}
	}
	ev, _ := e.store.Event(t.Context(), a.ID)
	atts := ev.Deliveries[0].Attempts
	if d.AttemptCount != 3 || len(atts) != 3 {
		t.Fatalf("attempt_count = %d, attempts = %+v; want 3", d.AttemptCount, atts)
	}
	for i, at := range atts {
		want := []int{500, 500, 200}[i]
		if at.Number != i+1 || at.StatusCode != want || string(at.ResponseBody) != fmt.Sprintf("answer %d", want) {
			t.Errorf("attempt %d = %+v", i+1, at)
		}
		if (want == 500) != (at.Error != "") {
			t.Errorf("attempt %d error = %q", i+1, at.Error)
		}
	}
}

func TestIngestRejections(t *testing.T) {
	t.Parallel()
	e := setup(t, sinktest.New(t), "")
	body := []byte(`{"id":"evt_x","object":"event"}`)

	unknown := do(t, stripeRequest(t, e.url+"/webhooks/nope", stripeSecret, body, time.Now()))
	if unknown.Code != 404 {
		t.Errorf("unknown source = %+v, want 404", unknown)
	}
	big := []byte(`{"id":"evt_big","pad":"` + strings.Repeat("x", 70<<10) + `"}`)
	if a := do(t, stripeRequest(t, e.url+"/webhooks/stripe", stripeSecret, big, time.Now())); a.Code != 413 {
		t.Errorf("oversize body = %+v, want 413", a)
	}
	old := do(t, stripeRequest(t, e.url+"/webhooks/stripe", stripeSecret, body, time.Now().Add(-10*time.Minute)))
	if old.Code != 400 || !strings.Contains(old.Error, "tolerance") {
		t.Errorf("stale timestamp = %+v, want 400 naming the tolerance", old)
	}
	future := do(t, stripeRequest(t, e.url+"/webhooks/stripe", stripeSecret, body, time.Now().Add(10*time.Minute)))
	if future.Code != 400 {
		t.Errorf("future timestamp = %+v, want 400", future)
	}
	unsigned, _ := http.NewRequest("POST", e.url+"/webhooks/stripe", bytes.NewReader(body))
	if a := do(t, unsigned); a.Code != 400 || !strings.Contains(a.Error, "Stripe-Signature") {
		t.Errorf("unsigned = %+v, want 400 naming the header", a)
	}
	if evs, _, _ := e.store.ListEvents(t.Context(), store.EventFilter{}); len(evs) != 0 {
		t.Fatalf("rejected requests recorded %d events", len(evs))
	}
}

func TestStoreDownAnswers503(t *testing.T) {
	t.Parallel()
	e := setup(t, sinktest.New(t), "")
	e.store.Close()
	a := e.sendStripe(t, "evt_down")
	if a.Code != 503 {
		t.Fatalf("with the store closed: %+v, want 503", a)
	}
	resp, err := http.Get(e.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 {
		t.Fatalf("/readyz = %d with the store closed, want 503", resp.StatusCode)
	}
}

func TestDeadAfterMaxAttemptsAlertsOnce(t *testing.T) {
	t.Parallel()
	alerts := sinktest.New(t)
	e := setup(t, sinktest.New(t, 500, 500, 500, 500, 500), "    max_attempts: 3",
		"alert_delivery_dead: true", "alerts:\n  - webhook: "+alerts.URL+"/alerts")
	a := e.sendStripe(t, "evt_dead")
	d := e.waitStatus(t, a.ID, anyhook.StatusDead)
	if d.AttemptCount != 3 || len(e.sink.Requests()) != 3 {
		t.Fatalf("dead after %d attempts, sink saw %d; want 3 and 3", d.AttemptCount, len(e.sink.Requests()))
	}
	var msg map[string]any
	err := json.Unmarshal(deadAlert(t, alerts), &msg)
	if err != nil || msg["kind"] != "delivery_dead" || msg["delivery_id"] != d.ID || msg["destination"] != "billing" {
		t.Fatalf("alert = %v (%v), want delivery_dead for %s", msg, err, d.ID)
	}
	if m, _ := msg["message"].(string); !strings.HasSuffix(m, "is dead after 3 attempts; last error: HTTP 500; the handler may have run 3 times (3 answered)") {
		t.Errorf("alert message %q; want why it died (its last error) and how often its handler may have run", m)
	}
	e.gw.Stop(context.Background()) // flushes pending alerts
	dead := 0
	for _, r := range alerts.Requests() {
		if strings.Contains(string(r.Body), `"kind":"delivery_dead"`) {
			dead++
		}
	}
	if dead != 1 {
		t.Fatalf("%d delivery_dead alerts, want one", dead)
	}
}

func TestOutboundSignatureVerifiesWithStandardWebhooks(t *testing.T) {
	t.Parallel()
	const signing = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	e := setup(t, sinktest.New(t), "    signing_secret: "+signing)
	req := stripeRequest(t, e.url+"/webhooks/stripe", stripeSecret, []byte(`{"id":"evt_signed","object":"event"}`), time.Now())
	req.Header.Set("Authorization", "Bearer gateway-credential")
	req.Header.Set("Cookie", "session=1")
	req.Header.Set("Webhook-Signature", "v1,forged")
	req.Header.Set("X-AnyHook-Replay", "true") // a sender cannot speak for the gateway
	a := do(t, req)
	r := e.sink.Wait(t, 1)[0]
	body := r.Body
	wh, err := standardwebhooks.NewWebhook(signing)
	if err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(body, r.Header); err != nil {
		t.Fatalf("Standard Webhooks library rejects our signature: %v (headers %v)", err, r.Header)
	}
	if r.Header.Get("Webhook-Id") != a.ID || r.Header.Get("X-AnyHook-Delivery") != a.ID {
		t.Fatalf("webhook-id = %q, X-AnyHook-Delivery = %q, want %s", r.Header.Get("Webhook-Id"), r.Header.Get("X-AnyHook-Delivery"), a.ID)
	}
	if r.Header.Get("Authorization") != "" || r.Header.Get("Cookie") != "" {
		t.Fatalf("credentials meant for the gateway were forwarded: %v", r.Header)
	}
	if r.Header.Get("X-AnyHook-Replay") != "false" || r.Header.Get("Stripe-Signature") == "" || r.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("headers = %v", r.Header)
	}
	if string(body) != `{"id":"evt_signed","object":"event"}` {
		t.Fatalf("body = %q", body)
	}
}
