// Package natsdest publishes deliveries to a NATS JetStream stream (a
// destination of type: nats). A delivery is delivered once the stream's
// PubAck came, a duplicate's included: Nats-Msg-Id is the delivery's id,
// so a re-send after a crash within the stream's duplicate window is
// stored once.
package natsdest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/anyhook/anyhook/internal/broker"
)

// Options say where messages go.
type Options struct {
	URL     string // nats://host:port, comma-separated for a cluster
	Subject string
	Stream  string
	// MinWindow is the least duplicate window the stream must have: the
	// destination's lease plus a margin (Check).
	MinWindow time.Duration
	Name      string // the client's name, as the server shows it
}

// Publisher is one destination's connection; it connects on first use
// and again after the connection closed.
type Publisher struct {
	opt Options
	// lock guards nc and js; a channel, so that a publish waiting for a
	// connect gives up with its context.
	lock chan struct{}
	nc   *nats.Conn
	js   jetstream.JetStream
}

// New returns a publisher; nothing is dialled before Check or Publish.
func New(o Options) *Publisher {
	return &Publisher{opt: o, lock: make(chan struct{}, 1)}
}

// StreamError is a stream that cannot take the destination's messages
// safely: missing, or with a duplicate window shorter than MinWindow. It
// is the config's mistake (destinations.NAME.nats.stream).
type StreamError struct{ Msg string }

func (e *StreamError) Error() string { return e.Msg }

// Check connects and checks the stream: it exists and its duplicate
// window is at least MinWindow. An unreachable server is a
// *broker.Error (Unreachable); a stream that does not do is a
// *StreamError.
func (p *Publisher) Check(ctx context.Context) error {
	_, err := p.conn(ctx)
	return err
}

// conn returns the JetStream context of a live connection, dialling (and
// checking the stream) when there is none.
func (p *Publisher) conn(ctx context.Context) (jetstream.JetStream, error) {
	select {
	case p.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, broker.Errorf(broker.NotSent, broker.Unreachable, "gave up waiting for the connection: %v", ctx.Err())
	}
	defer func() { <-p.lock }()
	if p.nc != nil && !p.nc.IsClosed() {
		if p.nc.Status() != nats.CONNECTED {
			// While reconnecting nothing is buffered (ReconnectBufSize
			// -1): the message is refused, not sent later behind the
			// engine's back.
			return nil, broker.Errorf(broker.NotSent, broker.Unreachable, "connection %s", p.nc.Status())
		}
		return p.js, nil
	}
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = min(timeout, time.Until(dl))
	}
	if timeout <= 0 {
		return nil, broker.Errorf(broker.NotSent, broker.Unreachable, "no time left to connect")
	}
	nc, err := nats.Connect(p.opt.URL, nats.Name(p.opt.Name), nats.Timeout(timeout), nats.ReconnectBufSize(-1), nats.MaxReconnects(-1))
	if err != nil {
		return nil, broker.Errorf(broker.NotSent, broker.Unreachable, "%v", err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, broker.Errorf(broker.NotSent, broker.Unreachable, "%v", err)
	}
	if err := p.checkStream(ctx, js); err != nil {
		nc.Close()
		return nil, err
	}
	p.nc, p.js = nc, js
	return js, nil
}

func (p *Publisher) checkStream(ctx context.Context, js jetstream.JetStream) error {
	s, err := js.Stream(ctx, p.opt.Stream)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return &StreamError{Msg: fmt.Sprintf("JetStream stream %q not found: create it (storing subject %s) with a duplicate window of at least %s", p.opt.Stream, p.opt.Subject, p.opt.MinWindow)}
	case err != nil:
		return broker.Errorf(broker.NotSent, broker.Unreachable, "reading stream %s: %v", p.opt.Stream, err)
	}
	if w := s.CachedInfo().Config.Duplicates; w < p.opt.MinWindow {
		return &StreamError{Msg: fmt.Sprintf("JetStream stream %q has a duplicate window of %s, shorter than %s (the destination's lease, timeout + delivery.grace, plus a minute): a re-send after a crash could be stored twice; raise it (nats stream edit %s --dupe-window %s)", p.opt.Stream, w, p.opt.MinWindow, p.opt.Stream, p.opt.MinWindow)}
	}
	return nil
}

// Publish sends m and waits for the stream's PubAck, until ctx ends.
func (p *Publisher) Publish(ctx context.Context, m broker.Message) error {
	js, err := p.conn(ctx)
	if err != nil {
		var se *StreamError
		if errors.As(err, &se) {
			return broker.Errorf(broker.NotSent, broker.Unroutable, "%s", se.Msg)
		}
		return err
	}
	msg := &nats.Msg{Subject: p.opt.Subject, Header: nats.Header(m.Header.Clone()), Data: m.Body}
	_, err = js.PublishMsg(ctx, msg, jetstream.WithMsgID(m.ID), jetstream.WithExpectStream(p.opt.Stream))
	// A PubAck marked duplicate is delivered too: the stream holds the
	// message from an earlier attempt of this delivery.
	if err == nil {
		return nil
	}
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, jetstream.ErrNoStreamResponse):
		return broker.Errorf(broker.Answered, broker.Unroutable, "no stream stores subject %s", p.opt.Subject)
	case errors.As(err, &apiErr):
		return broker.Errorf(broker.Answered, broker.Nack, "%v", apiErr)
	case errors.Is(err, nats.ErrReconnectBufExceeded), errors.Is(err, nats.ErrConnectionReconnecting):
		return broker.Errorf(broker.NotSent, broker.Unreachable, "%v", err)
	case errors.Is(err, context.DeadlineExceeded):
		return broker.Errorf(broker.NoAnswer, broker.NoAck, "timeout waiting for the PubAck")
	}
	return broker.Errorf(broker.NoAnswer, broker.NoAck, "%v", err)
}

// Close closes the connection; Publish may connect again.
func (p *Publisher) Close() error {
	p.lock <- struct{}{}
	defer func() { <-p.lock }()
	if p.nc != nil {
		p.nc.Close()
		p.nc, p.js = nil, nil
	}
	return nil
}
