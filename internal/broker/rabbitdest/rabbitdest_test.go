package rabbitdest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/broker"
	"github.com/anyhook/anyhook/internal/testkit/brokertest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// Concurrent publishes are each confirmed; every message is persistent,
// with its message_id and headers.
func TestPublish(t *testing.T) {
	t.Parallel()
	q := brokertest.RabbitMQQueue(t)
	p := New(Options{URL: q.URL, RoutingKey: q.Name})
	defer p.Close()
	const n = 20
	errs := make(chan error, n)
	for i := range n {
		go func() {
			id := "dl" + string(rune('a'+i))
			errs <- p.Publish(ctxT(t), broker.Message{ID: id, Header: http.Header{"X-Anyhook-Delivery-Id": {id}}, Body: []byte(`{}`), ContentType: "application/json"})
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	msgs := q.Messages(t, n)
	if len(msgs) != n {
		t.Fatalf("%d messages, want %d", len(msgs), n)
	}
	for _, m := range msgs {
		if m.MessageId == "" || m.Headers["X-Anyhook-Delivery-Id"] != m.MessageId || m.DeliveryMode != 2 || m.ContentType != "application/json" {
			t.Errorf("message id %q, headers %v, mode %d, type %q", m.MessageId, m.Headers, m.DeliveryMode, m.ContentType)
		}
	}
}

// A message no queue takes is returned (mandatory): unroutable, not
// delivered; so is one to an exchange that does not exist. A broker that
// is down is unreachable, not sent, and its error does not quote the URL's
// password.
func TestPublishFailures(t *testing.T) {
	t.Parallel()
	q := brokertest.RabbitMQQueue(t)
	m := broker.Message{ID: "x", Header: http.Header{}, Body: []byte("{}")}
	var be *broker.Error
	for _, o := range []Options{{URL: q.URL, RoutingKey: q.Name + "-nobody"}, {URL: q.URL, Exchange: "no-such-exchange", RoutingKey: q.Name}} {
		p := New(o)
		err := p.Publish(ctxT(t), m)
		if !errors.As(err, &be) || be.Stage != broker.Answered || be.Reason != broker.Unroutable {
			t.Errorf("%+v: %v, want answered, unroutable", o, err)
		}
		// The publisher goes on working after a channel was closed.
		if err := p.Publish(ctxT(t), m); !errors.As(err, &be) || be.Reason != broker.Unroutable {
			t.Errorf("%+v, again: %v, want unroutable", o, err)
		}
		p.Close()
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	err = New(Options{URL: "amqp://user:s3cret-pw@" + addr + "/", RoutingKey: "q"}).Publish(ctxT(t), m)
	if !errors.As(err, &be) || be.Stage != broker.NotSent || be.Reason != broker.Unreachable || strings.Contains(err.Error(), "s3cret-pw") {
		t.Errorf("broker down: %v, want not sent, unreachable, without the password", err)
	}
}
