package provider

import (
	"net/http"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stripe/stripe-go/v85/webhook"
)

// TestStripeGo uses stripe-go as a real signer and verifier.
func TestStripeGo(t *testing.T) {
	t.Parallel()
	secrets := []string{"whsec_old", "whsec_new"}
	prov := mustNew(t, Settings{Provider: "stripe", Secrets: secrets})
	body := []byte(`{"id":"evt_1","object":"event","created":1700000000,"data":{"object":{"id":"pi_1"}}}`)
	now := time.Unix(1_750_000_000, 0)

	for _, secret := range secrets {
		sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: secret, Timestamp: now})
		r := &Request{Header: hdr("Stripe-Signature", sp.Header), Body: body}
		if _, err := prov.Verify(r, now.Add(time.Minute)); err != nil {
			t.Errorf("stripe-go signed with %s: %v", secret, err)
		}
		if _, err := prov.Verify(r, now.Add(DefaultTolerance+time.Second)); err == nil {
			t.Error("stale stripe-go signature verified")
		}
		// And the other way round: stripe-go accepts what Sign produces.
		mine := &Request{Header: http.Header{}, Body: body}
		if err := Sign("stripe", secret, mine, time.Now()); err != nil {
			t.Fatal(err)
		}
		if err := webhook.ValidatePayload(body, mine.Header.Get("Stripe-Signature"), secret); err != nil {
			t.Errorf("stripe-go rejects Sign: %v", err)
		}
	}

	// Rolled secrets: one header carrying a v1 per secret.
	rolled := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: "whsec_other", Timestamp: now})
	old := webhook.ComputeSignature(now, body, "whsec_old")
	header := rolled.Header + ",v1=" + string(hexString(old))
	if _, err := prov.Verify(&Request{Header: hdr("Stripe-Signature", header), Body: body}, now); err != nil {
		t.Errorf("rolled header: %v", err)
	}
	sp := webhook.GenerateTestSignedPayload(&webhook.UnsignedPayload{Payload: body, Secret: "whsec_other", Timestamp: now})
	if _, err := prov.Verify(&Request{Header: hdr("Stripe-Signature", sp.Header), Body: body}, now); err == nil {
		t.Error("a foreign secret verified")
	}
}

func hexString(b []byte) []byte {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 2*len(b))
	for _, c := range b {
		out = append(out, digits[c>>4], digits[c&15])
	}
	return out
}

// TestStandardWebhooksLib cross-checks Sign and Verify with the reference
// Standard Webhooks library.
func TestStandardWebhooksLib(t *testing.T) {
	t.Parallel()
	wh, err := standardwebhooks.NewWebhook(stdSecret)
	if err != nil {
		t.Fatal(err)
	}
	// The library's own vector, through the library.
	sig, err := wh.Sign(stdID, time.Unix(1614265330, 0), []byte(stdBody))
	if err != nil || sig != stdSig {
		t.Fatalf("library Sign = %q, %v", sig, err)
	}

	prov := mustNew(t, Settings{Provider: "standard", Secrets: []string{"whsec_b2xkIHNlY3JldCBvbGQgc2VjcmV0", stdSecret}})
	now := time.Now()
	body := []byte(`{"type":"invoice.paid","data":{"id":"in_1"}}`)

	// Library signs, we verify.
	sig, _ = wh.Sign("msg_lib", now, body)
	r := &Request{Header: hdr("webhook-id", "msg_lib", "webhook-timestamp", unixString(now), "webhook-signature", sig), Body: body}
	if _, err := prov.Verify(r, now); err != nil {
		t.Errorf("library-signed: %v", err)
	}

	// We sign, the library verifies (it reads the clock itself).
	mine := &Request{Header: hdr("webhook-id", "msg_mine"), Body: body}
	if err := Sign("standard", stdSecret, mine, now); err != nil {
		t.Fatal(err)
	}
	if err := wh.Verify(body, mine.Header); err != nil {
		t.Errorf("library rejects Sign: %v", err)
	}
	// Sign invents an id when none is set, and the library accepts it.
	fresh := &Request{Header: http.Header{}, Body: body}
	if err := Sign("standard", stdSecret, fresh, now); err != nil || fresh.Header.Get("webhook-id") == "" {
		t.Fatalf("Sign without id: %v %v", err, fresh.Header)
	}
	if err := wh.Verify(body, fresh.Header); err != nil {
		t.Errorf("library rejects Sign with a fresh id: %v", err)
	}
	// Both reject a changed body.
	if _, err := prov.Verify(&Request{Header: mine.Header, Body: []byte(`{}`)}, now); wh.Verify([]byte(`{}`), mine.Header) == nil || err == nil {
		t.Error("a changed body verified")
	}
}
