package brokertest

import (
	"os"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// RabbitMQURL is the test RabbitMQ broker: $ANYHOOK_TEST_RABBITMQ, default
// amqp://guest:guest@127.0.0.1:35672/ (scripts/rabbitmq.sh).
func RabbitMQURL() string {
	if s := os.Getenv("ANYHOOK_TEST_RABBITMQ"); s != "" {
		return s
	}
	return "amqp://guest:guest@127.0.0.1:35672/"
}

// Queue is a durable queue made for one test, deleted when it ends.
type Queue struct {
	URL, Name string
	ch        *amqp.Channel
}

// RabbitMQQueue declares a queue of its own; messages published to the
// default exchange with its name as routing key land in it.
func RabbitMQQueue(t testing.TB) *Queue {
	t.Helper()
	reachable(t, RabbitMQURL(), "scripts/rabbitmq.sh")
	conn, err := amqp.Dial(RabbitMQURL())
	if err != nil {
		t.Fatalf("rabbitmq: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	ch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	q := &Queue{URL: RabbitMQURL(), Name: Name("anyhook-test-"), ch: ch}
	if _, err := ch.QueueDeclare(q.Name, true, false, false, false, nil); err != nil {
		t.Fatalf("declare queue: %v", err)
	}
	t.Cleanup(func() { ch.QueueDelete(q.Name, false, false, false) })
	return q
}

// Messages waits (bounded) until the queue holds at least n messages and
// returns every one, without consuming them for good (they are requeued).
func (q *Queue) Messages(t testing.TB, n int) []amqp.Delivery {
	t.Helper()
	testwait.For(t, "the queue to hold the messages", func() bool {
		st, err := q.ch.QueueDeclarePassive(q.Name, true, false, false, false, nil)
		if err != nil {
			t.Fatal(err)
		}
		return st.Messages >= n
	})
	var out []amqp.Delivery
	for {
		d, ok, err := q.ch.Get(q.Name, false)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		out = append(out, d)
	}
	for _, d := range out {
		d.Nack(false, true)
	}
	return out
}
