package provider

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Official vectors (PROVIDERS.md §B.12) and locally computed fixtures.
const (
	stdSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	stdID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	stdTS     = "1614265330"
	stdBody   = `{"test": 2432232314}`
	stdSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

	ghSecret = "It's a Secret to Everybody"
	ghBody   = "Hello, World!"
	ghSig    = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"

	slackSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	slackTS     = "1531420618"
	slackBody   = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	slackSig    = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"

	twilioToken    = "12345"
	twilioURL      = "https://mycompany.com/myapp.php?foo=1&bar=2"
	twilioForm     = "Digits=1234&CallSid=CA1234567890ABCDE&To=%2B18005551212&Caller=%2B14158675309&From=%2B14158675309"
	twilioFormSig  = "RSOYDt4T1cUTdK1PDd93/VVr8B8="
	twilioJSON     = `{"property": "value", "boolean": true}`
	twilioBodyHash = "0a1ff7634d9ab3b95db5c9a2dfe9416e41502b283a80c7cf19632632f96e6620"

	paddleSecret = "pdl_ntfset_01hsdn8d43dt7mezr1ef2jtbaw_hKkRiCGyyRhbFwIUuqiTBgI7gnWoV0Gr"
	paddleSig    = "ts=1710929255;h1=6c05ef8fa83c44d751be6d259ec955ce5638e2c54095bf128e408e2fce1589c8"
	paddleBody   = `{"data":{"id":"pri_01hsdn96k2hxjzsq5yerecdj9j","name":null,"status":"active","quantity":{"maximum":999999,"minimum":1},"tax_mode":"account_setting","product_id":"pro_01hsdn8qp7yydry3x1yeg6a9rv","unit_price":{"amount":"1000","currency_code":"USD"},"custom_data":null,"description":"testing","import_meta":null,"trial_period":null,"billing_cycle":{"interval":"month","frequency":1},"unit_price_overrides":[]},"event_id":"evt_01hsdn97563968dy0szkmgjwh3","event_type":"price.created","occurred_at":"2024-03-20T10:07:35.590857Z","notification_id":"ntf_01hsdn977e920kbgzt6r6c9rqc"}`

	stripeSecret = "whsec_test_secret"
	stripeBody   = `{"id":"evt_test","object":"event"}`
	stripeSig    = "t=1700000000,v1=8042376f6ca064adbe037642a718227dfd59047137eb49497a54c49eb0cfb724"

	shopifySecret = "shpss_test_secret"
	shopifyBody   = `{"id":1}`
	shopifySig    = "K2XDCjoIIQnsCAW9wJNjHt4VwaiFCMoHAkXVA+JPSq0="

	hubspotSecret = "hs_test_secret"
	hubspotURL    = "https://example.com/webhooks/hubspot?x=1"
	hubspotBody   = `[{"eventId":1}]`
	hubspotTS     = "1700000000000"
	hubspotSig    = "8LyDZ2TzUeDXB/xGnSuP00sleVVQa4QaWm42AGnDfuU="

	squareSecret = "sq_test_key"
	squareURL    = "https://example.com/webhooks/square"
	squareBody   = `{"event_id":"e1"}`
	squareSig    = "fZf6clnJDNKfAzL0w2nCZ9Jygy98CMwixoLqHfRjcro="
)

// vector is one signed request and the instant it is valid at.
type vector struct {
	name     string
	provider string
	secret   string
	req      Request
	now      time.Time
}

