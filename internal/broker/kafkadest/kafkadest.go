// Package kafkadest produces deliveries to a Kafka topic (a destination of
// type: kafka) with franz-go: an idempotent producer with acks=all, so a
// record retried within one producer session is written once. A delivery
// is delivered once every in-sync replica has the record. After a crash
// the re-sent record comes from a new producer session, which Kafka does
// not dedupe: the consumer dedupes on X-AnyHook-Delivery-Id.
package kafkadest

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/anyhook/anyhook/internal/broker"
)

// Options say where records go.
type Options struct {
	Brokers []string // seed brokers, host:port
	Topic   string
	// Timeout bounds how long a record may wait to be produced (the
	// destination's timeout): it never outlives its attempt by much.
	Timeout time.Duration
}

// Publisher is one destination's producer client.
type Publisher struct {
	opt Options
	cl  *kgo.Client
	// written counts produce requests written to a broker: a failed
	// publish during which none was is one that was not sent.
	written atomic.Int64
}

// New returns a publisher; the client dials on first use.
func New(o Options) (*Publisher, error) {
	p := &Publisher{opt: o}
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(o.Brokers...),
		kgo.DefaultProduceTopic(o.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // idempotent writes (the default) need it
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(max(o.Timeout, time.Second)),
		kgo.UnknownTopicRetries(2),
		kgo.WithHooks(writeHook{p}),
	)
	if err != nil {
		return nil, err
	}
	p.cl = cl
	return p, nil
}

type writeHook struct{ p *Publisher }

func (h writeHook) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, n int, _, _ time.Duration, err error) {
	if key == 0 && (err == nil || n > 0) { // Produce; a part written counts: the safe side
		h.p.written.Add(1)
	}
}

// Publish produces m and waits for acks=all, until ctx ends. The record's
// key is m.Key (one partition per object when the destination orders).
func (p *Publisher) Publish(ctx context.Context, m broker.Message) error {
	rec := &kgo.Record{Key: []byte(m.Key), Value: m.Body}
	for k, vs := range m.Header {
		for _, v := range vs {
			rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: k, Value: []byte(v)})
		}
	}
	before := p.written.Load()
	done := make(chan error, 1)
	p.cl.Produce(ctx, rec, func(_ *kgo.Record, err error) { done <- err })
	var err error
	select {
	case err = <-done:
		if err == nil {
			return nil
		}
	case <-ctx.Done():
		// A record already written cannot be taken back: the producer
		// settles it in the background, and this attempt has no answer.
		err = ctx.Err()
	}
	sent := p.written.Load() != before
	var ke *kerr.Error
	switch {
	case errors.Is(err, kerr.UnknownTopicOrPartition):
		return broker.Errorf(broker.NotSent, broker.Unroutable, "topic %s: %v", p.opt.Topic, err)
	case errors.As(err, &ke) && ke.Retriable && !sent:
		return broker.Errorf(broker.NotSent, broker.Unreachable, "%v", err)
	case errors.As(err, &ke):
		return broker.Errorf(broker.Answered, broker.Nack, "%v", err)
	case !sent:
		return broker.Errorf(broker.NotSent, broker.Unreachable, "no broker took the record: %v", err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, kgo.ErrRecordTimeout):
		return broker.Errorf(broker.NoAnswer, broker.NoAck, "timeout waiting for acks=all")
	}
	return broker.Errorf(broker.NoAnswer, broker.NoAck, "%v", err)
}

// Close flushes nothing (every publish waited for its record) and closes
// the client.
func (p *Publisher) Close() error {
	p.cl.Close()
	return nil
}
