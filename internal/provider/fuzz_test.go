package provider

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzVerify feeds every verifier arbitrary header values, URLs and bodies,
// seeded from the vectors. Nothing may panic, every rejection must be an
// *Error, and a request that verifies must also extract.
func FuzzVerify(f *testing.F) {
	names := Names()
	headerNames := []string{
		"Stripe-Signature", "X-Hub-Signature-256", "X-Shopify-Hmac-Sha256", "webhook-signature",
		"X-Twilio-Signature", "X-Slack-Signature", "X-HubSpot-Signature-v3", "Paddle-Signature",
		"X-Gitlab-Token", "X-Square-Hmacsha256-Signature", "X-Signature",
	}
	for _, v := range vectors() {
		var sig, ts string
		for _, n := range headerNames {
			if s := v.req.Header.Get(n); s != "" {
				sig = s
			}
		}
		for _, n := range []string{"webhook-timestamp", "X-Slack-Request-Timestamp", "X-HubSpot-Request-Timestamp"} {
			if s := v.req.Header.Get(n); s != "" {
				ts = s
			}
		}
		f.Add(v.provider, v.secret, sig, ts, v.req.URL, string(v.req.Body))
	}
	f.Add("generic", "s", "sha256=zz", "", "", "{}")
	f.Fuzz(func(t *testing.T, p, secret, sig, ts, url, body string) {
		if !strings.Contains(strings.Join(names, " "), p) || p == "" || secret == "" {
			return
		}
		src := Settings{Provider: p, Secrets: []string{secret},
			Signature: &Signature{Header: "X-Signature", Prefix: "sha256="}, ID: "json:id",
			Ordering: &Ordering{Object: "json:data.object.id", Version: "header:webhook-timestamp"}}
		prov, err := New(src)
		if err != nil {
			return
		}
		h := make(http.Header)
		for _, n := range headerNames {
			h.Set(n, sig)
		}
		for _, n := range []string{"webhook-id", "webhook-timestamp", "X-Slack-Request-Timestamp", "X-HubSpot-Request-Timestamp"} {
			h.Set(n, ts)
		}
		h.Set("Content-Type", "application/x-www-form-urlencoded")
		r := &Request{Method: "POST", URL: url, Header: h, Body: []byte(body)}
		now, _ := parseUnix(ts, false)
		if _, err := prov.Verify(r, now); err != nil {
			if _, ok := err.(*Error); !ok {
				t.Fatalf("error %T, want *Error", err)
			}
			if len(secret) >= 8 && strings.Contains(err.Error(), secret) {
				t.Fatalf("error %q leaks the secret", err)
			}
		}
		_, _ = prov.Extract(r)
	})
}

// FuzzExtract runs every provider's Extract over arbitrary bodies.
func FuzzExtract(f *testing.F) {
	for _, v := range vectors() {
		f.Add(string(v.req.Body))
	}
	f.Add(`[{"eventId":1,"objectId":2,"occurredAt":3},{"x":[{}]}]`)
	f.Add(`{"type":"url_verification","challenge":"x"}`)
	f.Add(`{"data":{"type":"payment","id":"P","object":{"payment":{"version":1}}}}`)
	f.Add("MessageSid=SM1&MessageStatus=sent&payload=%7B%7D")
	f.Fuzz(func(t *testing.T, body string) {
		for _, p := range Names() {
			src := Settings{Provider: p, Secrets: []string{stdSecret}, Signature: &Signature{None: true}}
			prov, err := New(src)
			if err != nil {
				t.Fatal(err)
			}
			for _, ct := range []string{"application/json", "application/x-www-form-urlencoded"} {
				x, err := prov.Extract(&Request{Header: hdr("Content-Type", ct, "X-Shopify-Topic", "orders/create"), Body: []byte(body)})
				if err != nil {
					continue
				}
				for _, e := range x.Events {
					if e.Body != nil && !strings.Contains(body, string(e.Body)) {
						t.Fatalf("%s: item %q is not part of the body", p, e.Body)
					}
					if (e.Object == "") != (e.Version == "") {
						t.Fatalf("%s: half an ordering: %+v", p, e)
					}
				}
			}
		}
	})
}

// FuzzField runs the JSON extractor over arbitrary documents and paths.
func FuzzField(f *testing.F) {
	f.Add(`{"a":{"b":[1,{"c":"x"}]}}`, "a.b.1.c")
	f.Add(paddleBody, "data.unit_price.amount")
	f.Add(`[[[[{"a":1}]]]]`, "0.0.0.0.a")
	f.Add(`{"a":1e999}`, "a")
	f.Fuzz(func(t *testing.T, body, path string) {
		fl, err := ParseField("json:" + path)
		if err != nil {
			return
		}
		_ = fl.From(nil, []byte(body))
		items, err := jsonItems([]byte(body))
		if err == nil {
			for _, it := range items {
				if !strings.Contains(body, string(it)) {
					t.Fatalf("item %q not in body", it)
				}
			}
		}
	})
}

// FuzzSignVerify: whatever the body and URL, Sign then Verify succeeds.
func FuzzSignVerify(f *testing.F) {
	f.Add("stripe", `{"id":"x"}`, "https://a.com/p?q=1")
	f.Add("twilio", "A=1&B=2&A=0", "https://a.com:8443/p")
	f.Add("hubspot", `[{"eventId":1}]`, "https://a.com/p%3Fx%3A1")
	f.Add("square", ``, "http://a")
	f.Fuzz(func(t *testing.T, p, body, url string) {
		if _, ok := kinds[p]; !ok || p == "generic" {
			return
		}
		ct := "application/json"
		if p == "twilio" && strings.Contains(body, "=") {
			ct = "application/x-www-form-urlencoded"
		}
		r := &Request{Method: "POST", URL: url, Header: hdr("Content-Type", ct), Body: []byte(body)}
		now := time.Unix(1_750_000_000, 0)
		if err := Sign(p, secretFor(p), r, now); err != nil {
			return // e.g. a form body that does not parse
		}
		if p == "twilio" && ct != "application/json" {
			if _, err := twilioParams(r.Body); err != nil {
				return
			}
		}
		prov, err := New(Settings{Provider: p, Secrets: []string{secretFor(p)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := prov.Verify(r, now); err != nil {
			t.Fatalf("Verify(Sign(%s, %q, %q)) = %v", p, body, url, err)
		}
	})
}
