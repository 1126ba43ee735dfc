// Package rabbitdest publishes deliveries to a RabbitMQ exchange (a
// destination of type: rabbitmq) with amqp091-go: persistent messages,
// mandatory, publisher confirms. A delivery is delivered once the broker
// confirmed the message and did not return it (a returned message is
// unroutable: no queue took it). RabbitMQ does not dedupe: the consumer
// dedupes on message_id (the delivery's id) or X-AnyHook-Delivery-Id.
package rabbitdest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/anyhook/anyhook/internal/broker"
)

// Options say where messages go.
type Options struct {
	URL        string // amqp:// or amqps://
	Exchange   string // "": the default exchange
	RoutingKey string
}

// Publisher is one destination's connection. Each publish takes a channel
// of its own from a pool, so that a returned message (which the broker
// sends before the confirm, on the same channel) is known to be this
// publish's.
type Publisher struct {
	opt  Options
	lock chan struct{} // guards conn; a channel, so that a waiter gives up with its context
	conn *amqp.Connection
	idle chan *pubChan // channels free for a publish
}

type pubChan struct {
	conn    *amqp.Connection
	ch      *amqp.Channel
	returns chan amqp.Return
	closed  chan *amqp.Error
}

// New returns a publisher; nothing is dialled before Publish.
func New(o Options) *Publisher {
	return &Publisher{opt: o, lock: make(chan struct{}, 1), idle: make(chan *pubChan, 256)}
}

// connection returns a live connection, dialling one when there is none.
func (p *Publisher) connection(ctx context.Context) (*amqp.Connection, error) {
	select {
	case p.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, broker.Errorf(broker.NotSent, broker.Unreachable, "gave up waiting for the connection: %v", ctx.Err())
	}
	defer func() { <-p.lock }()
	if p.conn != nil && !p.conn.IsClosed() {
		return p.conn, nil
	}
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 {
		return nil, broker.Errorf(broker.NotSent, broker.Unreachable, "no time left to connect")
	}
	c, err := amqp.DialConfig(p.opt.URL, amqp.Config{Dial: amqp.DefaultDial(timeout), Properties: amqp.Table{"connection_name": "anyhook"}})
	if err != nil {
		return nil, broker.Errorf(broker.NotSent, broker.Unreachable, "%s", dialError(err))
	}
	p.conn = c
	return c, nil
}

// dialError is err's text without the URL, which may hold a password.
func dialError(err error) string {
	var ae *amqp.Error
	if errors.As(err, &ae) {
		return fmt.Sprintf("%d %s", ae.Code, ae.Reason)
	}
	s := err.Error()
	if i := strings.Index(s, "://"); i >= 0 {
		return "connect failed" // an error quoting a URL is not repeated
	}
	return s
}

// channel takes a channel in confirm mode from the pool, or opens one.
func (p *Publisher) channel(ctx context.Context) (*pubChan, error) {
	for {
		select {
		case pc := <-p.idle:
			if !pc.ch.IsClosed() && !pc.conn.IsClosed() {
				return pc, nil
			}
			continue
		default:
		}
		break
	}
	conn, err := p.connection(ctx)
	if err != nil {
		return nil, err
	}
	// Opening a channel is two synchronous RPCs that take no context: a
	// broker that stopped answering (SIGSTOP) would hold the publish until
	// the heartbeat gives up, past the lease. The open goes on alone; a
	// channel it opens too late is closed.
	type opened struct {
		pc  *pubChan
		err error
	}
	res := make(chan opened, 1)
	go func() {
		pc, err := openChannel(conn)
		res <- opened{pc, err}
	}()
	select {
	case o := <-res:
		return o.pc, o.err
	case <-ctx.Done():
		go func() {
			if o := <-res; o.pc != nil {
				o.pc.ch.Close()
			}
		}()
		return nil, broker.Errorf(broker.NotSent, broker.Unreachable, "opening a channel: no answer: %v", ctx.Err())
	}
}

func openChannel(conn *amqp.Connection) (*pubChan, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, broker.Errorf(broker.NotSent, broker.Unreachable, "opening a channel: %v", err)
	}
	if err := ch.Confirm(false); err != nil {
		ch.Close()
		return nil, broker.Errorf(broker.NotSent, broker.Unreachable, "turning on publisher confirms: %v", err)
	}
	return &pubChan{conn: conn, ch: ch, returns: ch.NotifyReturn(make(chan amqp.Return, 1)), closed: ch.NotifyClose(make(chan *amqp.Error, 1))}, nil
}

func (p *Publisher) release(pc *pubChan) {
	if pc.ch.IsClosed() {
		return
	}
	select {
	case p.idle <- pc:
	default:
		pc.ch.Close()
	}
}

// Publish sends m (persistent, mandatory) and waits for the broker's
// confirm, until ctx ends.
func (p *Publisher) Publish(ctx context.Context, m broker.Message) error {
	pc, err := p.channel(ctx)
	if err != nil {
		return err
	}
	headers := amqp.Table{}
	for k, vs := range m.Header {
		headers[k] = strings.Join(vs, ", ")
	}
	msg := amqp.Publishing{
		Headers:      headers,
		ContentType:  m.ContentType,
		DeliveryMode: amqp.Persistent,
		MessageId:    m.ID,
		Timestamp:    time.Now(),
		Body:         m.Body,
	}
	dc, err := pc.ch.PublishWithDeferredConfirmWithContext(ctx, p.opt.Exchange, p.opt.RoutingKey, true, false, msg)
	if err != nil {
		go pc.ch.Close() // a synchronous RPC: a broker that stopped answering would hold this publish
		return broker.Errorf(broker.NotSent, broker.Unreachable, "%v", err)
	}
	acked, err := dc.WaitContext(ctx)
	if err != nil {
		// The confirm may still come: this channel's next publish must
		// not read it as its own.
		go pc.ch.Close()
		return broker.Errorf(broker.NoAnswer, broker.NoAck, "timeout waiting for the publisher confirm")
	}
	if !acked {
		// A closed channel settles its pending confirms as nacks: the
		// close says why.
		select {
		case ae := <-pc.closed:
			if ae != nil && ae.Code == amqp.NotFound {
				return broker.Errorf(broker.Answered, broker.Unroutable, "%s", ae.Reason)
			}
			if ae != nil && !ae.Server {
				return broker.Errorf(broker.NoAnswer, broker.NoAck, "connection lost: %s", ae.Reason)
			}
			if ae != nil {
				return broker.Errorf(broker.Answered, broker.Nack, "%d %s", ae.Code, ae.Reason)
			}
			return broker.Errorf(broker.NoAnswer, broker.NoAck, "channel closed before the confirm")
		default:
		}
		p.release(pc)
		return broker.Errorf(broker.Answered, broker.Nack, "the broker did not take the message (basic.nack)")
	}
	// A return comes before the confirm: it is in the channel by now.
	select {
	case r := <-pc.returns:
		p.release(pc)
		return broker.Errorf(broker.Answered, broker.Unroutable, "returned by the broker: %d %s (exchange %q, routing key %q)", r.ReplyCode, r.ReplyText, r.Exchange, r.RoutingKey)
	default:
	}
	p.release(pc)
	return nil
}

// Close closes the connection; Publish may connect again.
func (p *Publisher) Close() error {
	p.lock <- struct{}{}
	defer func() { <-p.lock }()
	if p.conn != nil {
		p.conn.Close()
		p.conn = nil
	}
	return nil
}
