package gateway_test

import (
	"bytes"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
)

// The sources of the replay tests: every provider whose dedup key is read
// from a header its signature does not cover.
const (
	replayGitHub  = "github-secret"
	replayShopify = "shpss_secret"
	replayTwilio  = "twilio-auth-token"
	replayToken   = "gitlab-token"
	replayGeneric = "generic-secret"
)

var replaySignature = provider.Signature{Header: "X-Signature", Algorithm: "sha256", Encoding: "hex", Prefix: "sha256="}

// replaySetup runs a gateway on the named backend ("sqlite" or
// "postgres", a fresh database either way) with the replay sources, all
// delivering to sk.
func replaySetup(t *testing.T, backend string, sk *sinktest.Sink) *env {
	t.Helper()
	db := "sqlite:anyhook.db"
	if backend == "postgres" {
		db = pgtest.DSN(t)
	}
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
database: %q
delivery: {poll_interval: 50ms}
sources:
  github: {provider: github, secrets: [%q]}
  shopify: {provider: shopify, secrets: [%q]}
  twilio: {provider: twilio, secrets: [%q], public_url: "%%URL%%/webhooks/twilio"}
  gitlab: {provider: gitlab, secrets: [%q]}
  gitlab-signed: {provider: gitlab, secrets: [%q]}
  generic:
    provider: generic
    secrets: [%q]
    signature: {header: X-Signature, algorithm: sha256, encoding: hex, prefix: "sha256="}
    id: header:X-Request-Id
destinations:
  app:
    url: %s/hooks
    sources: [github, shopify, twilio, gitlab, gitlab-signed, generic]
    backoff: {initial: 10ms, max: 40ms}
`, db, replayGitHub, replayShopify, replayTwilio, replayToken, standardSecret, replayGeneric, sk.URL)
	base, g := gatewaytest.Start(t, yaml, gateway.Options{})
	return &env{url: base, gw: g, store: g.Store(), sink: sk}
}

// signed is a genuine request of provider p for source, signed at now.
// URL-bound schemes sign url (Twilio's JSON variant appends bodySHA256).
func signed(t *testing.T, p, secret, url string, h http.Header, body string) *provider.Request {
	t.Helper()
	pr := &provider.Request{Method: "POST", URL: url, Header: h, Body: []byte(body)}
	var err error
	if p == "generic" {
		err = provider.SignGeneric(replaySignature, secret, pr)
	} else {
		err = provider.Sign(p, secret, pr, time.Now())
	}
	if err != nil {
		t.Fatal(err)
	}
	return pr
}

// altered is pr as its holder can resend it without the secret: headers
// set (an empty value deletes) and, when body is not nil, the body
// re-encoded. The signature headers are the capture's.
func altered(pr *provider.Request, body string, kv ...string) *provider.Request {
	c := &provider.Request{Method: pr.Method, URL: pr.URL, Header: pr.Header.Clone(), Body: pr.Body}
	if body != "" {
		c.Body = []byte(body)
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

func post(t *testing.T, pr *provider.Request) answer {
	t.Helper()
	req, err := http.NewRequest("POST", pr.URL, bytes.NewReader(pr.Body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = pr.Header.Clone()
	return do(t, req)
}

// replayCase is one captured request and what its holder tries with it.
type replayCase struct {
	name, source string
	capture      func(t *testing.T, e *env) *provider.Request
	variants     func(pr *provider.Request) map[string]*provider.Request
}

func replayCases() []replayCase {
	form := "application/x-www-form-urlencoded"
	return []replayCase{
		{name: "github", source: "github",
			capture: func(t *testing.T, e *env) *provider.Request {
				return signed(t, "github", replayGitHub, e.url+"/webhooks/github",
					hdr("Content-Type", "application/json", "X-GitHub-Event", "push", "X-GitHub-Hook-ID", "101", "X-GitHub-Delivery", "d-1"),
					`{"ref":"refs/heads/main","after":"6113728f27ae82c7b1a177c8d03f9e96e0adf246"}`)
			},
			variants: func(pr *provider.Request) map[string]*provider.Request {
				return map[string]*provider.Request{
					"fresh X-GitHub-Delivery": altered(pr, "", "X-GitHub-Delivery", "d-2"),
					"another hook":            altered(pr, "", "X-GitHub-Hook-ID", "202"),
					"another event name":      altered(pr, "", "X-GitHub-Event", "issues", "X-GitHub-Delivery", "d-3"),
				}
			}},
		{name: "shopify", source: "shopify",
			capture: func(t *testing.T, e *env) *provider.Request {
				return signed(t, "shopify", replayShopify, e.url+"/webhooks/shopify",
					hdr("Content-Type", "application/json", "X-Shopify-Topic", "orders/updated", "X-Shopify-Event-Id", "ev-1",
						"X-Shopify-Webhook-Id", "wh-1", "X-Shopify-Shop-Domain", "shop.myshopify.com"),
					`{"id":450789469,"financial_status":"pending","updated_at":"2026-01-02T10:00:00-05:00"}`)
			},
			variants: func(pr *provider.Request) map[string]*provider.Request {
				return map[string]*provider.Request{
					"fresh X-Shopify-Event-Id":   altered(pr, "", "X-Shopify-Event-Id", "ev-2"),
					"fresh X-Shopify-Webhook-Id": altered(pr, "", "X-Shopify-Event-Id", "", "X-Shopify-Webhook-Id", "wh-2"),
					"another shop domain":        altered(pr, "", "X-Shopify-Event-Id", "ev-3", "X-Shopify-Shop-Domain", "evil.myshopify.com"),
				}
			}},
		{name: "twilio form", source: "twilio",
			capture: func(t *testing.T, e *env) *provider.Request {
				return signed(t, "twilio", replayTwilio, e.url+"/webhooks/twilio?tenant=7",
					hdr("Content-Type", form, "I-Twilio-Idempotency-Token", "tok-1"),
					"MessageSid=SM1&MessageStatus=delivered&To=%2B15558675310&Body=Hello+world")
			},
			variants: func(pr *provider.Request) map[string]*provider.Request {
				return map[string]*provider.Request{
					"fresh idempotency token": altered(pr, "", "I-Twilio-Idempotency-Token", "tok-2"),
					"no idempotency token":    altered(pr, "", "I-Twilio-Idempotency-Token", ""),
					"params reordered":        altered(pr, "Body=Hello+world&To=%2B15558675310&MessageStatus=delivered&MessageSid=SM1", "I-Twilio-Idempotency-Token", "tok-3"),
					"%20 for + and escapes":   altered(pr, "MessageSid=SM%31&MessageStatus=delivered&To=%2b15558675310&Body=Hello%20world", "I-Twilio-Idempotency-Token", ""),
				}
			}},
		{name: "twilio json", source: "twilio",
			capture: func(t *testing.T, e *env) *provider.Request {
				return signed(t, "twilio", replayTwilio, e.url+"/webhooks/twilio",
					hdr("Content-Type", "application/json", "I-Twilio-Idempotency-Token", "tok-j1"),
					`{"MessageSid":"SM2","MessageStatus":"read"}`)
			},
			variants: func(pr *provider.Request) map[string]*provider.Request {
				return map[string]*provider.Request{
					"fresh idempotency token": altered(pr, "", "I-Twilio-Idempotency-Token", "tok-j2"),
					"no idempotency token":    altered(pr, "", "I-Twilio-Idempotency-Token", ""),
				}
			}},
		{name: "gitlab token", source: "gitlab",
			capture: func(t *testing.T, e *env) *provider.Request {
				return signed(t, "gitlab", replayToken, e.url+"/webhooks/gitlab",
					hdr("Content-Type", "application/json", "X-Gitlab-Event", "Push Hook", "Idempotency-Key", "ik-1", "X-Gitlab-Event-UUID", "uu-1"),
					`{"object_kind":"push","checkout_sha":"95790bf891e76fee5e1747ab589903a6a1f80f22"}`)
			},
			variants: func(pr *provider.Request) map[string]*provider.Request {
				return map[string]*provider.Request{
					"fresh Idempotency-Key":     altered(pr, "", "Idempotency-Key", "ik-2"),
					"fresh X-Gitlab-Event-UUID": altered(pr, "", "Idempotency-Key", "", "X-Gitlab-Event-UUID", "uu-2"),
				}
			}},
		{name: "gitlab signed", source: "gitlab-signed",
			capture: func(t *testing.T, e *env) *provider.Request {
				return signed(t, "gitlab", standardSecret, e.url+"/webhooks/gitlab-signed",
					hdr("Content-Type", "application/json", "X-Gitlab-Event", "Push Hook", "webhook-id", "msg_1", "Idempotency-Key", "msg_1"),
					`{"object_kind":"push","checkout_sha":"95790bf891e76fee5e1747ab589903a6a1f80f22"}`)
			},
			variants: func(pr *provider.Request) map[string]*provider.Request {
				return map[string]*provider.Request{
					"fresh Idempotency-Key": altered(pr, "", "Idempotency-Key", "ik-2"),
				}
			}},
		{name: "generic header id", source: "generic",
			capture: func(t *testing.T, e *env) *provider.Request {
				return signed(t, "generic", replayGeneric, e.url+"/webhooks/generic",
					hdr("Content-Type", "application/json", "X-Request-Id", "req-1"), `{"order":{"id":42,"total":"9.99"}}`)
			},
			variants: func(pr *provider.Request) map[string]*provider.Request {
				return map[string]*provider.Request{
					"fresh X-Request-Id": altered(pr, "", "X-Request-Id", "req-2"),
					"no X-Request-Id":    altered(pr, "", "X-Request-Id", ""),
				}
			}},
	}
}

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

// TestReplayWithFreshUnsignedHeaders: whoever holds one signed request
// (every destination receives one, the admin API shows it) resends it with
// only what the signature does not cover changed — a fresh id header,
// another hook id, a re-encoded form. Each resend is answered 200
// duplicate with the original event's id, and nothing is delivered twice.
func TestReplayWithFreshUnsignedHeaders(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			sk := sinktest.New(t)
			e := replaySetup(t, backend, sk)
			var originals []string
			for _, tc := range replayCases() {
				pr := tc.capture(t, e)
				first := post(t, pr)
				if first.Code != 200 || first.Status != "accepted" {
					t.Fatalf("%s: the genuine request: %+v", tc.name, first)
				}
				originals = append(originals, first.ID)
				for what, v := range tc.variants(pr) {
					if a := post(t, v); a.Code != 200 || a.Status != "duplicate" || a.ID != first.ID {
						t.Errorf("%s, %s: %+v, want 200 duplicate of %s", tc.name, what, a, first.ID)
					}
				}
				// The genuine request again (a provider retry) too.
				if a := post(t, pr); a.Status != "duplicate" || a.ID != first.ID {
					t.Errorf("%s, retried: %+v, want a duplicate of %s", tc.name, a, first.ID)
				}
			}
			// One event and one delivery per capture, each sent once.
			wantPerSource := map[string]int{"github": 1, "shopify": 1, "twilio": 2, "gitlab": 1, "gitlab-signed": 1, "generic": 1}
			for source, want := range wantPerSource {
				if n := e.count(t, source); n != want {
					t.Errorf("%s: %d events, want %d", source, n, want)
				}
				ds, _, err := e.store.ListDeliveries(t.Context(), store.DeliveryFilter{Source: source})
				if err != nil || len(ds) != want {
					t.Errorf("%s: %d deliveries (%v), want %d", source, len(ds), err, want)
				}
			}
			for _, id := range originals {
				e.waitStatus(t, id, anyhook.StatusDelivered)
			}
			sent := map[string]int{}
			for _, r := range sk.Wait(t, len(originals)) {
				sent[r.Header.Get("X-AnyHook-Delivery")]++
			}
			for _, id := range originals {
				if sent[id] != 1 {
					t.Errorf("event %s sent %d times, want once", id, sent[id])
				}
			}
			if len(sent) != len(originals) {
				t.Errorf("the destination got %d distinct deliveries, want %d", len(sent), len(originals))
			}
		})
	}
}

// TestGenuineEventsSharingABody: two genuine deliveries that differ only in
// an unsigned part the provider varies for real — Shopify's orders/updated
// and orders/paid for one order state — are two events. A topic Shopify
// does not have gains the holder of a request at most one more event.
func TestGenuineEventsSharingABody(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			e := replaySetup(t, backend, sinktest.New(t))
			body := `{"id":450789469,"financial_status":"paid","updated_at":"2026-01-02T10:00:00-05:00"}`
			shopify := func(topic, eventID string) *provider.Request {
				return signed(t, "shopify", replayShopify, e.url+"/webhooks/shopify",
					hdr("Content-Type", "application/json", "X-Shopify-Topic", topic, "X-Shopify-Event-Id", eventID, "X-Shopify-Webhook-Id", "wh-"+eventID), body)
			}
			updated, paid := post(t, shopify("orders/updated", "ev-1")), post(t, shopify("orders/paid", "ev-2"))
			if updated.Status != "accepted" || paid.Status != "accepted" || updated.ID == paid.ID {
				t.Fatalf("orders/updated %+v, orders/paid %+v: want two accepted events", updated, paid)
			}
			// Each is still its own duplicate under a fresh id.
			if a := post(t, altered(shopify("orders/paid", "ev-2"), "", "X-Shopify-Event-Id", "ev-3")); a.Status != "duplicate" || a.ID != paid.ID {
				t.Fatalf("orders/paid resent under a fresh id: %+v, want a duplicate of %s", a, paid.ID)
			}
			// Unknown topics share one bucket: one extra event at most.
			extra := post(t, shopify("orders/made_up", "ev-4"))
			again := post(t, shopify("refunds/imaginary", "ev-5"))
			if extra.Status != "accepted" || again.Status != "duplicate" || again.ID != extra.ID {
				t.Fatalf("unknown topics: %+v then %+v; want one event, then its duplicate", extra, again)
			}
			if n := e.count(t, "shopify"); n != 3 {
				t.Fatalf("%d events, want 3", n)
			}
			// A GitHub event with another body is another event.
			gh := func(delivery, body string) answer {
				return post(t, signed(t, "github", replayGitHub, e.url+"/webhooks/github",
					hdr("X-GitHub-Hook-ID", "1", "X-GitHub-Delivery", delivery), body))
			}
			if a, b := gh("d-1", `{"after":"a"}`), gh("d-2", `{"after":"b"}`); a.Status != "accepted" || b.Status != "accepted" {
				t.Fatalf("two GitHub events: %+v, %+v", a, b)
			}
		})
	}
}
