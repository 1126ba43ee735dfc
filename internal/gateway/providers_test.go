package gateway_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
	"github.com/anyhook/anyhook/internal/tools/send"
)

const standardSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// providerCase is one provider as a source; timestamped says whether its
// scheme signs a time that the gateway checks.
var providerCases = []struct {
	name        string
	secret      string
	timestamped bool
	sendFlags   []string
}{
	{"stripe", "whsec_stripe", true, nil},
	{"github", "github-secret", false, nil},
	{"shopify", "shpss_secret", false, nil},
	{"standard", standardSecret, true, nil},
	{"slack", "slack-signing-secret", true, nil},
	{"hubspot", "hubspot-client-secret", true, nil},
	{"paddle", "pdl_ntfset_secret", true, nil},
	{"gitlab", "gitlab-token", false, nil},
	{"square", "square-signature-key", false, nil},
	{"twilio", "twilio-auth-token", false, nil},
	{"generic", "generic-secret", false, []string{"--signature-header", "X-Signature", "--prefix", "sha256="}},
}

// multiSetup runs a gateway with one source per provider (named after it)
// plus the given extra sources, all delivering to sk.
func multiSetup(t *testing.T, sk *sinktest.Sink, extraSources string) *env {
	t.Helper()
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\ndatabase: sqlite:anyhook.db\ndelivery: {poll_interval: 50ms}\nsources:\n")
	var names []string
	for _, pc := range providerCases {
		fmt.Fprintf(&b, "  %s:\n    provider: %s\n    secrets: [%q]\n", pc.name, pc.name, pc.secret)
		if pc.name == "twilio" || pc.name == "hubspot" || pc.name == "square" {
			fmt.Fprintf(&b, "    public_url: %%URL%%/webhooks/%s\n", pc.name)
		}
		if pc.name == "generic" {
			b.WriteString("    signature: {header: X-Signature, algorithm: sha256, encoding: hex, prefix: \"sha256=\"}\n    id: header:X-Request-Id\n")
		}
		names = append(names, pc.name)
	}
	b.WriteString(extraSources)
	for _, line := range strings.Split(extraSources, "\n") {
		if name, ok := strings.CutSuffix(line, ":"); ok && strings.HasPrefix(name, "  ") && !strings.HasPrefix(name, "   ") {
			names = append(names, strings.TrimSpace(name))
		}
	}
	fmt.Fprintf(&b, "destinations:\n  app:\n    url: %s/hooks\n    sources: [%s]\n    backoff: {initial: 10ms, max: 40ms}\n", sk.URL, strings.Join(names, ", "))
	base, g := gatewaytest.Start(t, b.String(), gateway.Options{})
	return &env{url: base, gw: g, store: g.Store(), sink: sk}
}

// runSend runs `anyhook send` and returns its exit status and output.
func runSend(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := send.Main(t.Context(), args, &out, &out)
	return code, out.String()
}

