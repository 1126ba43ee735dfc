package provider

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/anyhook/anyhook"
)

// TestIdentifier: each provider's refused request keeps the values that
// name it without a secret — id headers, a signature header's timestamp
// but never its signature, the body's id only from a body that was read —
// and a source's id rule adds its own, unless it reads a credential.
func TestIdentifier(t *testing.T) {
	t.Parallel()
	sig := "t=1700000000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd,v0=6ffbb59b2300aae63f27240606"
	for _, tc := range []struct {
		name string
		s    Settings
		h    http.Header
		body []byte
		want []anyhook.RequestID
	}{
		{"stripe", Settings{Provider: "stripe"}, hdr("Stripe-Signature", sig), []byte(`{"id":"evt_badsig","object":"event"}`),
			[]anyhook.RequestID{{Name: "Stripe-Signature t", Value: "1700000000"}, {Name: "body id", Value: "evt_badsig"}}},
		{"stripe, body not read", Settings{Provider: "stripe"}, hdr("Stripe-Signature", sig), nil,
			[]anyhook.RequestID{{Name: "Stripe-Signature t", Value: "1700000000"}}},
		{"github", Settings{Provider: "github"}, hdr("X-GitHub-Delivery", "72d3162e", "X-GitHub-Hook-ID", "292430182", "X-Hub-Signature-256", "sha256=00"), []byte(`{}`),
			[]anyhook.RequestID{{Name: "X-Github-Delivery", Value: "72d3162e"}, {Name: "X-Github-Hook-Id", Value: "292430182"}}},
		{"shopify", Settings{Provider: "shopify"}, hdr("X-Shopify-Webhook-Id", "b54557e4", "X-Shopify-Hmac-Sha256", "AAAA"), nil,
			[]anyhook.RequestID{{Name: "X-Shopify-Webhook-Id", Value: "b54557e4"}}},
		{"standard", Settings{Provider: "standard"}, hdr("webhook-id", "msg_1", "webhook-timestamp", "1700000000", "webhook-signature", "v1,AAAA"), nil,
			[]anyhook.RequestID{{Name: "Webhook-Id", Value: "msg_1"}, {Name: "Webhook-Timestamp", Value: "1700000000"}}},
		{"paddle", Settings{Provider: "paddle"}, hdr("Paddle-Signature", "ts=1700000000;h1=abcdef"), []byte(`{"event_id":"evt_01h"}`),
			[]anyhook.RequestID{{Name: "Paddle-Signature ts", Value: "1700000000"}, {Name: "body event_id", Value: "evt_01h"}}},
		{"gitlab: the token is a secret", Settings{Provider: "gitlab", ID: "header:X-Gitlab-Token"}, hdr("X-Gitlab-Token", "s3cret", "X-Gitlab-Event-UUID", "u-1"), nil,
			[]anyhook.RequestID{{Name: "X-Gitlab-Event-Uuid", Value: "u-1"}}},
		{"generic json id", Settings{Provider: "generic", ID: "json:data.id"}, hdr(), []byte(`{"data":{"id":"ord_7"}}`),
			[]anyhook.RequestID{{Name: "body data.id", Value: "ord_7"}}},
		{"generic header id", Settings{Provider: "generic", ID: "header:X-Request-Id"}, hdr("X-Request-Id", "req-1"), nil,
			[]anyhook.RequestID{{Name: "X-Request-Id", Value: "req-1"}}},
		{"generic: the signature header is no id", Settings{Provider: "generic", ID: "header:X-Sig", Signature: &Signature{Header: "x-sig"}}, hdr("X-Sig", "abc"), nil, nil},
		{"generic: Authorization is no id", Settings{Provider: "generic", ID: "header:Authorization"}, hdr("Authorization", "Bearer x"), nil, nil},
		{"nothing sent", Settings{Provider: "stripe"}, hdr(), []byte(`not json`), nil},
	} {
		got := Identifier(tc.s)(tc.h, tc.body)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
		for _, id := range got {
			if strings.Contains(id.Value, "5257a869") || strings.Contains(id.Value, "s3cret") {
				t.Errorf("%s: a secret kept: %+v", tc.name, id)
			}
		}
	}
}
