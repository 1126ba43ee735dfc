package route

import (
	"net/http"
	"strings"
	"testing"
)

// stripeCharge is a charge.succeeded event as Stripe sends it, about 2 KB.
const stripeCharge = `{
  "id": "evt_3PQ8xYLkdIwHu7ix0lSvFbAe",
  "object": "event",
  "api_version": "2024-06-20",
  "created": 1718000000,
  "data": {
    "object": {
      "id": "ch_3PQ8xYLkdIwHu7ix0Kq2pZbC",
      "object": "charge",
      "amount": 2000,
      "amount_captured": 2000,
      "amount_refunded": 0,
      "application": null,
      "application_fee": null,
      "balance_transaction": "txn_3PQ8xYLkdIwHu7ix0wC8sV1d",
      "billing_details": {
        "address": {"city": "Berlin", "country": "DE", "line1": "Unter den Linden 1", "line2": null, "postal_code": "10117", "state": null},
        "email": "jenny.rosen@example.com",
        "name": "Jenny Rosen",
        "phone": null
      },
      "calculated_statement_descriptor": "ANYHOOK",
      "captured": true,
      "created": 1718000000,
      "currency": "eur",
      "customer": "cus_Q1a2b3c4d5e6f7",
      "description": "Subscription update",
      "disputed": false,
      "failure_code": null,
      "failure_message": null,
      "fraud_details": {},
      "invoice": "in_1PQ8xWLkdIwHu7ixQe3r4t5y",
      "livemode": false,
      "metadata": {"order_id": "6735", "plan": "pro"},
      "outcome": {"network_status": "approved_by_network", "reason": null, "risk_level": "normal", "risk_score": 32, "seller_message": "Payment complete.", "type": "authorized"},
      "paid": true,
      "payment_intent": "pi_3PQ8xYLkdIwHu7ix0b5nM6qW",
      "payment_method": "pm_1PQ8xXLkdIwHu7ixR7t8y9uI",
      "payment_method_details": {
        "card": {"brand": "visa", "checks": {"address_line1_check": "pass", "address_postal_code_check": "pass", "cvc_check": "pass"},
          "country": "US", "exp_month": 8, "exp_year": 2027, "fingerprint": "Xt5EWLLDS7FJjR1c", "funding": "credit", "last4": "4242",
          "network": "visa", "three_d_secure": null, "wallet": null},
        "type": "card"
      },
      "receipt_email": "jenny.rosen@example.com",
      "receipt_url": "https://pay.stripe.com/receipts/payment/CAcaFwoVYWNjdF8xTTJKVGtMa2RJd0h1N2l4KOCn7rMGMgZ",
      "refunded": false,
      "review": null,
      "shipping": null,
      "source": null,
      "statement_descriptor": null,
      "status": "succeeded"
    }
  },
  "livemode": false,
  "pending_webhooks": 1,
  "request": {"id": "req_8Hn2bX4cY6dZ1e", "idempotency_key": "a1b2c3d4-e5f6-7890-abcd-ef1234567890"},
  "type": "charge.succeeded"
}`

// BenchmarkBody compares the whole body decoded the old way (full) with
// what the filter reads (paths), on a Stripe event and on a 10 MB body the
// filter does not read; "three" is three filters on one event (the old
// way decoded the body once for all).
func BenchmarkBody(b *testing.B) {
	small := &Event{Source: "stripe", Type: "charge.succeeded", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(stripeCharge)}
	big := &Event{Source: "generic", Type: "x", Body: repeated(`{"a":[`, `{}`, `]}`, 10<<20)}
	compile := func(exprs ...string) []*Filter {
		var fs []*Filter
		for _, e := range exprs {
			f, err := Compile(e)
			if err != nil {
				b.Fatal(err)
			}
			fs = append(fs, f)
		}
		return fs
	}
	for _, tc := range []struct {
		name    string
		ev      *Event
		filters []*Filter
	}{
		{"stripe", small, compile(`type.startsWith("charge.") && body.data.object.amount > 1000`)},
		{"stripe,three", small, compile(
			`type.startsWith("charge.") && body.data.object.amount > 1000`,
			`body.data.object.currency == "eur" && has(body.data.object.customer)`,
			`body.data.object.metadata.plan in ["pro", "team"]`)},
		{"stripe,whole", small, compile(`body.data.object.billing_details.exists(k, k == "email")`)},
		{"10MB", big, compile(`has(body.amount) && body.amount > 10`)},
	} {
		if !strings.HasPrefix(tc.name, "10MB") || !testing.Short() {
			b.Run(tc.name+"/full", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					a := newFullActivation(tc.ev)
					for _, f := range tc.filters {
						if _, err := matchFullOn(f, a); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
		b.Run(tc.name+"/paths", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				in := NewInput(tc.ev)
				for _, f := range tc.filters {
					if _, err := f.Match(in); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
