package incident

import (
	"testing"

	"github.com/anyhook/anyhook"
)

func TestKindOf(t *testing.T) {
	for _, c := range []struct {
		a    anyhook.Attempt
		want string
	}{
		{anyhook.Attempt{Outcome: anyhook.OutcomeNotSent, Error: "Post to destination billing: dial tcp: lookup nowhere.invalid: no such host"}, KindDNS},
		{anyhook.Attempt{Outcome: anyhook.OutcomeNotSent, Error: "Post to destination billing: dial tcp 127.0.0.1:9: connect: connection refused"}, KindRefused},
		{anyhook.Attempt{Outcome: anyhook.OutcomeNotSent, Error: "Post to destination billing: tls: failed to verify certificate: x509: certificate signed by unknown authority"}, KindTLS},
		{anyhook.Attempt{Outcome: anyhook.OutcomeNotSent, Error: "Post to destination billing: dial tcp 10.0.0.1:443: i/o timeout"}, KindConnect},
		{anyhook.Attempt{Outcome: anyhook.OutcomeNotSent, Error: "Post to destination billing: network is unreachable"}, KindConnect},
		{anyhook.Attempt{Outcome: anyhook.OutcomeNotSent, Error: "oauth2 token for destination billing: Post to the oauth2 token endpoint: dial tcp 127.0.0.1:1: connect: connection refused"}, KindToken},
		{anyhook.Attempt{Outcome: anyhook.OutcomeNotSent, Error: "probe of a destination paused automatically (auto_pause), not counted towards max_attempts: oauth2 token for destination billing: oauth2 token endpoint answered HTTP 401 (invalid_client)"}, KindToken},
		{anyhook.Attempt{Outcome: anyhook.OutcomeNoAnswer, Error: "timeout after 10s"}, KindTimeout},
		{anyhook.Attempt{Outcome: anyhook.OutcomeNoAnswer, Error: "Post to destination billing: read: connection reset by peer"}, KindReset},
		{anyhook.Attempt{Outcome: anyhook.OutcomeNoAnswer, Error: "Post to destination billing: EOF"}, KindReset},
		{anyhook.Attempt{Outcome: anyhook.OutcomeAnswered, StatusCode: 500, Error: "HTTP 500"}, "5xx"},
		{anyhook.Attempt{Outcome: anyhook.OutcomeAnswered, StatusCode: 503}, "5xx"},
		{anyhook.Attempt{Outcome: anyhook.OutcomeAnswered, StatusCode: 404}, "4xx"},
		{anyhook.Attempt{Outcome: anyhook.OutcomeAnswered, StatusCode: 429}, "429"},
		{anyhook.Attempt{Outcome: anyhook.OutcomeAnswered, StatusCode: 410}, "410"},
		{anyhook.Attempt{Outcome: anyhook.OutcomeAnswered, StatusCode: 302}, "3xx"},
		{anyhook.Attempt{Outcome: anyhook.OutcomeUnknown}, KindUnknown},
		{anyhook.Attempt{}, KindUnknown},
		// The destination's name is in the text: it must not choose the kind.
		{anyhook.Attempt{Outcome: anyhook.OutcomeNotSent, Error: "Post to destination certificates: network is unreachable"}, KindConnect},
		{anyhook.Attempt{Outcome: anyhook.OutcomeNoAnswer, Error: "Post to destination timeouts: read: connection reset by peer"}, KindReset},
		{anyhook.Attempt{Outcome: anyhook.OutcomeNotSent, Error: "probe of a destination paused automatically (auto_pause), not counted towards max_attempts: Post to destination certificate-deadline: dial tcp 10.0.0.1:443: connect: network is unreachable"}, KindConnect},
		// Broker destinations: the publish's reason (internal/broker) names the kind.
		{anyhook.Attempt{Outcome: anyhook.OutcomeNotSent, Error: "publish to destination orders: broker unreachable: dial tcp 127.0.0.1:4222: connect: connection refused"}, KindBrokerUnreachable},
		{anyhook.Attempt{Outcome: anyhook.OutcomeAnswered, Error: "publish to destination orders: broker nack: the broker did not take the message"}, KindBrokerNack},
		{anyhook.Attempt{Outcome: anyhook.OutcomeAnswered, Error: "publish to destination orders: unroutable: no stream takes subject x"}, KindUnroutable},
		{anyhook.Attempt{Outcome: anyhook.OutcomeAnswered, Error: "refused by pull consumer alice: forward failed: dial tcp 127.0.0.1:3000: connect: connection refused"}, KindRefusedByConsumer},
		{anyhook.Attempt{Outcome: anyhook.OutcomeAnswered, Error: "refused by pull consumer alice: the local handler answered 400"}, KindRefusedByConsumer},
		{anyhook.Attempt{Outcome: anyhook.OutcomeNoAnswer, Error: "publish to destination orders: no ack: timeout after 2s"}, KindTimeout},
		{anyhook.Attempt{Outcome: anyhook.OutcomeNoAnswer, Error: "publish to destination orders: no ack: connection closed"}, KindReset},
		{anyhook.Attempt{Outcome: anyhook.OutcomeNotSent, Error: "probe of a destination paused automatically (auto_pause), not counted towards max_attempts: publish to destination unroutable: broker unreachable: nats: no servers available for connection"}, KindBrokerUnreachable},
	} {
		if got := KindOf(c.a); got != c.want {
			t.Errorf("KindOf(%+v) = %q; want %q", c.a, got, c.want)
		}
	}
}
