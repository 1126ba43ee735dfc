package gateway_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/brokertest"
	"github.com/anyhook/anyhook/internal/testkit/faultnet"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/syncio"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// A NATS destination behaves as an HTTP one: a message carries the
// X-AnyHook-* headers, the webhook-* signature and the body; a broker
// that is down is a failed attempt (incident kind broker_unreachable)
// retried until it is back; a replay is a new delivery whose message id
// the stream does not swallow.
func TestNATSDestination(t *testing.T) {
	t.Parallel()
	s := brokertest.NATSStream(t, 0)
	proxy, err := faultnet.NewProxy(strings.TrimPrefix(s.URL, "nats://"))
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	base, _ := gatewaytest.Start(t, testTop+fmt.Sprintf(`sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  billing:
    type: nats
    nats: {url: "nats://%s", subject: %s, stream: %s}
    sources: [stripe]
    signing_secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
    timeout: 1s
    max_attempts: 100
    backoff: {initial: 20ms, max: 100ms}
`, stripeSecret, proxy.Addr(), s.Subject, s.Name), gateway.Options{})
	send := func(id string) string {
		t.Helper()
		body := fmt.Appendf(nil, `{"id":"%s","object":"event","type":"invoice.paid","created":1}`, id)
		a := do(t, stripeRequest(t, base+"/webhooks/stripe", stripeSecret, body, time.Now()))
		if a.Status != "accepted" {
			t.Fatalf("send: %+v", a)
		}
		return a.ID
	}
	first := send("evt_nats_1")
	testwait.For(t, "the first message", func() bool { return len(s.Messages(t)) == 1 })
	m := s.Messages(t)[0]
	for k, want := range map[string]string{"X-Anyhook-Delivery": first, "X-Anyhook-Attempt": "1", "X-Anyhook-Replay": "false", "X-Anyhook-Source": "stripe",
		"X-Anyhook-Event-Id": "evt_nats_1", "Content-Type": "application/json", "Webhook-Id": first} {
		if got := m.Header.Get(k); got != want {
			t.Errorf("header %s = %q, want %q", k, got, want)
		}
	}
	if m.Header.Get("Webhook-Signature") == "" || m.Header.Get("Nats-Msg-Id") != m.Header.Get("X-Anyhook-Delivery-Id") {
		t.Errorf("headers %v: want a webhook-signature and Nats-Msg-Id = X-AnyHook-Delivery-Id", m.Header)
	}

	proxy.Cut()
	second := send("evt_nats_2")
	testwait.For(t, "a broker_unreachable incident", func() bool {
		code, b := gatewaytest.Admin(t, "GET", base+"/api/incidents", "")
		var l struct{ Items []incidentView }
		if code != http.StatusOK || json.Unmarshal(b, &l) != nil {
			t.Fatalf("GET /api/incidents: %d %s", code, b)
		}
		return len(l.Items) == 1 && l.Items[0].Kind == "broker_unreachable" && l.Items[0].Attempts >= 2
	})
	proxy.Restore()
	testwait.For(t, "the second event delivered once the broker is back", func() bool { return len(s.Messages(t)) == 2 })
	if got := s.Messages(t)[1].Header.Get("X-Anyhook-Delivery"); got != second {
		t.Errorf("second message is of %s, want %s", got, second)
	}

	if code, b := gatewaytest.Admin(t, "POST", base+"/api/events/"+first+"/replay", `{"reason":"test"}`); code != 202 {
		t.Fatalf("replay: %d %s", code, b)
	}
	testwait.For(t, "the replay stored as a message of its own", func() bool { return len(s.Messages(t)) == 3 })
	r := s.Messages(t)[2]
	if r.Header.Get("X-Anyhook-Delivery") != first || r.Header.Get("X-Anyhook-Replay") != "true" || r.Header.Get("Nats-Msg-Id") == m.Header.Get("Nats-Msg-Id") {
		t.Errorf("replay headers %v: want event %s, marked, a new message id", r.Header, first)
	}
}

// A stream whose duplicate window is shorter than the lease plus a margin
// stops the start with a config error naming the key and its line.
func TestNATSStreamWindowCheckedAtStart(t *testing.T) {
	t.Parallel()
	s := brokertest.NATSStream(t, 5*time.Second)
	yaml := testTop + fmt.Sprintf(`sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  billing:
    type: nats
    sources: [stripe]
    nats:
      url: %s
      subject: %s
      stream: %s
`, stripeSecret, s.URL, s.Subject, s.Name)
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "anyhook.yaml"), []byte(yaml), nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = gateway.New(t.Context(), gateway.Options{Config: cfg})
	var ce *gateway.ConfigError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "anyhook.yaml:15: destinations.billing.nats.stream: ") || !strings.Contains(err.Error(), "duplicate window of 5s") {
		t.Fatalf("New = %v, want a config error naming destinations.billing.nats.stream at line 15", err)
	}
}

