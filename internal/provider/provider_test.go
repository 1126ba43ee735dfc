package provider

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
)

func TestNames(t *testing.T) {
	t.Parallel()
	want := []string{"generic", "github", "gitlab", "hubspot", "paddle", "shopify", "slack", "square", "standard", "stripe", "twilio"}
	if got := Names(); !slices.Equal(got, want) {
		t.Fatalf("Names() = %v, want %v", got, want)
	}
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	sig := &Signature{Header: "X-Signature"}
	for _, tc := range []struct {
		src  Settings
		want string // error prefix
	}{
		{Settings{}, "provider: required"},
		{Settings{Provider: "foo", Secrets: []string{"s"}}, `provider: unknown provider "foo" (known: generic, github,`},
		{Settings{Provider: "stripe"}, "secrets: at least one secret is required"},
		{Settings{Provider: "stripe", Secrets: []string{"a", ""}}, "secrets[1]: empty secret"},
		{Settings{Provider: "stripe", Secrets: []string{"a"}, Tolerance: -1}, "tolerance: must not be negative"},
		{Settings{Provider: "generic", Secrets: []string{"a"}}, `signature: required for generic sources; say "signature: none" to accept unsigned requests`},
		{Settings{Provider: "generic", Signature: sig}, "secrets: at least one secret is required"},
		{Settings{Provider: "generic", Secrets: []string{"a"}, Signature: &Signature{}}, "signature.header: a header name is required"},
		{Settings{Provider: "generic", Secrets: []string{"a"}, Signature: &Signature{Header: "X", Algorithm: "md5"}}, `signature.algorithm: want sha1, sha256 or sha512, got "md5"`},
		{Settings{Provider: "generic", Secrets: []string{"a"}, Signature: &Signature{Header: "X", Encoding: "base32"}}, `signature.encoding: want hex or base64`},
		{Settings{Provider: "generic", Secrets: []string{"a"}, Signature: sig, ID: "body:id"}, `id: want header:NAME or json:PATH, got "body:id"`},
		{Settings{Provider: "generic", Secrets: []string{"a"}, Signature: sig, ID: "json:a..b"}, `id: bad JSON path`},
		{Settings{Provider: "generic", Secrets: []string{"a"}, Signature: sig, Ordering: &Ordering{Object: "header:"}}, `ordering.object: bad header name`},
		{Settings{Provider: "generic", Secrets: []string{"a"}, Signature: sig, Ordering: &Ordering{Object: "json:x", Version: "x"}}, `ordering.version: want header:NAME or json:PATH`},
		{Settings{Provider: "standard", Secrets: []string{"whsec_not base64!"}}, "secrets[0]: not a Standard Webhooks secret"},
		{Settings{Provider: "stripe", Secrets: []string{"whsec_ok", "sk_live_not base64!"}}, "secrets[1]: not a Stripe signing secret: those start with whsec_"},
	} {
		_, err := New(tc.src)
		if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want prefix %q", tc.src, err, tc.want)
		}
		if err != nil && len(tc.src.Secrets) > 0 && strings.Contains(err.Error(), "not base64") {
			t.Errorf("error %q leaks the secret", err)
		}
	}
	if _, err := New(Settings{Provider: "generic", Signature: &Signature{None: true}}); err != nil {
		t.Errorf("generic with signature: none and no secrets: %v", err)
	}
}

