package natsdest

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

// A message is stored with its headers and Nats-Msg-Id; the same id sent
// again (a re-send after a crash) is acked and stored once.
func TestPublishDedupes(t *testing.T) {
	t.Parallel()
	s := brokertest.NATSStream(t, 0)
	p := New(Options{URL: s.URL, Subject: s.Subject, Stream: s.Name, MinWindow: time.Minute})
	defer p.Close()
	h := http.Header{"X-Anyhook-Delivery": {"ev1"}, "X-Anyhook-Delivery-Id": {"dl1"}, "Content-Type": {"application/json"}}
	m := broker.Message{ID: "dl1", Header: h, Body: []byte(`{"a":1}`), ContentType: "application/json"}
	for range 2 {
		if err := p.Publish(ctxT(t), m); err != nil {
			t.Fatalf("publish: %v", err)
		}
	}
	m2 := m
	m2.ID = "dl2" // a replay: a new delivery, a new id
	if err := p.Publish(ctxT(t), m2); err != nil {
		t.Fatal(err)
	}
	msgs := s.Messages(t)
	if len(msgs) != 2 {
		t.Fatalf("stream holds %d messages, want 2 (dl1 once, dl2)", len(msgs))
	}
	if got := msgs[0].Header.Get("Nats-Msg-Id"); got != "dl1" {
		t.Errorf("Nats-Msg-Id = %q, want dl1", got)
	}
	if got := msgs[0].Header.Get("X-Anyhook-Delivery"); got != "ev1" || string(msgs[0].Data) != `{"a":1}` {
		t.Errorf("message = %v %q", msgs[0].Header, msgs[0].Data)
	}
}

// A stream that is missing, or whose duplicate window is shorter than the
// lease needs, is a *StreamError at Check (a config error at start).
func TestCheckStream(t *testing.T) {
	t.Parallel()
	short := brokertest.NATSStream(t, 10*time.Second)
	var se *StreamError
	err := New(Options{URL: short.URL, Subject: short.Subject, Stream: short.Name, MinWindow: time.Minute}).Check(ctxT(t))
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "duplicate window of 10s") {
		t.Errorf("short window: %v, want a StreamError naming the window", err)
	}
	err = New(Options{URL: short.URL, Subject: short.Subject, Stream: "NOSUCH", MinWindow: time.Minute}).Check(ctxT(t))
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "not found") {
		t.Errorf("missing stream: %v, want a StreamError", err)
	}
	if err := New(Options{URL: short.URL, Subject: short.Subject, Stream: short.Name, MinWindow: 5 * time.Second}).Check(ctxT(t)); err != nil {
		t.Errorf("window long enough: %v", err)
	}
}

// A server that is down is a failed attempt, not sent; a subject no
// stream stores is unroutable.
func TestPublishFailures(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	m := broker.Message{ID: "x", Header: http.Header{}, Body: []byte("{}")}
	err = New(Options{URL: "nats://" + addr, Subject: "a", Stream: "S", MinWindow: time.Minute}).Publish(ctxT(t), m)
	var be *broker.Error
	if !errors.As(err, &be) || be.Stage != broker.NotSent || be.Reason != broker.Unreachable {
		t.Errorf("server down: %v, want not sent, unreachable", err)
	}
	s := brokertest.NATSStream(t, 0)
	p := New(Options{URL: s.URL, Subject: s.Subject + ".other", Stream: s.Name, MinWindow: time.Minute})
	defer p.Close()
	err = p.Publish(ctxT(t), m)
	if !errors.As(err, &be) || be.Stage != broker.Answered || be.Reason != broker.Unroutable {
		t.Errorf("subject in no stream: %v, want answered, unroutable", err)
	}
}
