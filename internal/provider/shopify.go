package provider

import (
	"crypto/sha256"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
)

// shopify verifies X-Shopify-Hmac-Sha256 (or Shopify-Hmac-Sha256 from the
// newer Events delivery): base64 HMAC-SHA256 of the body.
type shopify struct{ keys [][]byte }

func buildShopify(_ *Settings, keys [][]byte, _ time.Duration) (Provider, error) {
	return &shopify{keys}, nil
}

// firstHeader returns the first non-empty value among names.
func firstHeader(r *Request, names ...string) string {
	for _, n := range names {
		if v := r.Header.Get(n); v != "" {
			return v
		}
	}
	return ""
}

func (p *shopify) Verify(r *Request, _ time.Time) (anyhook.Verification, error) {
	h := firstHeader(r, "X-Shopify-Hmac-Sha256", "Shopify-Hmac-Sha256")
	if h == "" {
		return anyhook.Verification{}, missing("X-Shopify-Hmac-Sha256")
	}
	sig, err := decodeBase64(h)
	if err != nil {
		return anyhook.Verification{}, fail("malformed X-Shopify-Hmac-Sha256 header: want base64")
	}
	return signedBy("shopify hmac-sha256", matchAny(sha256.New, p.keys, [][]byte{sig}, r.Body))
}

// Extract: dedup on the event id (the same change fanned out to several
// subscriptions), else the webhook id (stable across retries). Neither is
// signed: the content key is the body and the topic, the topic only when
// it is one of Shopify's (shopifyTopics) — two genuine deliveries may share
// a body and differ only in their topic (orders/updated and orders/paid for
// one order state). Ordering is the resource's updated_at, per resource:
// the object is the topic's resource plus the body id ("orders/450789469"),
// since ids of different resources may coincide.
func (p *shopify) Extract(r *Request) (Extracted, error) {
	e := Event{DedupKey: firstHeader(r, "X-Shopify-Event-Id", "Shopify-Event-Id", "X-Shopify-Webhook-Id", "Shopify-Webhook-Id")}
	if e.DedupKey == "" {
		// Shopify sends a webhook id on every delivery.
		return Extracted{}, missing("X-Shopify-Webhook-Id")
	}
	e.ContentKey = p.contentKey(r)
	v := jsonScalars(r.Body, []string{"id"}, []string{"updated_at"})
	if v[0] != "" {
		resource, _, _ := strings.Cut(shopifyTopic(r), "/")
		if resource != "" {
			v[0] = resource + "/" + v[0]
		}
	}
	e.Object, e.Version = order(v[0], v[1])
	return Extracted{Events: []Event{e}}, nil
}

func shopifyTopic(r *Request) string { return firstHeader(r, "X-Shopify-Topic", "Shopify-Topic") }

func (p *shopify) contentKey(r *Request) string {
	return contentKey("shopify", []byte(shopifyTopicBucket(shopifyTopic(r))), []byte{0}, r.Body)
}

func signShopify(secret string, r *Request, _ time.Time) error {
	r.Header.Set("X-Shopify-Hmac-Sha256", b64(mac(sha256.New, []byte(secret), r.Body)))
	return nil
}

// typeOfShopify: the topic header (orders/create).
func typeOfShopify(r *Request, _ []byte) string { return shopifyTopic(r) }
