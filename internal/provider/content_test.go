package provider

import (
	"net/http"
	"testing"
	"time"
)

// capture is one genuine signed request, as a destination or the admin API
// shows it to whoever holds it.
func capture(t *testing.T, src Settings, url string, h http.Header, body string) (Provider, *Request) {
	t.Helper()
	prov := mustNew(t, src)
	r := &Request{Method: "POST", URL: url, Header: h, Body: []byte(body)}
	var err error
	if src.Provider == "generic" {
		err = SignGeneric(*src.Signature, src.Secrets[0], r)
	} else {
		err = Sign(src.Provider, src.Secrets[0], r, time.Now())
	}
	if err != nil {
		t.Fatal(err)
	}
	return prov, r
}

// resend is r sent again with its headers changed by kv (an empty value
// deletes) and, when body is not nil, another encoding of its body: what
// its holder can send without the secret.
func resend(r *Request, body []byte, kv ...string) *Request {
	c := &Request{Method: r.Method, URL: r.URL, Header: r.Header.Clone(), Body: r.Body}
	if body != nil {
		c.Body = body
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == "" {
			c.Header.Del(kv[i])
		} else {
			c.Header.Set(kv[i], kv[i+1])
		}
	}
	return c
}

// keys verifies r (it must pass: the resend is as valid as the capture)
// and returns its one event.
func keys(t *testing.T, prov Provider, r *Request) Event {
	t.Helper()
	if _, err := prov.Verify(r, time.Now()); err != nil {
		t.Fatalf("the resend does not verify: %v", err)
	}
	x, err := prov.Extract(r)
	if err != nil || len(x.Events) != 1 {
		t.Fatalf("Extract = %+v, %v", x, err)
	}
	return x.Events[0]
}

// sameEvent asserts that the resend, whatever its fresh dedup key, carries
// the capture's content key: the store answers it as a duplicate.
func sameEvent(t *testing.T, what string, orig, got Event) {
	t.Helper()
	if orig.ContentKey == "" || got.ContentKey != orig.ContentKey {
		t.Errorf("%s: content key %q, want the capture's %q", what, got.ContentKey, orig.ContentKey)
	}
}

func otherEvent(t *testing.T, what string, orig, got Event) {
	t.Helper()
	if got.ContentKey == "" || got.ContentKey == orig.ContentKey {
		t.Errorf("%s: content key %q, want a key of its own (capture: %q)", what, got.ContentKey, orig.ContentKey)
	}
}

func src(p string, secrets ...string) Settings {
	if len(secrets) == 0 {
		secrets = []string{secretFor(p)}
	}
	return Settings{Provider: p, Secrets: secrets}
}

func TestContentKeyGitHub(t *testing.T) {
	t.Parallel()
	prov, r := capture(t, src("github"), "", hdr("X-GitHub-Event", "push", "X-GitHub-Hook-ID", "1", "X-GitHub-Delivery", "d-1",
		"Content-Type", "application/json"), `{"ref":"refs/heads/main","after":"abc"}`)
	orig := keys(t, prov, r)
	if orig.DedupKey != "1:d-1" {
		t.Fatalf("dedup key %q", orig.DedupKey)
	}
	for what, kv := range map[string][]string{
		"fresh delivery id":   {"X-GitHub-Delivery", "d-2"},
		"another hook id":     {"X-GitHub-Hook-ID", "2"}, // also: one event through two hooks
		"no hook id":          {"X-GitHub-Hook-ID", ""},
		"another event name":  {"X-GitHub-Event", "issues"},
		"all of them at once": {"X-GitHub-Delivery", "d-3", "X-GitHub-Hook-ID", "3", "X-GitHub-Event", "ping", "User-Agent", "x"},
	} {
		got := keys(t, prov, resend(r, nil, kv...))
		if what != "another event name" && got.DedupKey == orig.DedupKey {
			t.Fatalf("%s: the dedup key did not change; the test proves nothing", what)
		}
		sameEvent(t, what, orig, got)
	}
	_, other := capture(t, src("github"), "", hdr("X-GitHub-Hook-ID", "1", "X-GitHub-Delivery", "d-9"), `{"ref":"refs/heads/main","after":"def"}`)
	otherEvent(t, "another body", orig, keys(t, prov, other))
}

