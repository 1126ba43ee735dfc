package alert

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/anyhook/anyhook/internal/loopback"
	"github.com/anyhook/anyhook/internal/store"
)

// channel is one configured destination of alerts.
type channel interface {
	name() string // for logs: never the URL, which may be a secret
	// key names the channel in the outbox, across restarts and
	// processes: its kind and a hash of where it posts (never the URL or
	// routing key themselves).
	key() string
	url() string
	body(m message) ([]byte, error)
	// credential: the URL or the body is a secret (plain http:// only
	// to a loopback address).
	credential() bool
}

// Channel is one place alerts go, as the config's alerts[i] says; exactly
// one field is set.
type Channel struct {
	Webhook   string     // the alert as JSON to this URL
	Slack     string     // a Slack incoming-webhook URL
	PagerDuty *PagerDuty // a PagerDuty Events v2 integration
}

// PagerDuty is an Events v2 channel.
type PagerDuty struct {
	RoutingKey string // required: the integration key
	URL        string // the Events v2 endpoint; "" is PagerDutyURL
}

// PagerDutyURL is the default Events v2 endpoint.
const PagerDutyURL = "https://events.pagerduty.com/v2/enqueue"

func newChannel(i int, a Channel) (channel, error) {
	switch {
	case a.Webhook != "" && a.Slack == "" && a.PagerDuty == nil:
		return webhookChannel{n: "webhook#" + strconv.Itoa(i), u: a.Webhook, k: channelKey("webhook", a.Webhook)}, nil
	case a.Slack != "" && a.Webhook == "" && a.PagerDuty == nil:
		return slackChannel{n: "slack#" + strconv.Itoa(i), u: a.Slack, k: channelKey("slack", a.Slack)}, nil
	case a.PagerDuty != nil && a.Webhook == "" && a.Slack == "":
		if a.PagerDuty.RoutingKey == "" {
			return nil, fmt.Errorf("alerts[%d].pagerduty.routing_key: required", i)
		}
		u := a.PagerDuty.URL
		if u == "" {
			u = PagerDutyURL
		}
		return pagerDutyChannel{n: "pagerduty#" + strconv.Itoa(i), u: u, routingKey: a.PagerDuty.RoutingKey,
			k: channelKey("pagerduty", u, a.PagerDuty.RoutingKey)}, nil
	}
	return nil, fmt.Errorf("alerts[%d]: exactly one of webhook, slack or pagerduty must be set", i)
}

// channelKey is kind and the first 16 hex digits of the SHA-256 of parts:
// the same channel gets the same key in every process, and a changed URL
// is a new channel.
func channelKey(kind string, parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return kind + ":" + hex.EncodeToString(h.Sum(nil))[:16]
}

