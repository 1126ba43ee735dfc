package provider

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func TestExtract(t *testing.T) {
	t.Parallel()
	form := "application/x-www-form-urlencoded"
	for _, tc := range []struct {
		name string
		p    string
		h    http.Header
		body string
		want Event
	}{
		{"stripe", "stripe", hdr(), `{"id":"evt_1","object":"event","created":1700000000,"data":{"object":{"id":"pi_1","amount":100}},"type":"payment_intent.succeeded"}`,
			Event{DedupKey: "evt_1", Type: "payment_intent.succeeded", Object: "pi_1", Version: "1700000000"}},
		{"stripe without object", "stripe", hdr(), `{"id":"evt_2","created":1700000000}`, Event{DedupKey: "evt_2"}},
		{"github", "github", hdr("X-GitHub-Hook-ID", "123", "X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"), `{}`,
			Event{DedupKey: "123:72d3162e-cc78-11e3-81ab-4c9367dc0958"}},
		{"shopify event id", "shopify", hdr("X-Shopify-Event-Id", "ev1", "X-Shopify-Webhook-Id", "wh1", "X-Shopify-Topic", "orders/updated"), `{"id":450789469,"updated_at":"2026-01-02T10:00:00-05:00"}`,
			Event{DedupKey: "ev1", Type: "orders/updated", Object: "orders/450789469", Version: "2026-01-02T10:00:00-05:00"}},
		{"shopify webhook id", "shopify", hdr("X-Shopify-Webhook-Id", "wh1"), `{"id":1}`, Event{DedupKey: "wh1"}},
		{"shopify events delivery", "shopify", hdr("shopify-webhook-id", "wh2", "shopify-topic", "products/update"), `{"id":7,"updated_at":"2026-01-02T10:00:00Z"}`,
			Event{DedupKey: "wh2", Type: "products/update", Object: "products/7", Version: "2026-01-02T10:00:00Z"}},
		{"standard", "standard", hdr("webhook-id", "msg_1"), `{}`, Event{DedupKey: "msg_1"}},
		{"standard svix", "standard", hdr("svix-id", "msg_2", "svix-signature", "v1,x"), `{}`, Event{DedupKey: "msg_2"}},
		{"twilio sms status", "twilio", hdr("I-Twilio-Idempotency-Token", "tok1", "Content-Type", form), "MessageSid=SM1&MessageStatus=delivered",
			Event{DedupKey: "tok1", Object: "SM1", Version: "5"}},
		{"twilio call", "twilio", hdr("Content-Type", form), "CallSid=CA1&CallStatus=completed&SequenceNumber=3",
			// no idempotency token: the canonical signed string (URL, then
			// the sorted names and values) is the key
			Event{DedupKey: "sha256:" + sha256Hex("twilio\x00CallSidCA1CallStatuscompletedSequenceNumber3"), Object: "CA1", Version: "3"}},
		{"twilio json", "twilio", hdr("I-Twilio-Idempotency-Token", "tok2", "Content-Type", "application/json"), `{"MessageSid":"SM1"}`, Event{DedupKey: "tok2"}},
		{"slack event", "slack", hdr("Content-Type", "application/json"), `{"type":"event_callback","event_id":"Ev08MFMKH6","event_time":1234567890}`, Event{DedupKey: "Ev08MFMKH6", Type: "event_callback"}},
		{"slack command", "slack", hdr("Content-Type", form), slackBody, Event{DedupKey: "398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"}},
		{"slack interactivity", "slack", hdr("Content-Type", form), "payload=%7B%22type%22%3A%22block_actions%22%2C%22trigger_id%22%3A%2212.34%22%7D", Event{DedupKey: "12.34", Type: "block_actions"}},
		{"paddle", "paddle", hdr(), paddleBody, Event{DedupKey: "evt_01hsdn97563968dy0szkmgjwh3", Type: "price.created", Object: "pri_01hsdn96k2hxjzsq5yerecdj9j", Version: "2024-03-20T10:07:35.590857Z"}},
		{"gitlab idempotency key", "gitlab", hdr("Idempotency-Key", "ik1", "X-Gitlab-Event-UUID", "uu1"), `{"object_kind":"issue","object_attributes":{"id":301,"updated_at":"2013-12-03 17:23:34 UTC"}}`,
			Event{DedupKey: "ik1", Object: "issue/301", Version: "2013-12-03T17:23:34Z"}},
		{"gitlab event uuid", "gitlab", hdr("X-Gitlab-Event-UUID", "uu1"), `{"object_kind":"push"}`, Event{DedupKey: "uu1"}},
		{"gitlab signed", "gitlab", hdr("Idempotency-Key", "ik-unsigned", "webhook-id", "msg_1", "webhook-signature", "v1,x"), `{"object_kind":"push"}`, Event{DedupKey: "msg_1"}},
		{"square", "square", hdr(), `{"merchant_id":"M","type":"payment.updated","event_id":"e-1","data":{"type":"payment","id":"P1","object":{"payment":{"id":"P1","version":3}}}}`,
			Event{DedupKey: "e-1", Type: "payment.updated", Object: "payment/P1", Version: "3"}},
		{"square without version", "square", hdr(), `{"event_id":"e-2","data":{"type":"dispute","id":"D1","object":{"dispute":{}}}}`, Event{DedupKey: "e-2"}},
	} {
		prov := mustNew(t, Settings{Provider: tc.p, Secrets: []string{secretFor(tc.p)}})
		x, err := prov.Extract(&Request{Header: tc.h, Body: []byte(tc.body)})
		if err != nil || x.Challenge != nil || len(x.Events) != 1 {
			t.Errorf("%s: Extract = %+v, %v; want one event", tc.name, x, err)
			continue
		}
		// The content key (TestContentKeys) is there exactly where the
		// dedup key is read from an unsigned header.
		got := x.Events[0]
		wantContent := tc.p == "github" || tc.p == "shopify" || tc.p == "twilio" || tc.name == "gitlab idempotency key" || tc.name == "gitlab event uuid"
		if (got.ContentKey != "") != wantContent || (got.ContentKey != "" && len(got.ContentKey) != 64) {
			t.Errorf("%s: content key %q, want one: %v", tc.name, got.ContentKey, wantContent)
		}
		got.ContentKey = ""
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Extract = %+v; want %+v", tc.name, got, tc.want)
		}
	}
}