// The password in a broker's URL never shows: not in the attempts'
// errors (API and dashboard), the incidents, the alerts or the logs, even
// when the broker refuses it.
func TestBrokerPasswordNeverShown(t *testing.T) {
	t.Parallel()
	q := brokertest.RabbitMQQueue(t)
	const password = "wrong-s3cret-amqp-pw"
	host := strings.TrimSuffix(q.URL[strings.Index(q.URL, "@")+1:], "/")
	alerts := sinktest.New(t)
	var logs syncio.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	base, _ := gatewaytest.Start(t, testTop+fmt.Sprintf(`sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  billing:
    type: rabbitmq
    rabbitmq: {url: "amqp://guest:%s@%s/", routing_key: %s}
    sources: [stripe]
    timeout: 2s
    max_attempts: 2
    backoff: {initial: 20ms, max: 50ms}
alerts:
  - webhook: %s/alerts
alert_delivery_dead: true
alert_window: 1s
`, stripeSecret, password, host, q.Name, alerts.URL), gateway.Options{Logger: log})
	body := []byte(`{"id":"evt_pw","object":"event","type":"invoice.paid","created":1}`)
	a := do(t, stripeRequest(t, base+"/webhooks/stripe", stripeSecret, body, time.Now()))
	if a.Status != "accepted" {
		t.Fatalf("send: %+v", a)
	}
	var ev struct {
		Deliveries []struct {
			Status   string
			Attempts []struct{ Error string }
		}
	}
	testwait.For(t, "the delivery dead, refused by the broker", func() bool {
		gatewaytest.AdminJSON(t, base+"/api/events/"+a.ID, &ev)
		return len(ev.Deliveries) == 1 && ev.Deliveries[0].Status == "dead"
	})
	if e := ev.Deliveries[0].Attempts[0].Error; !strings.Contains(e, "broker unreachable") {
		t.Errorf("attempt error %q, want the broker's refusal", e)
	}
	alerts.Await(t, "an alert", func(rs []sinktest.Request) bool { return len(rs) > 0 })
	seen := map[string]string{"logs": logs.String(), "dashboard event": dashboardPage(t, base, "/events/"+a.ID), "dashboard incidents": dashboardPage(t, base, "/incidents")}
	for _, path := range []string{"/api/events/" + a.ID, "/api/incidents", "/api/destinations"} {
		_, b := gatewaytest.Admin(t, "GET", base+path, "")
		seen[path] = string(b)
	}
	for i, r := range alerts.Requests() {
		seen[fmt.Sprintf("alert %d", i)] = string(r.Body)
	}
	for where, text := range seen {
		if strings.Contains(text, password) {
			t.Errorf("%s shows the broker's password", where)
		}
	}
}

// A Kafka record is keyed by the event's object when the destination
// orders per object (one partition per object), else by the event id.
func TestKafkaRecordKey(t *testing.T) {
	t.Parallel()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "ordered", "unordered"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	base, _ := gatewaytest.Start(t, testTop+fmt.Sprintf(`sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  ordered:
    type: kafka
    kafka: {brokers: [%q], topic: ordered}
    sources: [stripe]
    order: per_object
  unordered:
    type: kafka
    kafka: {brokers: [%q], topic: unordered}
    sources: [stripe]
`, stripeSecret, c.ListenAddrs()[0], c.ListenAddrs()[0]), gateway.Options{})
	ids := map[string]bool{}
	for i := range 3 {
		body := fmt.Appendf(nil, `{"id":"evt_key_%d","object":"event","type":"invoice.paid","created":%d,"data":{"object":{"id":"in_1"}}}`, i, 100+i)
		a := do(t, stripeRequest(t, base+"/webhooks/stripe", stripeSecret, body, time.Now()))
		if a.Status != "accepted" {
			t.Fatalf("send: %+v", a)
		}
		ids[a.ID] = true
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("ordered", "unordered"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < 6 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
	if len(recs) != 6 {
		t.Fatalf("%d records, want 6", len(recs))
	}
	for _, r := range recs {
		switch key := string(r.Key); r.Topic {
		case "ordered":
			if key != "in_1" {
				t.Errorf("ordered record key %q, want the object in_1", key)
			}
		default:
			if !ids[key] {
				t.Errorf("unordered record key %q, want an event id (%v)", key, ids)
			}
		}
	}
}
