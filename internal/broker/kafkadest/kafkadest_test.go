package kafkadest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/anyhook/anyhook/internal/broker"
)

func ctxT(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// cluster starts franz-go's in-process Kafka (kfake) with topic.
func cluster(t *testing.T, topic string) []string {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, topic))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c.ListenAddrs()
}

// Records reads every record of topic.
func records(t *testing.T, addrs []string, topic string, want int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	ctx := ctxT(t, 20*time.Second)
	for len(out) < want && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		fs.EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	return out
}

func header(r *kgo.Record, k string) string {
	for _, h := range r.Headers {
		if h.Key == k {
			return string(h.Value)
		}
	}
	return ""
}

// A record carries the body, the headers and the key it was given; the
// records of one key share a partition.
func TestPublish(t *testing.T) {
	t.Parallel()
	addrs := cluster(t, "hooks")
	p, err := New(Options{Brokers: addrs, Topic: "hooks", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, id := range []string{"dl1", "dl2", "dl3"} {
		m := broker.Message{ID: id, Key: "cus_1", Header: http.Header{"X-Anyhook-Delivery-Id": {id}, "Content-Type": {"application/json"}}, Body: []byte(`{"id":"` + id + `"}`)}
		if err := p.Publish(ctxT(t, 10*time.Second), m); err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
	}
	rs := records(t, addrs, "hooks", 3)
	if len(rs) != 3 {
		t.Fatalf("%d records, want 3", len(rs))
	}
	for i, r := range rs {
		if string(r.Key) != "cus_1" || r.Partition != rs[0].Partition || header(r, "Content-Type") != "application/json" {
			t.Errorf("record %d: key %q, partition %d (first %d), headers %v", i, r.Key, r.Partition, rs[0].Partition, r.Headers)
		}
		if want := []string{"dl1", "dl2", "dl3"}[i]; header(r, "X-Anyhook-Delivery-Id") != want {
			t.Errorf("record %d: X-AnyHook-Delivery-Id %q, want %s (in order: one key, one partition)", i, header(r, "X-Anyhook-Delivery-Id"), want)
		}
	}
}

// A topic that does not exist is unroutable, not sent; a cluster that is
// down is unreachable, not sent.
func TestPublishFailures(t *testing.T) {
	t.Parallel()
	addrs := cluster(t, "hooks")
	p, err := New(Options{Brokers: addrs, Topic: "nosuch", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	m := broker.Message{ID: "x", Key: "k", Header: http.Header{}, Body: []byte("{}")}
	var be *broker.Error
	err = p.Publish(ctxT(t, 10*time.Second), m)
	if !errors.As(err, &be) || be.Stage != broker.NotSent || be.Reason != broker.Unroutable {
		t.Errorf("unknown topic: %v, want not sent, unroutable", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	down, err := New(Options{Brokers: []string{addr}, Topic: "hooks", Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer down.Close()
	err = down.Publish(ctxT(t, 2*time.Second), m)
	if !errors.As(err, &be) || be.Stage != broker.NotSent || be.Reason != broker.Unreachable {
		t.Errorf("cluster down: %v, want not sent, unreachable", err)
	}
}