// Without the id header a resend would be a new event: refused instead.
func TestMissingIDHeaderRefused(t *testing.T) {
	t.Parallel()
	for p, h := range map[string]http.Header{"github": hdr("X-GitHub-Hook-ID", "123"), "shopify": hdr("X-Shopify-Topic", "orders/create")} {
		prov := mustNew(t, Settings{Provider: p, Secrets: []string{secretFor(p)}})
		if x, err := prov.Extract(&Request{Header: h, Body: []byte(`{"id":1}`)}); err == nil {
			t.Errorf("%s without its id header: Extract = %+v, want an error", p, x)
		}
	}
}

// A source whose id rule finds no id, and whose request nothing signs,
// could record it only without a key (every retry a new event): refused.
// A signed one falls back to the content key of what its signature covers.
func TestMissingIDRuleValue(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"header:X-Request-Id", "json:data.id"} {
		prov := mustNew(t, Settings{Provider: "generic", Signature: &Signature{None: true}, ID: id})
		for name, r := range map[string]*Request{
			"absent": {Header: hdr(), Body: []byte(`{"data":{}}`)},
			"empty":  {Header: hdr("X-Request-Id", ""), Body: []byte(`{"data":{"id":""}}`)},
		} {
			x, err := prov.Extract(r)
			var pe *Error
			if !errors.As(err, &pe) || !strings.Contains(pe.Msg, id) {
				t.Errorf("%s, id %s: Extract = %+v, %v; want an error naming the rule", id, name, x, err)
			}
		}
		x, err := prov.Extract(&Request{Header: hdr("X-Request-Id", "r1"), Body: []byte(`{"data":{"id":"r1"}}`)})
		if err != nil || x.Events[0].DedupKey != "r1" {
			t.Errorf("%s present: Extract = %+v, %v", id, x, err)
		}
	}
	sig := &Signature{Header: "X-Signature", Prefix: "sha256="}
	s := Settings{Provider: "generic", Secrets: []string{"s3cret"}, Signature: sig, ID: "json:data.id"}
	prov, r := capture(t, s, "", hdr(), `{"data":{}}`)
	if e := keys(t, prov, r); e.DedupKey != "" || len(e.ContentKey) != 64 {
		t.Errorf("signed, no id: %+v, want the content key", e)
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func TestSlackChallenge(t *testing.T) {
	t.Parallel()
	prov := mustNew(t, Settings{Provider: "slack", Secrets: []string{"s"}})
	x, err := prov.Extract(&Request{Header: hdr(), Body: []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)})
	if err != nil || x.Challenge == nil || len(x.Events) != 0 {
		t.Fatalf("Extract = %+v, %v", x, err)
	}
	if got := string(x.Challenge.Body); got != `{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}` || x.Challenge.ContentType != "application/json" {
		t.Errorf("challenge = %s %q", x.Challenge.ContentType, got)
	}
}