func (e *env) count(t *testing.T, source string) int {
	t.Helper()
	evs, _, err := e.store.ListEvents(t.Context(), store.EventFilter{Source: source, Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	return len(evs)
}

// Every provider through the real simulator and the real gateway:
// accepted, then duplicate; a wrong secret is refused and does not occupy
// the event id; a timestamp outside the tolerance is refused.
func TestEveryProviderEndToEnd(t *testing.T) {
	t.Parallel()
	e := multiSetup(t, sinktest.New(t), "")
	for _, pc := range providerCases {
		t.Run(pc.name, func(t *testing.T) {
			url := e.url + "/webhooks/" + pc.name
			base := append([]string{"--provider", pc.name, "--url", url}, pc.sendFlags...)
			id := "1001" // numeric: HubSpot ids are integers; the others take any text
			wrong := pc.secret + "-wrong"
			if pc.name == "standard" {
				wrong = "whsec_QmFkU2VjcmV0QmFkU2VjcmV0QmFkU2VjcmV0" // valid form, other key
			}

			code, out := runSend(t, append(base, "--secret", pc.secret, "--event-id", id, "--times", "2")...)
			if code != 0 || !strings.Contains(out, "accepted") || !strings.Contains(out, "duplicate") {
				t.Fatalf("send --times 2: exit %d\n%s", code, out)
			}
			// One event (HubSpot: one per batch item), whatever the times.
			first := e.count(t, pc.name)
			if first < 1 || (pc.name != "hubspot" && first != 1) {
				t.Fatalf("%d events after one event sent twice", first)
			}

			forgedID := "1002"
			code, out = runSend(t, append(base, "--secret", wrong, "--event-id", forgedID)...)
			if code != 1 || !strings.Contains(out, "400") {
				t.Fatalf("wrong secret: exit %d, want 1 with a 400\n%s", code, out)
			}
			if n := e.count(t, pc.name); n != first {
				t.Fatalf("a forged request was recorded: %d events, want %d", n, first)
			}
			code, out = runSend(t, append(base, "--secret", pc.secret, "--event-id", forgedID)...)
			if code != 0 || !strings.Contains(out, "accepted") {
				t.Fatalf("the genuine event after a forged one with its id: exit %d\n%s", code, out)
			}

			if pc.timestamped {
				code, out = runSend(t, append(base, "--secret", pc.secret, "--event-id", "1003", "--skew", "-10m")...)
				if code != 1 || !strings.Contains(out, "400") {
					t.Fatalf("timestamp 10m old: exit %d, want a 400\n%s", code, out)
				}
				code, out = runSend(t, append(base, "--secret", pc.secret, "--event-id", "1004", "--skew", "10m")...)
				if code != 1 || !strings.Contains(out, "400") {
					t.Fatalf("timestamp 10m ahead: exit %d, want a 400\n%s", code, out)
				}
			}
			if n := e.count(t, pc.name); n != 2*first {
				t.Fatalf("%d events, want %d: only the 2 genuine sends", n, 2*first)
			}
		})
	}
}

func hubspotBatch(t *testing.T, url string, eventIDs ...int) *http.Request {
	t.Helper()
	var items []string
	for _, id := range eventIDs {
		items = append(items, fmt.Sprintf(`{"eventId":%d,"subscriptionId":7,"portalId":99,"appId":1,"occurredAt":%d,"subscriptionType":"contact.propertyChange","attemptNumber":0,"objectId":%d,"propertyName":"email","propertyValue":"a@example.com","changeSource":"CRM"}`, id, 1700000000000+id, 500+id))
	}
	body := []byte("[" + strings.Join(items, ",") + "]")
	pr := &provider.Request{Method: "POST", URL: url, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
	if err := provider.Sign("hubspot", "hubspot-client-secret", pr, time.Now()); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
	req.Header = pr.Header
	return req
}

func TestHubSpotBatches(t *testing.T) {
	t.Parallel()
	e := multiSetup(t, sinktest.New(t), "")
	url := e.url + "/webhooks/hubspot"
	statuses := func(req *http.Request) []string {
		t.Helper()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var a struct {
			Status string
			Events []struct{ Status, ID string }
		}
		if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != 200 {
			t.Fatalf("batch: %d, %v", resp.StatusCode, err)
		}
		var out []string
		for _, ev := range a.Events {
			out = append(out, ev.Status)
		}
		return out
	}
	if got := statuses(hubspotBatch(t, url, 1, 2, 3)); strings.Join(got, ",") != "accepted,accepted,accepted" {
		t.Fatalf("first batch: %v", got)
	}
	if got := statuses(hubspotBatch(t, url, 1, 2, 3)); strings.Join(got, ",") != "duplicate,duplicate,duplicate" {
		t.Fatalf("same batch again: %v", got)
	}
	if got := statuses(hubspotBatch(t, url, 3, 4)); strings.Join(got, ",") != "duplicate,accepted" {
		t.Fatalf("overlapping batch: %v", got)
	}
	if n := e.count(t, "hubspot"); n != 4 {
		t.Fatalf("%d events, want 4", n)
	}
	evs, _, _ := e.store.ListEvents(t.Context(), store.EventFilter{Source: "hubspot"})
	for _, ev := range evs {
		if !bytes.HasPrefix(ev.Body, []byte(`{"eventId":`)) || !bytes.HasSuffix(ev.Body, []byte(`}`)) {
			t.Fatalf("a batch item's event holds %q, want the item's own bytes", ev.Body)
		}
	}
}

// Staleness through the gateway: an older version of an object is
// recorded and, by default (every provider), delivered with
// X-AnyHook-Stale: true; an equal version is delivered as usual; a source
// that says stale: skip skips it.
func TestStaleEvents(t *testing.T) {
	t.Parallel()
	sk := sinktest.New(t)
	e := multiSetup(t, sk, "  orders:\n    provider: generic\n    signature: none\n    id: header:X-Request-Id\n    ordering: {object: json:order.id, version: json:order.updated_at, stale: skip}\n")
	shop := []string{"--provider", "shopify", "--secret", "shpss_secret", "--url", e.url + "/webhooks/shopify", "--object", "42"}
	for _, v := range []string{"2026-11-30T10:00:00Z", "2026-11-30T09:00:00Z", "2026-11-30T10:00:00Z"} {
		if code, out := runSend(t, append(shop, "--version", v)...); code != 0 {
			t.Fatalf("send: %d %s", code, out)
		}
	}
	evs, _, _ := e.store.ListEvents(t.Context(), store.EventFilter{Source: "shopify"})
	if len(evs) != 3 {
		t.Fatalf("%d shopify events, want 3 (stale ones are recorded too)", len(evs))
	}
	for _, ev := range evs {
		e.waitStatus(t, ev.ID, anyhook.StatusDelivered)
		if ev.Stale != (ev.Version == "2026-11-30T09:00:00Z") {
			t.Errorf("shopify event at %s: stale %v", ev.Version, ev.Stale)
		}
	}
	gen := []string{"--provider", "generic", "--url", e.url + "/webhooks/orders", "--object", "o-1"}
	for _, v := range []string{"5", "4"} {
		if code, out := runSend(t, append(gen, "--version", v)...); code != 0 {
			t.Fatalf("send: %d %s", code, out)
		}
	}
	orders, _, _ := e.store.ListEvents(t.Context(), store.EventFilter{Source: "orders"})
	want := map[string]anyhook.DeliveryStatus{"5": anyhook.StatusDelivered, "4": anyhook.StatusSkipped}
	for _, ev := range orders {
		e.waitStatus(t, ev.ID, want[ev.Version])
	}
	stale := testwait.Value(t, "a delivery flagged stale", func() ([]http.Header, error) {
		var stale []http.Header
		for _, r := range sk.Requests() {
			if r.Header.Get("X-AnyHook-Stale") == "true" {
				stale = append(stale, r.Header)
			}
		}
		if len(stale) == 0 {
			return nil, errors.New("none yet")
		}
		return stale, nil
	})
	if len(stale) != 1 || stale[0].Get("X-AnyHook-Source") != "shopify" || stale[0].Get("X-AnyHook-Version") != "2026-11-30T09:00:00Z" ||
		stale[0].Get("X-AnyHook-Object") == "" {
		t.Fatalf("deliveries flagged stale: %v, want the shopify one of 09:00 (orders skips its stale one)", stale)
	}
}

// TestStripeLateEventDeliveredByDefault: Stripe event
// types share an object, so a late payment_intent.succeeded can be older
// than the payment_intent.updated already seen. By default it is delivered,
// flagged X-AnyHook-Stale: true, never silently skipped.
func TestStripeLateEventDeliveredByDefault(t *testing.T) {
	t.Parallel()
	sk := sinktest.New(t)
	e := multiSetup(t, sk, "")
	stripe := []string{"--provider", "stripe", "--secret", "whsec_stripe", "--url", e.url + "/webhooks/stripe", "--object", "pi_1"}
	for i, created := range []string{"1700000200", "1700000100"} { // the updated, then the late succeeded
		if code, out := runSend(t, append(stripe, "--version", created, "--event-id", fmt.Sprintf("evt_late_%d", i))...); code != 0 {
			t.Fatalf("send: %d %s", code, out)
		}
	}
	evs, _, _ := e.store.ListEvents(t.Context(), store.EventFilter{Source: "stripe"})
	if len(evs) != 2 {
		t.Fatalf("%d stripe events, want 2", len(evs))
	}
	for _, ev := range evs {
		e.waitStatus(t, ev.ID, anyhook.StatusDelivered)
	}
	late := 0
	for _, r := range sk.Requests() {
		if r.Header.Get("X-AnyHook-Source") == "stripe" && r.Header.Get("X-AnyHook-Stale") == "true" {
			late++
			if r.Header.Get("X-AnyHook-Event-Id") != "evt_late_1" {
				t.Errorf("flagged stale: %s, want evt_late_1", r.Header.Get("X-AnyHook-Event-Id"))
			}
		}
	}
	if late != 1 {
		t.Fatalf("%d stripe deliveries flagged stale, want 1", late)
	}
}

// GitLab's X-Gitlab-Token is the source's secret itself: checked, then
// neither stored (so not shown by the API or dashboard) nor forwarded.
func TestGitLabTokenNeitherStoredNorForwarded(t *testing.T) {
	t.Parallel()
	e := multiSetup(t, sinktest.New(t), "")
	if code, out := runSend(t, "--provider", "gitlab", "--secret", "gitlab-token", "--url", e.url+"/webhooks/gitlab"); code != 0 {
		t.Fatalf("send: %d %s", code, out)
	}
	evs, _, err := e.store.ListEvents(t.Context(), store.EventFilter{Source: "gitlab"})
	if err != nil || len(evs) != 1 {
		t.Fatalf("events = %d, %v", len(evs), err)
	}
	ev := e.waitStatus(t, evs[0].ID, anyhook.StatusDelivered)
	stored, _ := e.store.Event(t.Context(), ev.EventID)
	if v := stored.Header.Get("X-Gitlab-Token"); v != "" || stored.Header.Get("X-Gitlab-Event") == "" {
		t.Fatalf("stored headers: X-Gitlab-Token %q (want none), X-Gitlab-Event %q", v, stored.Header.Get("X-Gitlab-Event"))
	}
	for _, r := range e.sink.Requests() {
		if r.Header.Get("X-Gitlab-Token") != "" {
			t.Fatal("the GitLab token was forwarded to the destination")
		}
	}
}
