package rabbitdest

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/broker"
	"github.com/anyhook/anyhook/internal/testkit/brokertest"
	"github.com/anyhook/anyhook/internal/testkit/faultnet"
)

// ADVERSARY (issue 35: "a publish respects the lease"): a broker that
// stops answering (SIGSTOP: its connection stays open) must not hold a
// publish past its context. After the confirm's wait gives up, Publish
// closes the channel with a synchronous channel.close RPC that waits for
// the frozen broker's close-ok, until the connection's heartbeat gives up.
func TestAdvPublishFrozenBrokerRespectsContext(t *testing.T) {
	q := brokertest.RabbitMQQueue(t)
	u, err := url.Parse(q.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultnet.NewProxy(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	u.Host = proxy.Addr()
	p := New(Options{URL: u.String(), RoutingKey: q.Name})
	t.Cleanup(func() { go p.Close() })
	m := broker.Message{ID: "frozen-1", Header: http.Header{}, Body: []byte("{}")}
	if err := p.Publish(ctxT(t), m); err != nil {
		t.Fatalf("first publish: %v", err)
	}
	proxy.HoldReplies() // the broker answers nothing more, as when stopped (SIGSTOP)
	t.Cleanup(proxy.ReleaseReplies)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- p.Publish(ctx, m) }()
	select {
	case err := <-done:
		t.Logf("returned after %v: %v", time.Since(start), err)
	case <-time.After(10 * time.Second): // ten times the publish's own time
		t.Fatalf("Publish with a 1s context still blocked after 10s on a frozen broker")
	}
}

// ADVERSARY: the same with no idle channel: the second of two publishes
// opens a channel (conn.Channel, then Confirm), synchronous RPCs that take
// no context.
func TestAdvPublishFrozenBrokerNewChannel(t *testing.T) {
	q := brokertest.RabbitMQQueue(t)
	u, err := url.Parse(q.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := faultnet.NewProxy(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	u.Host = proxy.Addr()
	p := New(Options{URL: u.String(), RoutingKey: q.Name})
	t.Cleanup(func() { go p.Close() })
	m := broker.Message{ID: "frozen-2", Header: http.Header{}, Body: []byte("{}")}
	if err := p.Publish(ctxT(t), m); err != nil {
		t.Fatalf("first publish: %v", err)
	}
	proxy.HoldReplies() // the broker answers nothing more, as when stopped (SIGSTOP)
	t.Cleanup(proxy.ReleaseReplies)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	done := make(chan error, 2)
	for range 2 {
		go func() { done <- p.Publish(ctx, m) }()
	}
	deadline := time.After(10 * time.Second) // ten times the publishes' own time
	for range 2 {
		select {
		case err := <-done:
			t.Logf("returned: %v", err)
		case <-deadline:
			t.Fatalf("a Publish with a 1s context still blocked after 10s on a frozen broker")
		}
	}
}