func hdr(kv ...string) http.Header {
	h := make(http.Header)
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func unix(s string) time.Time {
	t, _ := parseUnix(s, false)
	return t
}

func vectors() []vector {
	form := "application/x-www-form-urlencoded"
	return []vector{
		{"standard official", "standard", stdSecret, Request{Header: hdr("webhook-id", stdID, "webhook-timestamp", stdTS, "webhook-signature", stdSig), Body: []byte(stdBody)}, unix(stdTS)},
		{"standard svix headers", "standard", stdSecret, Request{Header: hdr("svix-id", stdID, "svix-timestamp", stdTS, "svix-signature", stdSig), Body: []byte(stdBody)}, unix(stdTS)},
		{"standard unknown versions ignored", "standard", stdSecret, Request{Header: hdr("webhook-id", stdID, "webhook-timestamp", stdTS, "webhook-signature", "v1a,AAAA v2,xyz "+stdSig), Body: []byte(stdBody)}, unix(stdTS)},
		{"standard unprefixed secret", "standard", strings.TrimPrefix(stdSecret, "whsec_"), Request{Header: hdr("webhook-id", stdID, "webhook-timestamp", stdTS, "webhook-signature", stdSig), Body: []byte(stdBody)}, unix(stdTS)},
		{"gitlab signing token", "gitlab", stdSecret, Request{Header: hdr("webhook-id", stdID, "webhook-timestamp", stdTS, "webhook-signature", stdSig), Body: []byte(stdBody)}, unix(stdTS)},
		{"github official", "github", ghSecret, Request{Header: hdr("X-Hub-Signature-256", ghSig), Body: []byte(ghBody)}, time.Now()},
		{"slack official", "slack", slackSecret, Request{Header: hdr("X-Slack-Signature", slackSig, "X-Slack-Request-Timestamp", slackTS, "Content-Type", form), Body: []byte(slackBody)}, unix(slackTS)},
		{"twilio form official", "twilio", twilioToken, Request{Method: "POST", URL: twilioURL, Header: hdr("X-Twilio-Signature", twilioFormSig, "Content-Type", form), Body: []byte(twilioForm)}, time.Now()},
		{"twilio form, URL with a port, signed without", "twilio", twilioToken, Request{Method: "POST", URL: strings.Replace(twilioURL, ".com", ".com:1234", 1), Header: hdr("X-Twilio-Signature", twilioFormSig, "Content-Type", form), Body: []byte(twilioForm)}, time.Now()},
		{"twilio form, signed with :443", "twilio", twilioToken, Request{Method: "POST", URL: twilioURL, Header: hdr("X-Twilio-Signature", "kvajT1Ptam85bY51eRf/AJRuM3w=", "Content-Type", form), Body: []byte(twilioForm)}, time.Now()},
		{"twilio form, http signed with :80", "twilio", twilioToken, Request{Method: "POST", URL: strings.Replace(twilioURL, "https", "http", 1), Header: hdr("X-Twilio-Signature", "0ZXoZLH/DfblKGATFgpif+LLRf4=", "Content-Type", form), Body: []byte(twilioForm)}, time.Now()},
		{"twilio form, http with its own port", "twilio", twilioToken, Request{Method: "POST", URL: strings.Replace(strings.Replace(twilioURL, ".com", ".com:1234", 1), "https", "http", 1), Header: hdr("X-Twilio-Signature", "Zmvh+3yNM1Phv2jhDCwEM3q5ebU=", "Content-Type", form), Body: []byte(twilioForm)}, time.Now()},
		{"twilio JSON official", "twilio", twilioToken, Request{Method: "POST", URL: twilioURL + "&bodySHA256=" + twilioBodyHash, Header: hdr("X-Twilio-Signature", "a9nBmqA0ju/hNViExpshrM61xv4=", "Content-Type", "application/json"), Body: []byte(twilioJSON)}, time.Now()},
		{"twilio JSON, only bodySHA256", "twilio", twilioToken, Request{Method: "POST", URL: "https://mycompany.com/myapp.php?bodySHA256=" + twilioBodyHash, Header: hdr("X-Twilio-Signature", "y77kIzt2vzLz71DgmJGsen2scGs=", "Content-Type", "application/json"), Body: []byte(twilioJSON)}, time.Now()},
		{"paddle official", "paddle", paddleSecret, Request{Header: hdr("Paddle-Signature", paddleSig), Body: []byte(paddleBody)}, unix("1710929255")},
		{"paddle several h1", "paddle", paddleSecret, Request{Header: hdr("Paddle-Signature", "ts=1710929255;h1=00ff;"+paddleSig[len("ts=1710929255;"):]), Body: []byte(paddleBody)}, unix("1710929255")},
		{"stripe local", "stripe", stripeSecret, Request{Header: hdr("Stripe-Signature", stripeSig), Body: []byte(stripeBody)}, unix("1700000000")},
		{"stripe v0 and extra v1 ignored", "stripe", stripeSecret, Request{Header: hdr("Stripe-Signature", "t=1700000000,v0=abcd,v1=00,"+stripeSig[len("t=1700000000,"):]), Body: []byte(stripeBody)}, unix("1700000000")},
		{"shopify local", "shopify", shopifySecret, Request{Header: hdr("X-Shopify-Hmac-Sha256", shopifySig), Body: []byte(shopifyBody)}, time.Now()},
		{"shopify without X-", "shopify", shopifySecret, Request{Header: hdr("shopify-hmac-sha256", shopifySig), Body: []byte(shopifyBody)}, time.Now()},
		{"hubspot local", "hubspot", hubspotSecret, Request{Method: "POST", URL: hubspotURL, Header: hdr("X-HubSpot-Signature-v3", hubspotSig, "X-HubSpot-Request-Timestamp", hubspotTS), Body: []byte(hubspotBody)}, time.UnixMilli(1700000000000)},
		{"square local", "square", squareSecret, Request{Method: "POST", URL: squareURL, Header: hdr("X-Square-Hmacsha256-Signature", squareSig), Body: []byte(squareBody)}, time.Now()},
		{"gitlab token", "gitlab", "glpat-token", Request{Header: hdr("X-Gitlab-Token", "glpat-token"), Body: []byte(`{}`)}, time.Now()},
	}
}

func mustNew(t testing.TB, src Settings) Provider {
	t.Helper()
	p, err := New(src)
	if err != nil {
		t.Fatalf("New(%s): %v", src.Provider, err)
	}
	return p
}

func TestVectors(t *testing.T) {
	t.Parallel()
	for _, v := range vectors() {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			p := mustNew(t, Settings{Provider: v.provider, Secrets: []string{v.secret}})
			if _, err := p.Verify(&v.req, v.now); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			// Rotation: the right secret anywhere in the list is accepted.
			p = mustNew(t, Settings{Provider: v.provider, Secrets: []string{"whsec_b2xkIHNlY3JldCBvbGQgc2VjcmV0", v.secret}})
			if _, err := p.Verify(&v.req, v.now); err != nil {
				t.Fatalf("Verify with rotation: %v", err)
			}
			// A wrong secret alone fails.
			p = mustNew(t, Settings{Provider: v.provider, Secrets: []string{"whsec_b2xkIHNlY3JldCBvbGQgc2VjcmV0"}})
			if _, err := p.Verify(&v.req, v.now); err == nil {
				t.Fatal("Verify with a wrong secret passed")
			}
		})
	}
}