func TestContentKeyShopify(t *testing.T) {
	t.Parallel()
	body := `{"id":450789469,"financial_status":"paid","updated_at":"2026-01-02T10:00:00-05:00"}`
	head := func(topic, event string) http.Header {
		return hdr("X-Shopify-Topic", topic, "X-Shopify-Event-Id", event, "X-Shopify-Webhook-Id", "wh-"+event,
			"X-Shopify-Shop-Domain", "shop.myshopify.com", "X-Shopify-Api-Version", "2025-07", "X-Shopify-Triggered-At", "2026-01-02T15:00:00Z")
	}
	prov, r := capture(t, src("shopify"), "", head("orders/updated", "ev-1"), body)
	orig := keys(t, prov, r)
	for what, kv := range map[string][]string{
		"fresh event id":       {"X-Shopify-Event-Id", "ev-2"},
		"webhook id only":      {"X-Shopify-Event-Id", "", "X-Shopify-Webhook-Id", "wh-x"},
		"another shop domain":  {"X-Shopify-Shop-Domain", "other.myshopify.com", "X-Shopify-Event-Id", "ev-3"},
		"another api version":  {"X-Shopify-Api-Version", "2024-01", "X-Shopify-Event-Id", "ev-4"},
		"another trigger time": {"X-Shopify-Triggered-At", "2030-01-01T00:00:00Z", "X-Shopify-Event-Id", "ev-5"},
		"events delivery form": {"X-Shopify-Event-Id", "", "X-Shopify-Webhook-Id", "", "Shopify-Webhook-Id", "wh-y"},
	} {
		sameEvent(t, what, orig, keys(t, prov, resend(r, nil, kv...)))
	}
	// A genuine second delivery of the same order state under another
	// topic is another event.
	_, paid := capture(t, src("shopify"), "", head("orders/paid", "ev-7"), body)
	otherEvent(t, "orders/paid, same body", orig, keys(t, prov, paid))
	// Topics Shopify does not have share one bucket: a holder of the
	// request gets at most one event out of all of them.
	bucket := keys(t, prov, resend(r, nil, "X-Shopify-Topic", "orders/made_up", "X-Shopify-Event-Id", "ev-8"))
	otherEvent(t, "unknown topic", orig, bucket)
	for _, topic := range []string{"", "Orders/Updated", "orders/updated ", "x", "orders/made_up_2"} {
		sameEvent(t, "unknown topic "+topic, bucket, keys(t, prov, resend(r, nil, "X-Shopify-Topic", topic, "X-Shopify-Event-Id", "ev-9")))
	}
	if len(shopifyTopics) < 200 || !shopifyTopics["orders/paid"] || !shopifyTopics["shop/redact"] || !shopifyTopics["customer.tags_added"] {
		t.Errorf("the topic list has %d entries and misses known ones", len(shopifyTopics))
	}
}

func TestContentKeyTwilio(t *testing.T) {
	t.Parallel()
	const url = "https://hooks.example.com/webhooks/twilio?account=a1"
	form := hdr("Content-Type", "application/x-www-form-urlencoded", "I-Twilio-Idempotency-Token", "tok-1")
	prov, r := capture(t, src("twilio"), url, form, "MessageSid=SM1&MessageStatus=delivered&To=%2B15558675310&Body=Hello+world")
	orig := keys(t, prov, r)
	if orig.DedupKey != "tok-1" {
		t.Fatalf("dedup key %q", orig.DedupKey)
	}
	for what, body := range map[string]string{
		"same form":       "",
		"reordered":       "Body=Hello+world&To=%2B15558675310&MessageStatus=delivered&MessageSid=SM1",
		"%20 for +":       "MessageSid=SM1&MessageStatus=delivered&To=%2B15558675310&Body=Hello%20world",
		"escaped letters": "Message%53id=SM%31&MessageStatus=delivered&To=%2b15558675310&Body=Hell%6f+world",
		"stray &s":        "&MessageSid=SM1&&MessageStatus=delivered&To=%2B15558675310&Body=Hello+world&",
	} {
		var b []byte
		if body != "" {
			b = []byte(body)
		}
		got := keys(t, prov, resend(r, b, "I-Twilio-Idempotency-Token", "tok-"+what))
		sameEvent(t, what, orig, got)
		// Without a token the dedup key is the canonical hash too.
		noTok := keys(t, prov, resend(r, b, "I-Twilio-Idempotency-Token", ""))
		if noTok.DedupKey != "sha256:"+orig.ContentKey {
			t.Errorf("%s without a token: dedup key %q, want sha256:<content key>", what, noTok.DedupKey)
		}
	}
	_, sent := capture(t, src("twilio"), url, form, "MessageSid=SM1&MessageStatus=sent&To=%2B15558675310&Body=Hello+world")
	otherEvent(t, "another status", orig, keys(t, prov, sent))
	_, elsewhere := capture(t, src("twilio"), url+"&x=2", form, "MessageSid=SM1&MessageStatus=delivered&To=%2B15558675310&Body=Hello+world")
	otherEvent(t, "another signed URL", orig, keys(t, prov, elsewhere))

	// JSON: Twilio signs the URL with bodySHA256; the URL binds the body.
	jsonHdr := hdr("Content-Type", "application/json", "I-Twilio-Idempotency-Token", "tok-j")
	prov, j := capture(t, src("twilio"), url, jsonHdr, `{"MessageSid":"SM2","MessageStatus":"read"}`)
	origJ := keys(t, prov, j)
	sameEvent(t, "json, fresh token", origJ, keys(t, prov, resend(j, nil, "I-Twilio-Idempotency-Token", "tok-k")))
	sameEvent(t, "json, no token", origJ, keys(t, prov, resend(j, nil, "I-Twilio-Idempotency-Token", "")))
	_, j2 := capture(t, src("twilio"), url, jsonHdr, `{"MessageSid":"SM2","MessageStatus":"delivered"}`)
	otherEvent(t, "json, another body", origJ, keys(t, prov, j2))
}

