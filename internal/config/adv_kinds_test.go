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
