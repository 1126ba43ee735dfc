package gateway_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
)

// TestFilters: each destination's filter decides, at ingest, which events
// it gets; the sink sees the event type; a filter that fails on an event
// routes nothing there and the provider still gets 200; the API shows the
// type and where the event was not routed; a named replay ignores the
// filter, a replay without one respects it unless told otherwise.
func TestFilters(t *testing.T) {
	t.Parallel()
	sk := sinktest.New(t)
	yaml := testTop + fmt.Sprintf(`sources:
  stripe:
    provider: stripe
    secrets: [%[1]s]
destinations:
  billing:
    url: %[2]s/billing
    sources: [stripe]
    filter: >-
      type.startsWith("invoice.") ||
      (type == "charge.refunded" && body.data.object.amount > 10000)
  audit:
    url: %[2]s/audit
    sources: [stripe]
  broken:
    url: %[2]s/broken
    sources: [stripe]
    filter: body.data.object.missing > 1
`, stripeSecret, sk.URL)
	base, g := gatewaytest.Start(t, yaml, gateway.Options{})
	send := func(id, typ string, amount int) string {
		body := fmt.Appendf(nil, `{"id":%q,"object":"event","type":%q,"created":1700000000,"data":{"object":{"id":"ch_%s","amount":%d}}}`, id, typ, id, amount)
		a := do(t, stripeRequest(t, base+"/webhooks/stripe", stripeSecret, body, time.Now()))
		if a.Code != 200 || a.Status != "accepted" {
			t.Fatalf("%s: %+v, want 200 accepted", id, a)
		}
		return a.ID
	}
	invoice := send("evt_inv", "invoice.paid", 4900)
	big := send("evt_big", "charge.refunded", 25000)
	small := send("evt_small", "charge.refunded", 500)
	intent := send("evt_pi", "payment_intent.succeeded", 100)

	// audit gets all four, billing two; broken none.
	got := sk.Wait(t, 6)
	byPath := map[string][]string{}
	for _, r := range got {
		byPath[r.URL.Path] = append(byPath[r.URL.Path], r.Header.Get("X-AnyHook-Event-Id")+" "+r.Header.Get("X-AnyHook-Event-Type"))
	}
	for _, v := range byPath {
		slices.Sort(v)
	}
	want := map[string][]string{
		"/billing": {"evt_big charge.refunded", "evt_inv invoice.paid"},
		"/audit":   {"evt_big charge.refunded", "evt_inv invoice.paid", "evt_pi payment_intent.succeeded", "evt_small charge.refunded"},
	}
	for p, w := range want {
		if !slices.Equal(byPath[p], w) {
			t.Errorf("%s got %q, want %q", p, byPath[p], w)
		}
	}
	if len(byPath["/broken"]) != 0 {
		t.Errorf("broken got %q, want nothing", byPath["/broken"])
	}

	api := func(method, path, body string) (int, []byte) {
		t.Helper()
		return gatewaytest.Admin(t, method, base+path, body)
	}
	type evJSON struct {
		ID        string `json:"id"`
		Type      string `json:"type"`
		NotRouted []struct {
			Destination, Reason string
		} `json:"not_routed"`
		Deliveries []struct{ Destination string } `json:"deliveries"`
	}
	for id, wantNot := range map[string][]string{invoice: {"broken"}, big: {"broken"}, small: {"billing", "broken"}, intent: {"billing", "broken"}} {
		code, b := api("GET", "/api/events/"+id, "")
		var ev evJSON
		if err := json.Unmarshal(b, &ev); code != 200 || err != nil {
			t.Fatalf("GET event: %d %s", code, b)
		}
		var not []string
		for _, n := range ev.NotRouted {
			if n.Reason != "filter" {
				t.Errorf("reason %q", n.Reason)
			}
			not = append(not, n.Destination)
		}
		if !slices.Equal(not, wantNot) || len(ev.Deliveries) != 3-len(wantNot) {
			t.Errorf("event %s: not_routed %q, %d deliveries; want %q", ev.ID, not, len(ev.Deliveries), wantNot)
		}
	}
	code, b := api("GET", "/api/events?type=charge.*", "")
	var list struct{ Items []evJSON }
	if err := json.Unmarshal(b, &list); code != 200 || err != nil {
		t.Fatalf("list: %d %s", code, b)
	}
	if len(list.Items) != 2 || list.Items[0].Type != "charge.refunded" || list.Items[1].Type != "charge.refunded" {
		t.Errorf("type=charge.*: %s", b)
	}

	// The failed filter was counted, once per evaluation.
	code, b = api("GET", "/metrics", "")
	if code != 200 || !bytes.Contains(b, []byte(`anyhook_filter_errors_total{destination="broken"} 4`)) ||
		!bytes.Contains(b, []byte(`anyhook_ingest_events_total{source="stripe",type="charge.refunded"} 2`)) {
		t.Errorf("metrics: %d\n%s", code, grepLines(b, "filter_errors", "ingest_events"))
	}

	// A replay of the small refund without a destination goes to audit
	// only; to billing when named; everywhere with ignore_filters.
	replayed := func(body string) []string {
		t.Helper()
		code, b := api("POST", "/api/events/"+small+"/replay", body)
		var res struct {
			Deliveries []struct{ Destination string }
		}
		if err := json.Unmarshal(b, &res); code != 202 || err != nil {
			t.Fatalf("replay %s: %d %s", body, code, b)
		}
		var ds []string
		for _, d := range res.Deliveries {
			ds = append(ds, d.Destination)
		}
		slices.Sort(ds)
		return ds
	}
	if ds := replayed(`{}`); !slices.Equal(ds, []string{"audit"}) {
		t.Errorf("replay without destination: %q, want [audit]", ds)
	}
	if ds := replayed(`{"destination":"billing"}`); !slices.Equal(ds, []string{"billing"}) {
		t.Errorf("named replay: %q, want [billing]", ds)
	}
	if ds := replayed(`{"ignore_filters":true}`); !slices.Equal(ds, []string{"audit", "billing", "broken"}) {
		t.Errorf("replay ignoring filters: %q", ds)
	}
	ev, err := g.Store().Event(t.Context(), small)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range ev.Deliveries {
		if d.Destination == "billing" && d.Replay {
			n++
		}
	}
	if n != 2 {
		t.Errorf("%d replay deliveries to billing, want 2", n)
	}
}

func grepLines(b []byte, subs ...string) string {
	var out []string
	for l := range strings.SplitSeq(string(b), "\n") {
		for _, s := range subs {
			if strings.Contains(l, s) && !strings.HasPrefix(l, "#") {
				out = append(out, l)
			}
		}
	}
	return strings.Join(out, "\n")
}
