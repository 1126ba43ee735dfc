package gateway_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

type apiEvent struct {
	ID           string
	RemoteAddr   string `json:"remote_addr"`
	Verification map[string]any
	Arrivals     struct {
		Count, Unlisted int
		Items           []struct {
			Number         int
			Original       bool
			RemoteAddr     string `json:"remote_addr"`
			ReceivedAt     time.Time
			ChangedHeaders []struct {
				Name            string
				Original, Value []string
			} `json:"changed_headers"`
		}
	}
	Deliveries []map[string]any
}

// TestArrivalsAndVerification sends one Shopify event three times — a
// retry with the same webhook id, then a resend under a fresh one — and an
// event to a signature: none source, through real HTTP, and reads what the
// API says: how each was verified (the secret by its index), from where,
// and every arrival with the headers that differed; delivered once.
func TestArrivalsAndVerification(t *testing.T) {
	t.Parallel()
	sk := sinktest.New(t)
	base, _ := gatewaytest.Start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:anyhook.db
admin_token: test-token
delivery: {poll_interval: 50ms}
sources:
  shop:
    provider: shopify
    secrets: [shpss_old, shpss_new]
  hooks:
    provider: generic
    signature: none
destinations:
  app:
    url: %s/hooks
    sources: [shop, hooks]
`, sk.URL), gateway.Options{})

	body := []byte(`{"id":820982911946154508,"updated_at":"2026-01-02T03:04:05Z"}`)
	send := func(webhookID, triggered string) answer {
		pr := &provider.Request{Method: "POST", URL: base + "/webhooks/shop", Body: body, Header: http.Header{
			"Content-Type":           {"application/json"},
			"X-Shopify-Topic":        {"orders/updated"},
			"X-Shopify-Webhook-Id":   {webhookID},
			"X-Shopify-Triggered-At": {triggered},
		}}
		if err := provider.Sign("shopify", "shpss_new", pr, time.Now()); err != nil { // the second secret
			t.Fatal(err)
		}
		req, _ := http.NewRequest("POST", pr.URL, bytes.NewReader(body))
		req.Header = pr.Header
		return do(t, req)
	}
	first := send("wh-1", "2026-01-02T03:04:05Z")
	retry := send("wh-1", "2026-01-02T03:04:35Z")
	resend := send("wh-2", "2026-01-02T03:09:00Z")
	if first.Status != "accepted" || retry.Status != "duplicate" || resend.Status != "duplicate" || retry.ID != first.ID || resend.ID != first.ID {
		t.Fatalf("answers: %+v %+v %+v", first, retry, resend)
	}
	sk.Wait(t, 1)

	var ev apiEvent
	gatewaytest.AdminJSON(t, base+"/api/events/"+first.ID, &ev)
	if want := map[string]any{"method": "signature", "scheme": "shopify hmac-sha256", "secret_index": 1.0}; !maps.Equal(ev.Verification, want) {
		t.Errorf("verification = %v, want %v", ev.Verification, want)
	}
	if !strings.HasPrefix(ev.RemoteAddr, "127.0.0.1:") {
		t.Errorf("remote_addr = %q", ev.RemoteAddr)
	}
	a := ev.Arrivals
	if a.Count != 3 || a.Unlisted != 0 || len(a.Items) != 3 {
		t.Fatalf("arrivals = %+v", a)
	}
	changed := func(i int) []string {
		var names []string
		for _, c := range a.Items[i].ChangedHeaders {
			names = append(names, c.Name)
		}
		return names
	}
	if !a.Items[0].Original || a.Items[0].Number != 1 || a.Items[0].RemoteAddr != ev.RemoteAddr || len(a.Items[0].ChangedHeaders) != 0 {
		t.Errorf("arrival 1 = %+v", a.Items[0])
	}
	if a.Items[1].Number != 2 || a.Items[1].Original || !strings.HasPrefix(a.Items[1].RemoteAddr, "127.0.0.1:") ||
		!slices.Equal(changed(1), []string{"X-Shopify-Triggered-At"}) ||
		!slices.Equal(a.Items[1].ChangedHeaders[0].Original, []string{"2026-01-02T03:04:05Z"}) ||
		!slices.Equal(a.Items[1].ChangedHeaders[0].Value, []string{"2026-01-02T03:04:35Z"}) {
		t.Errorf("arrival 2 = %+v", a.Items[1])
	}
	if a.Items[2].Number != 3 || !slices.Equal(changed(2), []string{"X-Shopify-Triggered-At", "X-Shopify-Webhook-Id"}) {
		t.Errorf("arrival 3 = %+v", a.Items[2])
	}
	if a.Items[1].ReceivedAt.Before(a.Items[0].ReceivedAt) || a.Items[2].ReceivedAt.Before(a.Items[1].ReceivedAt) {
		t.Errorf("arrival times out of order: %+v", a.Items)
	}
	if len(ev.Deliveries) != 1 {
		t.Errorf("deliveries = %d, want 1: the event arrived 3 times and is delivered once", len(ev.Deliveries))
	}

	// An unsigned source's event says so, with no secret.
	req, _ := http.NewRequest("POST", base+"/webhooks/hooks", strings.NewReader(`{"anything":1}`))
	unsigned := do(t, req)
	if unsigned.Status != "accepted" {
		t.Fatalf("unsigned: %+v", unsigned)
	}
	var uev apiEvent
	gatewaytest.AdminJSON(t, base+"/api/events/"+unsigned.ID, &uev)
	if want := map[string]any{"method": "none", "scheme": "unsigned (signature: none)"}; !maps.Equal(uev.Verification, want) {
		t.Errorf("unsigned verification = %v, want %v", uev.Verification, want)
	}
	if uev.Arrivals.Count != 1 || len(uev.Arrivals.Items) != 1 {
		t.Errorf("unsigned arrivals = %+v", uev.Arrivals)
	}

	// Lists carry the verification too.
	var list struct{ Items []apiEvent }
	gatewaytest.AdminJSON(t, base+"/api/events?source=shop", &list)
	if len(list.Items) != 1 || list.Items[0].Verification["scheme"] != "shopify hmac-sha256" || list.Items[0].Arrivals.Count != 0 {
		t.Errorf("list = %+v", list.Items)
	}
}

// TestGenericIDRule: an unsigned generic source with an id rule refuses a
// request without the id (400, recorded among the refused requests)
// rather than record it with no dedup at all; a known id with another
// body is answered duplicate and its arrival keeps the dropped body's
// hash, which the API shows.
func TestGenericIDRule(t *testing.T) {
	t.Parallel()
	sk := sinktest.New(t)
	base, _ := gatewaytest.Start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:anyhook.db
admin_token: test-token
sources:
  orders:
    provider: generic
    signature: none
    id: header:X-Order-Id
destinations:
  app:
    url: %s/hooks
    sources: [orders]
`, sk.URL), gateway.Options{})
	send := func(id, body string) answer {
		req, _ := http.NewRequest("POST", base+"/webhooks/orders", strings.NewReader(body))
		if id != "-" {
			req.Header.Set("X-Order-Id", id)
		}
		return do(t, req)
	}
	for _, id := range []string{"-", ""} {
		if a := send(id, `{"total":1}`); a.Code != 400 || !strings.Contains(a.Error, "missing id: header:X-Order-Id") {
			t.Errorf("id header %q: %+v, want 400 naming the rule", id, a)
		}
	}
	var rejected struct{ Items []apiRejection }
	testwait.Value(t, "2 refused requests", func() (struct{}, error) {
		rejected.Items = nil
		gatewaytest.AdminJSON(t, base+"/api/rejections?source=orders&reason=invalid", &rejected)
		if len(rejected.Items) != 2 {
			return struct{}{}, fmt.Errorf("rejections %+v", rejected.Items)
		}
		return struct{}{}, nil
	})

	first := send("ord_1", `{"total":10}`)
	again := send("ord_1", `{"total":10}`)
	other := send("ord_1", `{"total":99}`)
	if first.Status != "accepted" || again.Status != "duplicate" || other.Status != "duplicate" || other.ID != first.ID {
		t.Fatalf("answers: %+v %+v %+v", first, again, other)
	}
	var ev struct {
		Body     string
		Arrivals struct {
			Items []struct {
				Number     int
				BodySHA256 string `json:"body_sha256"`
			}
		}
	}
	gatewaytest.AdminJSON(t, base+"/api/events/"+first.ID, &ev)
	items := ev.Arrivals.Items
	sum := sha256.Sum256([]byte(`{"total":99}`))
	if len(items) != 3 || items[1].BodySHA256 != "" || items[2].BodySHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("arrivals %+v: want the third's body_sha256 %x only", items, sum)
	}
	sk.Wait(t, 1)
	if got := sk.Requests(); len(got) != 1 || string(got[0].Body) != `{"total":10}` {
		t.Errorf("delivered %d requests, want the first body once", len(got))
	}
}