// signed builds a request for provider p and signs it with Sign.
func signed(t testing.TB, p, secret string, body string, now time.Time) *Request {
	t.Helper()
	r := &Request{Method: "POST", URL: "https://hooks.example.com/webhooks/" + p + "?q=1", Header: http.Header{}, Body: []byte(body)}
	if p == "twilio" {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if err := Sign(p, secret, r, now); err != nil {
		t.Fatalf("Sign(%s): %v", p, err)
	}
	return r
}

// secretFor gives each provider a secret of the form it expects.
func secretFor(p string) string {
	switch p {
	case "standard":
		return stdSecret
	case "stripe":
		return "whsec_s3cret-stripe" // Stripe's secrets start with whsec_
	}
	return "s3cret-" + p
}

func timestamped(p string) bool {
	return slices.Contains([]string{"stripe", "standard", "slack", "hubspot", "paddle"}, p)
}

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_750_000_000, 0)
	bodies := []string{`{"id":"x","n":1}`, "MessageSid=SM1&MessageStatus=sent&To=%2B1555", ""}
	for _, p := range Names() {
		if p == "generic" {
			continue
		}
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			prov := mustNew(t, Settings{Provider: p, Secrets: []string{"whsec_b2xkIHNlY3JldCBvbGQgc2VjcmV0", secretFor(p)}})
			for _, body := range bodies {
				r := signed(t, p, secretFor(p), body, now)
				r.Header.Set("X-GitHub-Delivery", "d-1") // the id headers a real delivery carries
				r.Header.Set("X-Shopify-Webhook-Id", "w-1")
				v, err := prov.Verify(r, now)
				if err != nil {
					t.Fatalf("body %q: Verify(Sign()) = %v (headers %v)", body, err, r.Header)
				}
				// Signed with the second secret: a rotation in progress.
				want := anyhook.Verification{Method: anyhook.VerifySignature, Scheme: schemes[p], Secret: 1}
				if p == "gitlab" {
					want.Method = anyhook.VerifyToken
				}
				if p == "twilio" && r.Header.Get("Content-Type") != "application/x-www-form-urlencoded" {
					want.Scheme += " with bodySHA256"
				}
				if v != want {
					t.Errorf("body %q: Verify = %+v, want %+v", body, v, want)
				}
				if _, err := prov.Extract(r); err != nil && p != "hubspot" {
					t.Fatalf("Extract: %v", err)
				}
			}
			if p == "gitlab" { // the Standard Webhooks variant too
				prov := mustNew(t, Settings{Provider: p, Secrets: []string{"plain-token", stdSecret}})
				r := signed(t, p, stdSecret, `{"object_kind":"push"}`, now)
				if r.Header.Get("webhook-signature") == "" || r.Header.Get("X-Gitlab-Token") != "" {
					t.Fatalf("gitlab whsec_ signing set %v", r.Header)
				}
				// secrets[0] is no Standard Webhooks key: the match is
				// still named by its index in secrets.
				v, err := prov.Verify(r, now)
				if want := (anyhook.Verification{Method: anyhook.VerifySignature, Scheme: "gitlab standard webhooks v1", Secret: 1}); err != nil || v != want {
					t.Fatalf("gitlab signing token: %+v, %v; want %+v", v, err, want)
				}
			}
		})
	}
}

// schemes names what each provider's Verify reports having checked.
var schemes = map[string]string{
	"github": "github sha256", "gitlab": "gitlab token", "hubspot": "hubspot v3", "paddle": "paddle h1",
	"shopify": "shopify hmac-sha256", "slack": "slack v0", "square": "square hmac-sha256",
	"standard": "standard webhooks v1", "stripe": "stripe v1", "twilio": "twilio hmac-sha1",
}

// TestVerificationNamesTheSecret: of several secrets, the one that matched
// is named by its index, whichever it is; the reported verification never
// holds the secret.
func TestVerificationNamesTheSecret(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_750_000_000, 0)
	for _, p := range Names() {
		if p == "generic" {
			continue
		}
		secrets := []string{secretFor(p) + "a", secretFor(p) + "b", secretFor(p) + "c"}
		if p == "standard" {
			secrets = []string{"whsec_YWFhYWFhYWFhYWFhYWFhYQ==", "whsec_YmJiYmJiYmJiYmJiYmJiYg==", "whsec_Y2NjY2NjY2NjY2NjY2NjYw=="}
		}
		prov := mustNew(t, Settings{Provider: p, Secrets: secrets})
		for i, secret := range secrets {
			r := signed(t, p, secret, `{"id":"x"}`, now)
			r.Header.Set("X-GitHub-Delivery", "d-1")
			v, err := prov.Verify(r, now)
			if err != nil || v.Secret != i || v.Scheme == "" {
				t.Errorf("%s signed with secrets[%d]: %+v, %v", p, i, v, err)
			}
			if strings.Contains(fmt.Sprintf("%+v", v), secret) {
				t.Errorf("%s: %+v holds the secret", p, v)
			}
		}
		other := secretFor(p) + "z"
		if p == "standard" {
			other = "whsec_enp6enp6enp6enp6enp6eg=="
		}
		r := signed(t, p, other, `{"id":"x"}`, now)
		if v, err := prov.Verify(r, now); err == nil || v != (anyhook.Verification{}) {
			t.Errorf("%s signed with another secret: %+v, %v", p, v, err)
		}
	}
}

