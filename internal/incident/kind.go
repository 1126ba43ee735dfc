// Package incident groups failing deliveries into incidents (SPEC §9,
// docs/operations.md "Incidents"): KindOf names how an attempt failed,
// and a Recorder feeds the engine's attempts to the store in batches,
// resolves and escalates on a timer, and tells the alerts of each change.
package incident

import (
	"strconv"
	"strings"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/broker"
)

// Failure kinds of attempts whose request was not sent, or sent without
// an answer; an answered attempt's kind is its status class ("5xx",
// "4xx", "3xx") or, for statuses that call for different action, the
// status itself (SpecificStatuses).
const (
	KindDNS     = "dns"     // the destination's name did not resolve
	KindRefused = "refused" // the connection was refused
	KindTLS     = "tls"     // the TLS handshake or certificate failed
	KindConnect = "connect" // not sent for another reason
	KindToken   = "token"   // not sent: no OAuth2 token could be had for it
	KindTimeout = "timeout" // sent, no answer within the timeout
	KindReset   = "reset"   // sent, then the connection broke
	KindUnknown = "unknown" // an attempt without an outcome

	// Broker destinations (nats, rabbitmq, kafka); a publish that timed
	// out waiting for the ack is KindTimeout, one whose connection broke
	// before the ack KindReset.
	KindBrokerUnreachable = "broker_unreachable" // no connection to the broker (not sent)
	KindBrokerNack        = "broker_nack"        // the broker refused the message
	KindUnroutable        = "unroutable"         // no queue, stream or topic took it
	// KindRefusedByConsumer: a pull destination's consumer nacked the
	// lease (its handler failed, or it could not reach it).
	KindRefusedByConsumer = "consumer_refused"
)

// SpecificStatuses are the statuses an incident keeps apart from their
// class: 429 (the destination asks us to slow down: a rate, not an
// outage) and 410 (the endpoint is gone for good: a configuration to
// change, not a wait).
var SpecificStatuses = []int{429, 410}

// KindOf names how a failed attempt failed. The error texts are those of
// the delivery engine (internal/delivery) over Go's net/http: they are
// stored with the attempt, so an attempt read back classifies alike.
func KindOf(a anyhook.Attempt) string {
	e := strings.ToLower(a.Error)
	// "… to destination NAME: cause": the name (letters, digits, '_',
	// '-', '.') is the operator's and must not choose the kind (a
	// destination called "certificates" is not failing TLS).
	if _, rest, ok := strings.Cut(e, " to destination "); ok {
		if _, cause, ok := strings.Cut(rest, ": "); ok {
			e = cause
		}
	}
	// A publish's error starts with its reason (internal/broker); a pull
	// consumer's nack with who refused (delivery.Engine.Nack).
	switch {
	case strings.HasPrefix(e, "refused by pull consumer "):
		return KindRefusedByConsumer
	case strings.HasPrefix(e, broker.Unreachable+":"):
		return KindBrokerUnreachable
	case strings.HasPrefix(e, broker.Nack+":"):
		return KindBrokerNack
	case strings.HasPrefix(e, broker.Unroutable+":"):
		return KindUnroutable
	}
	switch a.Outcome {
	case anyhook.OutcomeAnswered:
		for _, s := range SpecificStatuses {
			if a.StatusCode == s {
				return strconv.Itoa(s)
			}
		}
		if a.StatusCode >= 100 && a.StatusCode < 600 {
			return strconv.Itoa(a.StatusCode/100) + "xx"
		}
		return KindUnknown
	case anyhook.OutcomeNotSent:
		switch {
		case strings.Contains(e, "oauth2 token for destination "):
			// The token endpoint failed, not the destination: its own
			// way of failing, whatever the endpoint's error says.
			return KindToken
		case strings.Contains(e, "no such host"), strings.Contains(e, "lookup "), strings.Contains(e, "server misbehaving"):
			return KindDNS
		case strings.Contains(e, "connection refused"):
			return KindRefused
		case strings.Contains(e, "tls:"), strings.Contains(e, "x509:"), strings.Contains(e, "certificate"):
			return KindTLS
		}
		return KindConnect // a dial that timed out, an unreachable network, …
	case anyhook.OutcomeNoAnswer:
		if strings.Contains(e, "timeout") || strings.Contains(e, "deadline exceeded") {
			return KindTimeout
		}
		return KindReset
	}
	return KindUnknown
}

// Describe says a kind in words, for alerts and pages.
func Describe(kind string) string {
	switch kind {
	case KindDNS:
		return "DNS lookup failing (not sent)"
	case KindRefused:
		return "refusing connections (not sent)"
	case KindTLS:
		return "TLS failing (not sent)"
	case KindConnect:
		return "cannot connect (not sent)"
	case KindToken:
		return "no OAuth2 token from its token_url (not sent)"
	case KindTimeout:
		return "timing out (sent, no answer: the handler may have run)"
	case KindReset:
		return "dropping connections (sent, no answer: the handler may have run)"
	case "429":
		return "answering 429 Too Many Requests"
	case "410":
		return "answering 410 Gone"
	case KindBrokerUnreachable:
		return "broker unreachable (not sent)"
	case KindBrokerNack:
		return "broker refusing messages (nack)"
	case KindUnroutable:
		return "messages unroutable: no queue, stream or topic takes them"
	case KindUnknown:
		return "failing (outcome unknown)"
	}
	if strings.HasSuffix(kind, "xx") {
		return "answering " + kind
	}
	return "failing: " + kind
}