func TestHubSpotBatch(t *testing.T) {
	t.Parallel()
	items := []string{
		`{"eventId":1,"subscriptionId":25,"portalId":33,"appId":1160452,"occurredAt":1700000000000,"subscriptionType":"contact.propertyChange","attemptNumber":0,"objectId":123,"changeSource":"CRM","propertyName":"email","propertyValue":"a@b.c"}`,
		`{ "eventId" : 1, "subscriptionId":25,"portalId":33,"occurredAt":1700000000001,"subscriptionType":"contact.propertyChange","attemptNumber":1,"objectId":123,"propertyName":"firstname","propertyValue":"A" }`,
		`{"eventId":2,"subscriptionId":26,"portalId":33,"occurredAt":1700000000002,"subscriptionType":"company.creation","objectId":123}`,
		`{"eventId":3,"portalId":33,"occurredAt":1700000000003,"subscriptionType":"object.creation","objectTypeId":"2-123","objectId":9}`,
	}
	body := []byte("[\n  " + items[0] + ",\n  " + items[1] + " ,\n" + items[2] + "," + items[3] + "]")
	prov := mustNew(t, Settings{Provider: "hubspot", Secrets: []string{"s"}})
	x, err := prov.Extract(&Request{Header: hdr(), Body: body})
	if err != nil {
		t.Fatal(err)
	}
	want := []Event{
		{DedupKey: "33:25:1:123:1700000000000:email", Type: "contact.propertyChange", Object: "contact/123/email", Version: "1700000000000"},
		{DedupKey: "33:25:1:123:1700000000001:firstname", Type: "contact.propertyChange", Object: "contact/123/firstname", Version: "1700000000001"},
		{DedupKey: "33:26:2:123:1700000000002:", Type: "company.creation", Object: "company/123", Version: "1700000000002"},
		{DedupKey: "33::3:9:1700000000003:", Type: "object.creation", Object: "2-123/9", Version: "1700000000003"},
	}
	if len(x.Events) != len(want) {
		t.Fatalf("%d events, want %d", len(x.Events), len(want))
	}
	for i, e := range x.Events {
		if string(e.Body) != items[i] {
			t.Errorf("item %d body = %s, want the item's exact bytes", i, e.Body)
		}
		if !bytes.Contains(body, e.Body) {
			t.Errorf("item %d is not a slice of the request body", i)
		}
		e.Body = nil
		if !reflect.DeepEqual(e, want[i]) {
			t.Errorf("item %d = %+v, want %+v", i, e, want[i])
		}
	}
	// A retry (attemptNumber changed) keeps the keys.
	retry := bytes.Replace(body, []byte(`"attemptNumber":0`), []byte(`"attemptNumber":1`), 1)
	y, _ := prov.Extract(&Request{Header: hdr(), Body: retry})
	if y.Events[0].DedupKey != x.Events[0].DedupKey {
		t.Errorf("retry key %q != %q", y.Events[0].DedupKey, x.Events[0].DedupKey)
	}
	// A single object is one event; an empty batch none; junk is an error.
	if x, err := prov.Extract(&Request{Body: []byte(items[2])}); err != nil || len(x.Events) != 1 || x.Events[0].DedupKey != want[2].DedupKey {
		t.Errorf("single object: %+v, %v", x, err)
	}
	if x, err := prov.Extract(&Request{Body: []byte(` [ ] `)}); err != nil || len(x.Events) != 0 {
		t.Errorf("empty batch: %+v, %v", x, err)
	}
	for _, junk := range []string{``, `"x"`, `[1,`, `[{"a":1}`} {
		if _, err := prov.Extract(&Request{Body: []byte(junk)}); err == nil {
			t.Errorf("Extract(%q) succeeded", junk)
		}
	}
}

// TestOrderingOverride: a source's ordering rules win over the built-ins,
// per batch item too.
func TestOrderingOverride(t *testing.T) {
	t.Parallel()
	prov := mustNew(t, Settings{Provider: "stripe", Secrets: []string{"whsec_s"},
		Ordering: &Ordering{Object: "json:data.object.customer", Version: "header:X-Version"}})
	x, _ := prov.Extract(&Request{Header: hdr("X-Version", "7"), Body: []byte(`{"id":"evt_1","created":1,"data":{"object":{"id":"pi_1","customer":"cus_1"}}}`)})
	if want := (Event{DedupKey: "evt_1", Object: "cus_1", Version: "7"}); !reflect.DeepEqual(x.Events[0], want) {
		t.Errorf("stripe override = %+v, want %+v", x.Events[0], want)
	}
	// Only the version overridden: the built-in object stays.
	prov = mustNew(t, Settings{Provider: "hubspot", Secrets: []string{"s"}, Ordering: &Ordering{Version: "json:attemptNumber"}})
	x, _ = prov.Extract(&Request{Body: []byte(`[{"objectId":1,"occurredAt":9,"attemptNumber":4,"subscriptionType":"deal.creation"},{"objectId":2,"occurredAt":9,"attemptNumber":5}]`)})
	if x.Events[0].Object != "deal/1" || x.Events[0].Version != "4" || x.Events[1].Object != "2" || x.Events[1].Version != "5" {
		t.Errorf("hubspot override = %+v", x.Events)
	}
	// An id rule overrides the built-in key.
	prov = mustNew(t, Settings{Provider: "github", Secrets: []string{"s"}, ID: "header:X-GitHub-Delivery"})
	x, _ = prov.Extract(&Request{Header: hdr("X-GitHub-Hook-ID", "1", "X-GitHub-Delivery", "d"), Body: []byte(`{}`)})
	if x.Events[0].DedupKey != "d" {
		t.Errorf("id override = %+v", x.Events[0])
	}
	// Challenges pass through untouched.
	prov = mustNew(t, Settings{Provider: "slack", Secrets: []string{"s"}, ID: "json:x"})
	if x, _ := prov.Extract(&Request{Body: []byte(`{"type":"url_verification","challenge":"c"}`)}); x.Challenge == nil {
		t.Error("challenge lost behind overrides")
	}
}
