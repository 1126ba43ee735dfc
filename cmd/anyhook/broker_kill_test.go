package main

import (
	"fmt"
	"testing"

	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/brokertest"
	"github.com/anyhook/anyhook/internal/testkit/faultnet"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// natsConfig is gatewayConfig with a NATS destination reached at addr.
func natsConfig(addr string, s *brokertest.Stream) string {
	return fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:anyhook.db
admin_token: test-token
delivery: {poll_interval: 100ms, grace: 1s, shutdown: 1s}
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  billing:
    type: nats
    nats: {url: "nats://%s", subject: %s, stream: %s}
    sources: [stripe]
    timeout: 5s
    backoff: {initial: 50ms, max: 200ms}
`, secret, addr, s.Subject, s.Name)
}

// TestKillAfterNATSAckResendsSameID: claim-then-commit holds for a NATS
// destination. The stream stores the message and acks it, the ack is held
// on its way back (a proxy), and the gateway is killed (kill -9) before it
// could record the outcome. After a restart the lease runs out and the
// delivery is sent again with the same Nats-Msg-Id (the delivery's id):
// the stream's duplicate window swallows it, the PubAck (duplicate)
// counts as delivered, and the stream holds the message once.
func TestKillAfterNATSAckResendsSameID(t *testing.T) {
	t.Parallel()
	s := brokertest.NATSStream(t, 0)
	proxy, err := faultnet.NewProxy(s.URL[len("nats://"):])
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	cfg := writeConfig(t, t.TempDir(), natsConfig(proxy.Addr(), s))
	p := start(t, cfg) // connected through the proxy: the stream check passed
	proxy.HoldReplies()
	code, id, err := sendEvent(p.url, "evt_nats_kill")
	if err != nil || code != 200 {
		t.Fatalf("send = %d, %v", code, err)
	}
	testwait.For(t, "the stream to store the message", func() bool { return len(s.Messages(t)) == 1 })
	p.kill() // the PubAck never reached the gateway: the outcome is unknown
	proxy.ReleaseReplies()
	first := s.Messages(t)[0]
	msgID := first.Header.Get("Nats-Msg-Id")
	if first.Header.Get("X-Anyhook-Delivery") != id || msgID == "" || first.Header.Get("X-Anyhook-Delivery-Id") != msgID {
		t.Fatalf("message headers %v: want X-AnyHook-Delivery %s and Nats-Msg-Id = X-AnyHook-Delivery-Id", first.Header, id)
	}

	p2 := start(t, cfg)
	var list struct {
		Items []struct {
			ID           string
			EventID      string `json:"event_id"`
			AttemptCount int    `json:"attempt_count"`
		}
	}
	testwait.For(t, "the delivery to be re-sent and delivered", func() bool {
		gatewaytest.AdminJSON(t, p2.url+"/api/deliveries?status=delivered", &list)
		return len(list.Items) == 1
	})
	if d := list.Items[0]; d.EventID != id || d.ID != msgID || d.AttemptCount < 2 {
		t.Fatalf("delivered %+v: want event %s, delivery %s, sent again after the kill", d, id, msgID)
	}
	if n := len(s.Messages(t)); n != 1 {
		t.Fatalf("the stream holds %d messages, want 1: the re-send with the same Nats-Msg-Id was stored again", n)
	}
}
