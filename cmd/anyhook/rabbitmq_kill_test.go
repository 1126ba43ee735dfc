package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/brokertest"
	"github.com/anyhook/anyhook/internal/testkit/faultnet"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// TestKillAfterRabbitMQConfirmResendsSameID: claim-then-commit holds for a
// RabbitMQ destination. The queue takes the message and the broker
// confirms it, the confirm is held on its way back (a proxy), and the
// gateway is killed (kill -9) before it could record the outcome. After a
// restart the delivery is published again with the same message_id:
// RabbitMQ does not dedupe, so the queue holds it twice, and a consumer
// that dedupes on message_id sees it once.
func TestKillAfterRabbitMQConfirmResendsSameID(t *testing.T) {
	t.Parallel()
	q := brokertest.RabbitMQQueue(t)
	host := strings.TrimSuffix(q.URL[strings.Index(q.URL, "@")+1:], "/")
	proxy, err := faultnet.NewProxy(host)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	url := strings.Replace(q.URL, host, proxy.Addr(), 1)
	cfg := writeConfig(t, t.TempDir(), fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:anyhook.db
admin_token: test-token
delivery: {poll_interval: 100ms, grace: 1s, shutdown: 1s}
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  billing:
    type: rabbitmq
    rabbitmq: {url: %q, routing_key: %s}
    sources: [stripe]
    timeout: 5s
    backoff: {initial: 50ms, max: 200ms}
`, secret, url, q.Name))
	p := start(t, cfg)
	// A first event opens the connection (through the proxy).
	if code, _, err := sendEvent(p.url, "evt_rabbit_warm"); err != nil || code != 200 {
		t.Fatalf("send = %d, %v", code, err)
	}
	q.Messages(t, 1)
	proxy.HoldReplies()
	code, id, err := sendEvent(p.url, "evt_rabbit_kill")
	if err != nil || code != 200 {
		t.Fatalf("send = %d, %v", code, err)
	}
	q.Messages(t, 2)
	p.kill() // the confirm never reached the gateway: the outcome is unknown
	proxy.ReleaseReplies()

	p2 := start(t, cfg)
	var list struct {
		Items []struct {
			ID      string
			EventID string `json:"event_id"`
		}
	}
	testwait.For(t, "both deliveries delivered", func() bool {
		gatewaytest.AdminJSON(t, p2.url+"/api/deliveries?status=delivered", &list)
		return len(list.Items) == 2
	})
	var killed string
	for _, d := range list.Items {
		if d.EventID == id {
			killed = d.ID
		}
	}
	seen := map[string]int{} // the consumer's dedup: by message_id
	for _, m := range q.Messages(t, 3) {
		seen[m.MessageId]++
		if m.MessageId == killed && m.Headers["X-Anyhook-Delivery"] != id {
			t.Errorf("message %s is of event %v, want %s", killed, m.Headers["X-Anyhook-Delivery"], id)
		}
	}
	if len(seen) != 2 || seen[killed] != 2 {
		t.Fatalf("messages per message_id %v: want delivery %s twice (before the kill, and the re-send) and two distinct ids", seen, killed)
	}
}