func TestSignErrors(t *testing.T) {
	t.Parallel()
	r := &Request{Body: []byte("x")}
	for _, tc := range []struct{ p, secret string }{{"nope", "s"}, {"generic", "s"}, {"stripe", ""}, {"standard", "whsec_%%%"}} {
		if err := Sign(tc.p, tc.secret, r, time.Now()); err == nil {
			t.Errorf("Sign(%q, %q) succeeded", tc.p, tc.secret)
		}
	}
}

func TestTolerance(t *testing.T) {
	t.Parallel()
	signedAt := time.Unix(1_750_000_000, 0)
	for _, p := range Names() {
		if !timestamped(p) {
			continue
		}
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			r := signed(t, p, secretFor(p), `{"id":"1"}`, signedAt)
			for _, tc := range []struct {
				tol time.Duration
				off time.Duration
				ok  bool
			}{
				{0, 0, true},
				{0, 5 * time.Minute, true},
				{0, -5 * time.Minute, true},
				{0, 5*time.Minute + time.Second, false},  // too old
				{0, -5*time.Minute - time.Second, false}, // from the future
				{time.Minute, 2 * time.Minute, false},
				{time.Hour, -59 * time.Minute, true},
				{0, 7*time.Minute + 12*time.Second, false},
			} {
				prov := mustNew(t, Settings{Provider: p, Secrets: []string{secretFor(p)}, Tolerance: tc.tol})
				_, err := prov.Verify(r, signedAt.Add(tc.off))
				if (err == nil) != tc.ok {
					t.Errorf("tolerance %v, now = signed %+v: err = %v, want ok=%v", tc.tol, tc.off, err, tc.ok)
				}
				want := tc.tol
				if want == 0 {
					want = DefaultTolerance
				}
				// The reason says by how much, and which way.
				excess := fmt.Sprintf("%s old", tc.off)
				if tc.off < 0 {
					excess = fmt.Sprintf("%s in the future", -tc.off)
				}
				if err != nil && err.Error() != "timestamp outside tolerance: "+excess+", "+want.String()+" allowed" {
					t.Errorf("error = %q", err)
				}
			}
		})
	}
}

