package rabbitdest

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/broker"
	"github.com/anyhook/anyhook/internal/testkit/brokertest"
)

// frozenRelay forwards TCP to target until freeze: then it keeps every
// connection open and forwards nothing, as a broker stopped with SIGSTOP.
type frozenRelay struct {
	l      net.Listener
	mu     sync.Mutex
	frozen chan struct{}
}

func newFrozenRelay(t *testing.T, target string) *frozenRelay {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &frozenRelay{l: l, frozen: make(chan struct{})}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			t.Cleanup(func() { c.Close(); b.Close() })
			go r.pipe(b, c)
			go r.pipe(c, b)
		}
	}()
	return r
}

func (r *frozenRelay) pipe(dst io.Writer, src io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			select {
			case <-r.frozen:
				select {} // stopped: nothing goes through any more
			default:
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (r *frozenRelay) freeze() { close(r.frozen) }

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
	relay := newFrozenRelay(t, u.Host)
	u.Host = relay.l.Addr().String()
	p := New(Options{URL: u.String(), RoutingKey: q.Name})
	t.Cleanup(func() { go p.Close() })
	m := broker.Message{ID: "frozen-1", Header: http.Header{}, Body: []byte("{}")}
	if err := p.Publish(ctxT(t), m); err != nil {
		t.Fatalf("first publish: %v", err)
	}
	relay.freeze()
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
	relay := newFrozenRelay(t, u.Host)
	u.Host = relay.l.Addr().String()
	p := New(Options{URL: u.String(), RoutingKey: q.Name})
	t.Cleanup(func() { go p.Close() })
	m := broker.Message{ID: "frozen-2", Header: http.Header{}, Body: []byte("{}")}
	if err := p.Publish(ctxT(t), m); err != nil {
		t.Fatalf("first publish: %v", err)
	}
	relay.freeze()
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