// post sends m to s once.
func (n *Notifier) post(ctx context.Context, s channel, m message) error {
	body, err := s.body(m)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url(), bytes.NewReader(body))
	if err != nil {
		return errors.New("invalid channel URL")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", n.ua)
	c := n.client
	if s.credential() && loopback.Plain(s.url()) {
		c = n.plain
	}
	resp, err := c.Do(req)
	if err != nil {
		return safeError(err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // let the connection be reused
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		detail := strings.Join(strings.Fields(strings.ToValidUTF8(string(snippet), "")), " ")
		if detail != "" {
			return fmt.Errorf("status %d: %s", resp.StatusCode, detail)
		}
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

// webhookChannel POSTs the alert as JSON.
type webhookChannel struct{ n, u, k string }

func (s webhookChannel) name() string { return s.n }
func (s webhookChannel) key() string  { return s.k }
func (s webhookChannel) url() string  { return s.u }

// credential: a webhook channel's URL may be plain http anywhere, as a
// destination's may.
func (s webhookChannel) credential() bool { return false }

// webhookBody is the JSON a generic webhook receives.
type webhookBody struct {
	Alert
	More int    `json:"more"` // alerts of the same kind and destination folded into this one
	Text string `json:"text"` // the one-line human rendering
}

func (s webhookChannel) body(m message) ([]byte, error) {
	return json.Marshal(webhookBody{Alert: m.Alert, More: m.More, Text: m.text()})
}

// slackChannel posts to a Slack incoming webhook.
type slackChannel struct{ n, u, k string }

func (s slackChannel) name() string { return s.n }
func (s slackChannel) key() string  { return s.k }
func (s slackChannel) url() string  { return s.u }

// credential: a Slack incoming-webhook URL is its credential.
func (s slackChannel) credential() bool { return true }

// slackEscape escapes the three characters Slack's mrkdwn treats as
// control characters.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

func (s slackChannel) body(m message) ([]byte, error) {
	text := slackEscape.Replace(m.text())
	if m.URL != "" && !strings.ContainsAny(m.URL, "<>|") {
		text += " <" + m.URL + "|open in the dashboard>"
	}
	return json.Marshal(struct {
		Text string `json:"text"`
	}{text})
}

// pagerDutyChannel sends PagerDuty Events API v2 events: an AnyHook
// incident is a PagerDuty incident keyed by its id (triggered when it
// opens or escalates, resolved with it); any other alert triggers the
// incident of its (kind, destination).
type pagerDutyChannel struct{ n, u, routingKey, k string }

func (s pagerDutyChannel) name() string { return s.n }
func (s pagerDutyChannel) key() string  { return s.k }
func (s pagerDutyChannel) url() string  { return s.u }

// credential: the body carries the routing key.
func (s pagerDutyChannel) credential() bool { return true }

type pdEvent struct {
	RoutingKey  string     `json:"routing_key"`
	EventAction string     `json:"event_action"` // trigger | resolve
	DedupKey    string     `json:"dedup_key"`
	Payload     *pdPayload `json:"payload,omitempty"`
	Client      string     `json:"client,omitempty"`
	Links       []pdLink   `json:"links,omitempty"`
}

type pdLink struct {
	Href string `json:"href"`
	Text string `json:"text"`
}

type pdPayload struct {
	Summary       string         `json:"summary"`
	Source        string         `json:"source"`
	Severity      string         `json:"severity"` // critical | error | warning | info
	Timestamp     string         `json:"timestamp,omitempty"`
	Component     string         `json:"component,omitempty"`
	Group         string         `json:"group,omitempty"`
	Class         string         `json:"class,omitempty"`
	CustomDetails map[string]any `json:"custom_details,omitempty"`
}

// pdDedupKey names the incident of (kind, destination).
func pdDedupKey(kind, destination string) string {
	k := "anyhook/" + kind
	if destination != "" {
		k += "/" + destination
	}
	return truncate(k, 255)
}

// body is m's event: the action and incident key its outbox row carries,
// else those raised gives it.
func (s pagerDutyChannel) body(m message) ([]byte, error) {
	action, dedup := m.Action, m.DedupKey
	if action == "" {
		ra, _ := raised(m.Alert)
		action, dedup = ra.Action, ra.DedupKey
	}
	if action == store.AlertResolve {
		return json.Marshal(pdEvent{
			RoutingKey:  s.routingKey,
			EventAction: "resolve",
			DedupKey:    truncate(dedup, 255),
			Client:      "AnyHook",
		})
	}
	severity := "error"
	switch m.Kind {
	case DeliveryHeld:
		severity = "warning"
	case LedgerVerificationFailed:
		severity = "critical"
	}
	details := map[string]any{"kind": m.Kind}
	for k, v := range map[string]string{
		"destination": m.Destination, "source": m.Source, "event_id": m.EventID,
		"provider_event_id": m.ProviderEventID, "delivery_id": m.DeliveryID, "incident_id": m.IncidentID, "message": m.Message, "url": m.URL,
	} {
		if v != "" {
			details[k] = v
		}
	}
	if m.More > 0 {
		details["more"] = m.More
	}
	var links []pdLink
	if m.URL != "" {
		text := "the event in the AnyHook dashboard"
		if m.IncidentID != "" {
			text = "the incident in the AnyHook dashboard"
		}
		links = []pdLink{{Href: m.URL, Text: text}}
	}
	return json.Marshal(pdEvent{
		RoutingKey:  s.routingKey,
		EventAction: "trigger",
		DedupKey:    truncate(dedup, 255),
		Client:      "AnyHook",
		Links:       links,
		Payload: &pdPayload{
			Summary:       truncate(m.text(), 1024),
			Source:        "anyhook",
			Severity:      severity,
			Timestamp:     m.Time.UTC().Format(time.RFC3339Nano),
			Component:     m.Destination,
			Group:         m.Source,
			Class:         m.Kind,
			CustomDetails: details,
		},
	})
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