func TestMissingAndMalformed(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, tc := range []struct {
		p    string
		h    http.Header
		url  string
		want string
	}{
		{"stripe", hdr(), "", "missing Stripe-Signature header"},
		{"stripe", hdr("Stripe-Signature", "v1=abcd"), "", "malformed Stripe-Signature header: no valid t= timestamp"},
		{"stripe", hdr("Stripe-Signature", "t=17x,v1=abcd"), "", "malformed Stripe-Signature header: no valid t= timestamp"},
		{"stripe", hdr("Stripe-Signature", "t=1700000000,v0=abcd"), "", "malformed Stripe-Signature header: no v1 signature"},
		{"stripe", hdr("Stripe-Signature", "t=1700000000,v1=zz"), "", "malformed Stripe-Signature header: no v1 signature"},
		{"stripe", hdr("Stripe-Signature", "t=1700000000,v1=abcd"), "", "no signature matched"},
		{"github", hdr(), "", "missing X-Hub-Signature-256 header"},
		{"github", hdr("X-Hub-Signature-256", "sha1=abcd"), "", "malformed X-Hub-Signature-256 header: want sha256=<hex>"},
		{"github", hdr("X-Hub-Signature-256", "sha256=xyz"), "", "malformed X-Hub-Signature-256 header: want sha256=<hex>"},
		{"shopify", hdr(), "", "missing X-Shopify-Hmac-Sha256 header"},
		{"shopify", hdr("X-Shopify-Hmac-Sha256", "%%%"), "", "malformed X-Shopify-Hmac-Sha256 header: want base64"},
		{"standard", hdr(), "", "missing webhook-signature header"},
		{"standard", hdr("webhook-signature", "v1,AAAA"), "", "missing webhook-id header"},
		{"standard", hdr("svix-signature", "v1,AAAA", "svix-id", "m"), "", "missing svix-timestamp header"},
		{"standard", hdr("webhook-signature", "v1,AAAA", "webhook-id", "m", "webhook-timestamp", "-5"), "", "malformed webhook-timestamp header"},
		{"standard", hdr("webhook-signature", "v2,AAAA v1a,BBBB", "webhook-id", "m", "webhook-timestamp", "5"), "", "no v1 signature in webhook-signature header"},
		{"twilio", hdr(), "https://x", "missing X-Twilio-Signature header"},
		{"twilio", hdr("X-Twilio-Signature", "!!"), "https://x", "malformed X-Twilio-Signature header: want base64"},
		{"twilio", hdr("X-Twilio-Signature", "AAAA"), "", "cannot verify a Twilio signature without the public URL; set public_url"},
		{"slack", hdr(), "", "missing X-Slack-Signature header"},
		{"slack", hdr("X-Slack-Signature", "v0=ab"), "", "missing X-Slack-Request-Timestamp header"},
		{"slack", hdr("X-Slack-Signature", "v1=ab", "X-Slack-Request-Timestamp", "1"), "", "malformed X-Slack-Signature header: want v0=<hex>"},
		{"slack", hdr("X-Slack-Signature", "v0=ab", "X-Slack-Request-Timestamp", "1.5"), "", "malformed X-Slack-Request-Timestamp header"},
		{"hubspot", hdr(), "https://x", "missing X-HubSpot-Signature-v3 header"},
		{"hubspot", hdr("X-HubSpot-Signature", "abcd"), "https://x", "missing X-HubSpot-Signature-v3 header (v1 and v2 signatures are not accepted)"},
		{"hubspot", hdr("X-HubSpot-Signature-v3", "AAAA"), "https://x", "missing X-HubSpot-Request-Timestamp header"},
		{"hubspot", hdr("X-HubSpot-Signature-v3", "AAAA", "X-HubSpot-Request-Timestamp", "1"), "", "cannot verify a HubSpot signature without the public URL; set public_url"},
		{"paddle", hdr(), "", "missing Paddle-Signature header"},
		{"paddle", hdr("Paddle-Signature", "ts=x;h1=y"), "", "malformed Paddle-Signature header: no valid ts= timestamp"},
		{"paddle", hdr("Paddle-Signature", "ts=1;h2=ab"), "", "malformed Paddle-Signature header: no h1 signature"},
		{"gitlab", hdr(), "", "missing X-Gitlab-Token header"},
		{"gitlab", hdr("X-Gitlab-Token", "wrong"), "", "no token matched"},
		{"gitlab", hdr("webhook-signature", "v1,AAAA", "webhook-id", "m", "webhook-timestamp", "5"), "", "no signature matched"},
		{"square", hdr(), squareURL, "missing x-square-hmacsha256-signature header"},
		{"square", hdr("X-Square-Hmacsha256-Signature", squareSig), "", "cannot verify a Square signature without the notification URL; set public_url"},
	} {
		prov := mustNew(t, Settings{Provider: tc.p, Secrets: []string{secretFor(tc.p)}})
		_, err := prov.Verify(&Request{Method: "POST", URL: tc.url, Header: tc.h, Body: []byte("{}")}, now)
		var pe *Error
		if !errors.As(err, &pe) || pe.Msg != tc.want {
			t.Errorf("%s %v: err = %v, want %q", tc.p, tc.h, err, tc.want)
		}
	}
}

// TestErrorsAreSafe: a rejection never names the secret or the signature
// the gateway expected.
func TestErrorsAreSafe(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_750_000_000, 0)
	for _, p := range Names() {
		if p == "generic" {
			continue
		}
		secret := secretFor(p)
		good := signed(t, p, secret, `{"id":"1"}`, now)
		bad := *good
		bad.Body = []byte(`{"id":"2"}`)
		prov := mustNew(t, Settings{Provider: p, Secrets: []string{secret}})
		_, err := prov.Verify(&bad, now)
		if p == "gitlab" {
			bad.Header = hdr("X-Gitlab-Token", "nope")
			_, err = prov.Verify(&bad, now)
		}
		if err == nil {
			t.Fatalf("%s: tampered request verified", p)
		}
		for _, vs := range good.Header {
			for _, v := range vs {
				for _, leak := range append(strings.FieldsFunc(v, func(r rune) bool { return strings.ContainsRune(",;= ", r) }), secret) {
					if len(leak) >= 16 && strings.Contains(err.Error(), leak) {
						t.Errorf("%s: error %q contains %q", p, err, leak)
					}
				}
			}
		}
	}
}

