package config

import (
	"strings"
	"testing"
)

// A destination's type picks its block; every other config keeps working
// as http.
func TestDestinationKinds(t *testing.T) {
	t.Parallel()
	src := `sources:
  stripe:
    provider: stripe
    secrets: [whsec_abc]
destinations:
  web:
    url: http://127.0.0.1:9000/
    sources: [stripe]
  events:
    type: nats
    sources: [stripe]
    nats: {url: "nats://127.0.0.1:14222", subject: anyhook.stripe, stream: HOOKS}
  queue:
    type: rabbitmq
    sources: [stripe]
    rabbitmq: {url: "amqp://u:p@127.0.0.1:5672/", routing_key: hooks}
  log:
    type: kafka
    sources: [stripe]
    kafka: {brokers: ["127.0.0.1:9092"], topic: hooks}
`
	c, err := Parse("anyhook.yaml", []byte(src), env())
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"web": TypeHTTP, "events": TypeNATS, "queue": TypeRabbitMQ, "log": TypeKafka} {
		if got := c.Destinations[name].Type; got != want {
			t.Errorf("%s: type %q, want %q", name, got, want)
		}
	}
	if n := c.Destinations["events"].NATS; n == nil || n.Stream != "HOOKS" || n.Subject != "anyhook.stripe" {
		t.Errorf("nats block = %+v", n)
	}
	if out := string(c.Effective()); strings.Contains(out, "u:p@") || !strings.Contains(out, "type: kafka") {
		t.Errorf("effective config shows the broker password, or not the type:\n%s", out)
	}
}

// Each mistake of a kind names file, line and key.
func TestDestinationKindErrors(t *testing.T) {
	t.Parallel()
	src := `sources:
  stripe:
    provider: stripe
    secrets: [whsec_abc]
destinations:
  a:
    type: pull
    url: http://127.0.0.1:9000/
    sources: [stripe]
    auto_pause: {consecutive_failures: 5}
  b:
    type: nats
    url: http://127.0.0.1:9000/
    sources: [stripe]
    nats: {url: "http://127.0.0.1:4222", subject: "a.*"}
  c:
    type: kafka
    sources: [stripe]
    kafka: {brokers: [nohost], topic: "bad topic"}
    rabbitmq: {url: "amqp://127.0.0.1/"}
  d:
    type: rabbitmq
    sources: [stripe]
  e:
    url: http://127.0.0.1:9000/
    sources: [stripe]
    nats: {url: "nats://127.0.0.1:4222", subject: a, stream: S}
  f:
    type: carrier-pigeon
    sources: [stripe]
`
	_, err := Parse("anyhook.yaml", []byte(src), env())
	want := []string{
		`anyhook.yaml:8: destinations.a.url: is for type: http; a pull destination is not called`,
		`anyhook.yaml:10: destinations.a.auto_pause: is not for type: pull`,
		`anyhook.yaml:13: destinations.b.url: is for type: http; a nats destination's broker is destinations.b.nats.url`,
		`anyhook.yaml:15: destinations.b.nats.url: must be a nats:// or tls:// URL with a host`,
		`anyhook.yaml:15: destinations.b.nats.subject: must be a subject without wildcards`,
		`anyhook.yaml:15: destinations.b.nats.stream: required`,
		`anyhook.yaml:19: destinations.c.kafka.brokers[0]: must be host:port, not "nohost"`,
		`anyhook.yaml:19: destinations.c.kafka.topic: "bad topic" is not a Kafka topic name`,
		`anyhook.yaml:20: destinations.c.rabbitmq: is for type: rabbitmq, and this destination is type: kafka`,
		`anyhook.yaml:21: destinations.d.rabbitmq: required for type: rabbitmq`,
		`anyhook.yaml:27: destinations.e.nats: is for type: nats, and this destination is type: http`,
		`anyhook.yaml:29: destinations.f.type: must be http, nats, rabbitmq, kafka or pull, not "carrier-pigeon"`,
	}
	problems := List(err)
	var got []string
	for _, p := range problems {
		got = append(got, p.Error())
	}
	if len(problems) != len(want) {
		t.Fatalf("%d problems, want %d:\n%s", len(problems), len(want), strings.Join(got, "\n"))
	}
	for i, p := range got {
		if !strings.HasPrefix(p, want[i]) {
			t.Errorf("problem %d = %q, want %q…", i+1, p, want[i])
		}
	}
}
