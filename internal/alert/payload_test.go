package alert

import (
	"encoding/json"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// full is an alert with every field set, as the gateway sends for a dead
// delivery with dashboard_url configured.
func full() message {
	return message{Alert: Alert{
		Kind: DeliveryDead, Destination: "billing", Source: "stripe", EventID: "e1", ProviderEventID: "evt_1",
		DeliveryID: "d1", Message: "dead after 8 attempts", Time: time.Unix(1_700_000_000, 0).UTC(),
		URL: "https://anyhook.example.com/events/e1",
	}, More: 2}
}

// incidentFull is an incident's alert with every field it has set.
func incidentFull() message {
	return message{Alert: Alert{
		Kind: IncidentOpened, Destination: "billing", IncidentID: "i1", Message: "refusing connections", Time: time.Unix(1_700_000_000, 0).UTC(),
		URL: "https://anyhook.example.com/incidents/i1",
	}}
}

// The webhook JSON is exactly what docs/operations.md and
// docs/configuration.md say it is: the same keys, no more, no fewer (the
// example is a dead delivery's; the lists, every alert's).
func TestWebhookPayloadIsDocumented(t *testing.T) {
	t.Parallel()
	keysOf := func(m message) []string {
		b, err := webhookChannel{}.body(m)
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		return slices.Sorted(maps.Keys(got))
	}
	dead := keysOf(full())
	keys := slices.Compact(slices.Sorted(slices.Values(append(keysOf(incidentFull()), dead...))))

	ops, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)### The alert payload\n.*?```json\n(.*?)```(.*?)\n\n[A-Z]").FindSubmatch(ops)
	if m == nil {
		t.Fatal("docs/operations.md has no alert payload example and table")
	}
	var doc map[string]any
	if err := json.Unmarshal(m[1], &doc); err != nil {
		t.Fatalf("the documented payload is not JSON: %v", err)
	}
	if d := slices.Sorted(maps.Keys(doc)); !slices.Equal(d, dead) {
		t.Errorf("docs/operations.md example has keys %v, the webhook sends %v", d, dead)
	}
	var table []string
	for _, row := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|").FindAllSubmatch(m[2], -1) {
		table = append(table, string(row[1]))
	}
	if slices.Sort(table); !slices.Equal(table, keys) {
		t.Errorf("docs/operations.md field table lists %v, the webhook sends %v", table, keys)
	}

	conf, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	c := regexp.MustCompile("POSTs each alert as JSON: `\\{([^}]*)\\}`").FindSubmatch(conf)
	if c == nil {
		t.Fatal("docs/configuration.md does not list the webhook's keys")
	}
	var listed []string
	for _, k := range strings.Split(string(c[1]), ",") {
		listed = append(listed, strings.Trim(strings.TrimSpace(k), `"`))
	}
	if slices.Sort(listed); !slices.Equal(listed, keys) {
		t.Errorf("docs/configuration.md lists %v, the webhook sends %v", listed, keys)
	}
}

// Slack and PagerDuty carry the provider's event id and the link too.
func TestSlackAndPagerDutyCarryIDsAndLink(t *testing.T) {
	t.Parallel()
	m := full()
	b, err := slackChannel{}.body(m)
	if err != nil {
		t.Fatal(err)
	}
	var slack struct{ Text string }
	json.Unmarshal(b, &slack)
	for _, want := range []string{"source stripe", "provider event evt_1", "<https://anyhook.example.com/events/e1|open in the dashboard>"} {
		if !strings.Contains(slack.Text, want) {
			t.Errorf("slack text %q lacks %q", slack.Text, want)
		}
	}
	b, err = pagerDutyChannel{routingKey: "k"}.body(m)
	if err != nil {
		t.Fatal(err)
	}
	var pd pdEvent
	if err := json.Unmarshal(b, &pd); err != nil {
		t.Fatal(err)
	}
	if len(pd.Links) != 1 || pd.Links[0].Href != m.URL || pd.Payload.CustomDetails["provider_event_id"] != "evt_1" || pd.Payload.CustomDetails["url"] != m.URL {
		t.Errorf("pagerduty event %+v, payload %+v: want the link and provider_event_id", pd, pd.Payload)
	}
	// Without a URL, no link.
	m.URL = ""
	b, _ = slackChannel{}.body(m)
	if strings.Contains(string(b), "dashboard") {
		t.Errorf("slack body %s links nowhere", b)
	}
}