func TestGeneric(t *testing.T) {
	t.Parallel()
	body := []byte(`{"order":{"id":42,"updated_at":"2026-01-02T03:04:05Z"},"data":{"id":"d1"}}`)
	for _, sig := range []Signature{
		{Header: "X-Signature", Algorithm: "sha256", Encoding: "hex", Prefix: "sha256="},
		{Header: "X-Signature"},
		{Header: "X-Sig", Algorithm: "sha1", Encoding: "base64"},
		{Header: "X-Sig", Algorithm: "sha512", Encoding: "hex", Prefix: "v1="},
	} {
		src := Settings{Provider: "generic", Secrets: []string{"old", "new"}, Signature: &sig,
			ID: "header:X-Request-Id", Ordering: &Ordering{Object: "json:order.id", Version: "json:order.updated_at"}}
		prov := mustNew(t, src)
		r := &Request{Header: hdr("X-Request-Id", "req-1"), Body: body}
		if err := SignGeneric(sig, "new", r); err != nil {
			t.Fatal(err)
		}
		alg := cmp.Or(sig.Algorithm, "sha256")
		if v, err := prov.Verify(r, time.Now()); err != nil || v != (anyhook.Verification{Method: anyhook.VerifySignature, Scheme: "generic hmac-" + alg, Secret: 1}) {
			t.Errorf("%+v: %+v, %v", sig, v, err)
		}
		x, err := prov.Extract(r)
		// The id header is not signed: the signed body is the content key.
		want := Event{DedupKey: "req-1", ContentKey: sha256Hex("generic\x00" + string(body)), Object: "42", Version: "2026-01-02T03:04:05Z"}
		if err != nil || len(x.Events) != 1 || !reflect.DeepEqual(x.Events[0], want) {
			t.Errorf("%+v: Extract = %+v, %v", sig, x, err)
		}
		r.Body = append([]byte(nil), body...)
		r.Body[3] = 'X'
		if _, err := prov.Verify(r, time.Now()); err == nil || err.Error() != "no signature matched" {
			t.Errorf("%+v tampered: %v", sig, err)
		}
		r.Header.Set(sig.Header, "junk")
		if _, err := prov.Verify(r, time.Now()); err == nil {
			t.Errorf("%+v junk header verified", sig)
		}
		r.Header.Del(sig.Header)
		if _, err := prov.Verify(r, time.Now()); err == nil || err.Error() != "missing "+sig.Header+" header" {
			t.Errorf("%+v no header: %v", sig, err)
		}
	}

	// Unsigned, with and without an id rule.
	none := &Signature{None: true}
	prov := mustNew(t, Settings{Provider: "generic", Signature: none})
	r := &Request{Header: hdr(), Body: body}
	if v, err := prov.Verify(r, time.Now()); err != nil || v != (anyhook.Verification{Method: anyhook.VerifyNone, Scheme: "unsigned (signature: none)", Secret: -1}) {
		t.Fatalf("unsigned: %+v, %v", v, err)
	}
	if x, _ := prov.Extract(r); len(x.Events) != 1 || !reflect.DeepEqual(x.Events[0], Event{}) {
		t.Errorf("no id rule: %+v", x)
	}
	prov = mustNew(t, Settings{Provider: "generic", Signature: none, ID: "json:data.id"})
	if x, _ := prov.Extract(r); x.Events[0].DedupKey != "d1" {
		t.Errorf("json id: %+v", x)
	}
	if err := SignGeneric(*none, "", r); err != nil || len(r.Header) != 0 {
		t.Errorf("SignGeneric(none) = %v, %v", err, r.Header)
	}
	if err := SignGeneric(Signature{Header: "X"}, "", r); err == nil {
		t.Error("SignGeneric with an empty secret succeeded")
	}
}

// A Twilio signature over the URL alone must not vouch for a body: a body
// that is neither a signed form nor covered by bodySHA256 is refused.
func TestTwilioUnsignedBodyRefused(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_750_000_000, 0)
	prov := mustNew(t, Settings{Provider: "twilio", Secrets: []string{secretFor("twilio")}})
	// A signature of the URL alone, as for a GET callback.
	r := &Request{Method: "POST", URL: "https://hooks.example.com/webhooks/twilio", Header: http.Header{}}
	if err := Sign("twilio", secretFor("twilio"), r, now); err != nil {
		t.Fatal(err)
	}
	if _, err := prov.Verify(r, now); err != nil {
		t.Fatalf("empty body: %v", err)
	}
	r.Header.Set("Content-Type", "application/json")
	r.Body = []byte(`{"MessageSid":"SMforged"}`)
	if _, err := prov.Verify(r, now); err == nil {
		t.Fatal("a body outside the signature was accepted")
	}
}
