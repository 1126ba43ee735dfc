package config

import (
	"strings"
	"testing"
)

// ADVERSARY (issue 35): headers, auth, tls and proxy are how an HTTP
// destination is reached; the broker publishers never read them. On a
// broker destination they must be refused with the key (as url and
// tls_insecure_skip_verify are), not accepted and silently ignored: a
// user who writes auth: {bearer: ...} or tls: {ca_file: ...} for a NATS
// or RabbitMQ destination believes the broker connection uses them.
func TestAdvBrokerDestinationRefusesHTTPOnlyKeys(t *testing.T) {
	t.Parallel()
	src := `sources:
  stripe:
    provider: stripe
    secrets: [whsec_abc]
destinations:
  events:
    type: nats
    sources: [stripe]
    nats: {url: "nats://127.0.0.1:14222", subject: anyhook.stripe, stream: HOOKS}
    headers: {X-Api-Key: some-long-key}
    auth: {bearer: some-long-token}
    proxy: http://127.0.0.1:3128
`
	_, err := Parse("anyhook.yaml", []byte(src), env())
	if err == nil {
		t.Fatal("a nats destination with headers, auth and proxy was accepted: the publisher ignores all three")
	}
	for _, key := range []string{"destinations.events.headers", "destinations.events.auth", "destinations.events.proxy"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error does not name %s:\n%v", key, err)
		}
	}
}

// ADVERSARY (issue 35, secrets in `anyhook config` output): a broker URL
// is printed with its password redacted, but NATS's token form
// (nats://TOKEN@host, the user name is the credential) was printed as
// is, and so was every URL after the first of a comma-separated list,
// which checkBrokerURL accepts.
func TestAdvBrokerURLRedacted(t *testing.T) {
	t.Parallel()
	src := `sources:
  stripe:
    provider: stripe
    secrets: [whsec_abc]
destinations:
  token:
    type: nats
    sources: [stripe]
    nats: {url: "nats://NatsTokenSecret9@127.0.0.1:14222", subject: a.b, stream: HOOKS}
  cluster:
    type: nats
    sources: [stripe]
    nats: {url: "nats://a:NatsPwFirst9@127.0.0.1:14222,nats://a:NatsPwSecond9@127.0.0.1:14223", subject: a.b, stream: HOOKS}
`
	c, err := Parse("anyhook.yaml", []byte(src), env())
	if err != nil {
		t.Fatal(err)
	}
	out := string(c.Effective())
	for _, s := range []string{"NatsTokenSecret9", "NatsPwFirst9", "NatsPwSecond9"} {
		if strings.Contains(out, s) {
			t.Errorf("the effective config shows %s:\n%s", s, out)
		}
	}
	if !strings.Contains(out, "127.0.0.1:14223") {
		t.Errorf("the second server is not shown:\n%s", out)
	}
}

// ADVERSARY (issue 35): checkBrokerURL accepts comma-separated URLs for
// rabbitmq as for nats, but amqp091 takes one URL: the rest becomes the
// vhost (",amqp://user:PASSWORD@host2/"), every publish fails, and the
// broker's "vhost ... not found" quotes the second password into the
// attempt's error, the logs and the alerts. One URL only.
func TestAdvRabbitMQURLIsOne(t *testing.T) {
	t.Parallel()
	src := `sources:
  stripe:
    provider: stripe
    secrets: [whsec_abc]
destinations:
  queue:
    type: rabbitmq
    sources: [stripe]
    rabbitmq: {url: "amqp://u:p@127.0.0.1:5672/,amqp://u:SecondPw9@127.0.0.1:5673/", routing_key: hooks}
`
	_, err := Parse("anyhook.yaml", []byte(src), env())
	if err == nil || !strings.Contains(err.Error(), "destinations.queue.rabbitmq.url") {
		t.Fatalf("a rabbitmq url list: %v, want an error naming destinations.queue.rabbitmq.url", err)
	}
	if strings.Contains(err.Error(), "SecondPw9") {
		t.Errorf("the error quotes the password: %v", err)
	}
}
