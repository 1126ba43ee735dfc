// Package broker is what the delivery engine and the broker clients
// (natsdest, rabbitdest, kafkadest) share: one message to publish and the
// error a publish fails with, which says how far the message got (not
// sent, sent without an answer, refused) and why, in the words incidents
// classify (internal/incident KindOf).
package broker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// Message is one delivery attempt as a broker message.
type Message struct {
	// ID is the delivery row's id: the broker's dedup key (Nats-Msg-Id,
	// AMQP message_id, a Kafka header). A crash after the broker took the
	// message re-sends the same ID; a replay is a new delivery, a new ID.
	ID string
	// Key is the Kafka record key: the event's object when the
	// destination orders per object, else the event id.
	Key string
	// Header holds the same headers as the HTTP request would have
	// (X-AnyHook-*, webhook-* when signed, the provider's own) and
	// X-AnyHook-Delivery-Id.
	Header http.Header
	Body   []byte
	// ContentType is the event's, as received.
	ContentType string
}

// Publisher sends messages to one broker destination. Publish returns
// nil once the broker has taken the message (its ack); else an *Error
// (or the ctx's error, when no message was written). It is safe for
// concurrent use.
type Publisher interface {
	Publish(ctx context.Context, m Message) error
	Close() error
}

// Stage is how far a failed publish got.
type Stage int

const (
	// NotSent: nothing reached the broker (no connection): safe to send
	// again.
	NotSent Stage = iota
	// NoAnswer: the message was written, and no answer came: the broker
	// may have stored it.
	NoAnswer
	// Answered: the broker answered, and did not take the message (a
	// nack, an unroutable message).
	Answered
)

// The reasons of a failed publish. Each starts the error's text, so that
// an attempt read back from the store classifies alike (incident.KindOf).
const (
	Unreachable = "broker unreachable" // no connection to the broker
	Nack        = "broker nack"        // the broker refused the message
	Unroutable  = "unroutable"         // no queue, stream or topic took it
	NoAck       = "no ack"             // written; the ack did not come
)

// Error is a failed publish.
type Error struct {
	Stage  Stage
	Reason string // Unreachable, Nack, Unroutable or NoAck
	Err    error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error of stage and reason.
func Errorf(stage Stage, reason, format string, args ...any) *Error {
	return &Error{Stage: stage, Reason: reason, Err: fmt.Errorf(format, args...)}
}

// StageOf says how far err got: an *Error's stage, else NotSent.
func StageOf(err error) Stage {
	var be *Error
	if errors.As(err, &be) {
		return be.Stage
	}
	return NotSent
}