func TestContentKeyGitLab(t *testing.T) {
	t.Parallel()
	body := `{"object_kind":"push","after":"abc"}`
	// Token: nothing is signed; the body is the content key.
	prov, r := capture(t, src("gitlab"), "", hdr("Idempotency-Key", "ik-1", "X-Gitlab-Event-UUID", "uu-1", "X-Gitlab-Event", "Push Hook"), body)
	orig := keys(t, prov, r)
	for what, kv := range map[string][]string{
		"fresh idempotency key": {"Idempotency-Key", "ik-2"},
		"fresh event uuid only": {"Idempotency-Key", "", "X-Gitlab-Event-UUID", "uu-2"},
		"unsigned webhook-id":   {"Idempotency-Key", "", "X-Gitlab-Event-UUID", "", "webhook-id", "msg_x"},
	} {
		sameEvent(t, what, orig, keys(t, prov, resend(r, nil, kv...)))
	}
	// Signing token: the signed webhook-id is the key, whatever the
	// unsigned Idempotency-Key says, and no content key is needed.
	prov, s := capture(t, src("gitlab", stdSecret), "", hdr("webhook-id", "msg_1", "Idempotency-Key", "ik-1"), body)
	signed := keys(t, prov, s)
	if signed.DedupKey != "msg_1" || signed.ContentKey != "" {
		t.Fatalf("signed: %+v, want key msg_1 and no content key", signed)
	}
	if got := keys(t, prov, resend(s, nil, "Idempotency-Key", "ik-2")); got.DedupKey != "msg_1" {
		t.Errorf("a fresh Idempotency-Key on a signed request: key %q, want the signed msg_1", got.DedupKey)
	}
}

func TestContentKeyGeneric(t *testing.T) {
	t.Parallel()
	sig := &Signature{Header: "X-Signature", Prefix: "sha256="}
	s := Settings{Provider: "generic", Secrets: []string{"s3cret"}, Signature: sig, ID: "header:X-Request-Id"}
	prov, r := capture(t, s, "", hdr("X-Request-Id", "req-1"), `{"order":1}`)
	orig := keys(t, prov, r)
	sameEvent(t, "fresh request id", orig, keys(t, prov, resend(r, nil, "X-Request-Id", "req-2")))
	sameEvent(t, "no request id", orig, keys(t, prov, resend(r, nil, "X-Request-Id", "")))
	_, other := capture(t, s, "", hdr("X-Request-Id", "req-1"), `{"order":2}`)
	otherEvent(t, "another body", orig, keys(t, prov, other))

	// An id from the signed body needs no content key; an unsigned source
	// has nothing to key.
	s.ID = "json:order"
	prov, r = capture(t, s, "", hdr(), `{"order":1}`)
	if e := keys(t, prov, r); e.DedupKey != "1" || e.ContentKey != "" {
		t.Errorf("json id: %+v", e)
	}
	prov = mustNew(t, Settings{Provider: "generic", Signature: &Signature{None: true}, ID: "header:X-Request-Id"})
	if e := keys(t, prov, &Request{Header: hdr("X-Request-Id", "r"), Body: []byte(`{}`)}); e.ContentKey != "" {
		t.Errorf("unsigned source: content key %q", e.ContentKey)
	}
}

// Any provider's id rule that reads an unsigned header gets a content key
// over what that provider signs; a signed header (webhook-id) needs none.
func TestContentKeyIDOverride(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"stripe", "slack", "paddle", "square", "hubspot", "standard"} {
		s := src(p)
		s.ID = "header:X-Request-Id"
		body := `{"id":"evt_1","event_id":"e1","type":"event_callback"}`
		if p == "hubspot" {
			body = `[{"eventId":1,"objectId":2,"occurredAt":3}]`
		}
		prov, r := capture(t, s, "https://hooks.example.com/webhooks/"+p, hdr("X-Request-Id", "r1", "Content-Type", "application/json"), body)
		orig := keys(t, prov, r)
		sameEvent(t, p+" fresh X-Request-Id", orig, keys(t, prov, resend(r, nil, "X-Request-Id", "r2")))
	}
	s := src("standard")
	s.ID = "header:webhook-id"
	prov, r := capture(t, s, "", hdr("webhook-id", "msg_1"), `{}`)
	if e := keys(t, prov, r); e.DedupKey != "msg_1" || e.ContentKey != "" {
		t.Errorf("standard with its signed webhook-id as the id rule: %+v", e)
	}
}