// TestTamper changes one byte of the body, the URL or a timestamp header;
// every change must fail verification.
func TestTamper(t *testing.T) {
	t.Parallel()
	for _, v := range vectors() {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			p := mustNew(t, Settings{Provider: v.provider, Secrets: []string{v.secret}})
			check := func(what string, r Request) {
				t.Helper()
				if _, err := p.Verify(&r, v.now); err == nil {
					t.Errorf("%s changed, Verify passed", what)
				} else if _, ok := err.(*Error); !ok {
					t.Errorf("%s changed: error %T, want *Error", what, err)
				}
			}
			for i := range v.req.Body {
				if v.req.Header.Get("X-Gitlab-Token") != "" {
					break // a plain token does not cover the body
				}
				r := v.req
				r.Body = flip(v.req.Body, i)
				if v.provider == "twilio" && isForm(r.Header) {
					if _, err := twilioParams(r.Body); err != nil {
						continue
					}
					if string(mustParams(r.Body)) == string(mustParams(v.req.Body)) {
						continue // an equivalent encoding of the same form
					}
				}
				check("body byte "+strconv.Itoa(i), r)
			}
			if v.req.URL != "" {
				for i := range v.req.URL {
					r := v.req
					r.URL = string(flip([]byte(v.req.URL), i))
					if sameTwilioURL(v, r.URL) {
						continue
					}
					check("URL byte "+strconv.Itoa(i), r)
				}
			}
			for _, name := range []string{"webhook-timestamp", "svix-timestamp", "X-Slack-Request-Timestamp", "X-HubSpot-Request-Timestamp"} {
				if ts := v.req.Header.Get(name); ts != "" {
					r := v.req
					r.Header = v.req.Header.Clone()
					r.Header.Set(name, string(flip([]byte(ts), len(ts)-1)))
					check(name, r)
				}
			}
			for _, name := range []string{"Stripe-Signature", "Paddle-Signature"} {
				if h := v.req.Header.Get(name); h != "" {
					r := v.req
					r.Header = v.req.Header.Clone()
					r.Header.Set(name, strings.Replace(h, "=17", "=18", 1))
					check(name+" timestamp", r)
				}
			}
		})
	}
}

// flip returns b with byte i changed.
func flip(b []byte, i int) []byte {
	c := append([]byte(nil), b...)
	if c[i] == '1' {
		c[i] = '2'
	} else {
		c[i] = '1'
	}
	return c
}

func mustParams(b []byte) []byte {
	p, _ := twilioParams(b)
	return p
}

// sameTwilioURL reports whether a changed URL is one Twilio's port leniency
// treats as the same (changing the port digits away from a default).
func sameTwilioURL(v vector, u string) bool {
	if v.provider != "twilio" {
		return false
	}
	for _, a := range urlVariants(u) {
		for _, b := range urlVariants(v.req.URL) {
			if a == b {
				return true
			}
		}
	}
	return false
}
