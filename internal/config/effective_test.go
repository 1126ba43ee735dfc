package config

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// everything sets every key, most to values other than their defaults,
// with one secret in each place a secret can be.
const everything = `listen: 0.0.0.0:9090
database: postgres://gw:pg-PASSWORD-1@db.internal:5432/anyhook?sslmode=verify-full&password=pg-PASSWORD-2
admin_token: ADMIN-TOKEN-SECRET
dashboard_url: https://ops:DASH-PASSWORD@anyhook.example.com/
sources:
  zeta:
    provider: stripe
    secrets: [whsec_STRIPE-SECRET-1, whsec_STRIPE-SECRET-2]
    tolerance: 2m
    max_body: 512KiB
    rate_limit: {rps: 5}
  orders:
    provider: generic
    secrets: [GENERIC-SECRET]
    signature: {header: X-Signature, algorithm: sha512, encoding: base64, prefix: "v1="}
    id: header:X-Request-Id
    ordering: {object: json:order.id, version: json:order.updated_at, stale: deliver}
    rate_limit: {rps: 200, burst: 400}
  open:
    provider: generic
    signature: none
  twilio:
    provider: twilio
    secrets: [TWILIO-SECRET]
    public_url: https://hooks.example.com/webhooks/twilio?token=PUBLIC-URL-TOKEN
destinations:
  billing:
    url: https://user:DEST-PASSWORD@billing.example.com/hooks?api_key=DEST-KEY&tenant=acme
    sources: [zeta, orders]
    signing_secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
    timeout: 3s
    max_attempts: 3
    backoff: {initial: 250ms, max: 1m}
    on_stale_claim: hold
    drop_headers: [X-Internal]
    max_in_flight: 4
    rate: 600/m
    tls_insecure_skip_verify: true
    auto_pause: {failure_rate: 0.5, window: 100, probe_every: 10s}
  audit:
    url: http://127.0.0.1:9000/audit
    sources: [open, twilio]
    auto_pause: {consecutive_failures: 20}
alerts:
  - webhook: https://alerts.example.com/hook/WEBHOOK-PATH-SECRET
  - slack: https://hooks.slack.com/services/SLACK-PATH-SECRET
  - pagerduty: {routing_key: PD-ROUTING-KEY, url: "https://events.eu.pagerduty.com/v2/enqueue"}
delivery: {poll_interval: 2s, grace: 3s, shutdown: 0s}
log:
  key_file: keys/anyhook-log.key
  checkpoint_interval: 30s
  push_url: https://witness.example.com/anyhook?sig=PUSH-SIG
  retention: 0s
  origin: example.com/anyhook
`

var secretValues = regexp.MustCompile(`[A-Z0-9_-]*(SECRET|PASSWORD|TOKEN|KEY|SIG)[A-Z0-9_-]*|whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw`)

// The effective configuration parses back into the same configuration:
// every key is printed, with its value after defaults.
func TestEffectiveRoundTrip(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]string{"minimal": minimal, "everything": everything} {
		c := mustParse(t, src)
		out := c.effective(false)
		back, err := Parse(c.Path, out, env())
		if err != nil {
			t.Fatalf("%s: the effective configuration does not parse: %v\n%s", name, err, out)
		}
		c.lines, back.lines = nil, nil
		// Warnings name lines of the file they were found in.
		c.warnings, c.notes, back.warnings, back.notes = nil, nil, nil, nil
		if !reflect.DeepEqual(c, back) {
			t.Errorf("%s: the effective configuration reads back differently:\n%s", name, out)
		}
	}
	// Defaults are written out.
	out := string(mustParse(t, minimal).effective(false))
	for _, want := range []string{"listen: 127.0.0.1:8080\n", "tolerance: 5m0s\n", "max_body: 10MiB\n", "grace: 5s\n", "retention: 720h0m0s\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("the effective minimal configuration lacks %q:\n%s", want, out)
		}
	}
}

// Effective never prints a secret, keeps what is not one, and keeps the
// file's order of sources.
func TestEffectiveRedacts(t *testing.T) {
	t.Parallel()
	out := string(mustParse(t, everything).Effective())
	if m := secretValues.FindAllString(out, -1); len(m) > 0 {
		t.Errorf("the effective configuration shows secrets %q:\n%s", m, out)
	}
	for _, want := range []string{
		"database: postgres://gw:<redacted>@db.internal:5432/anyhook?password=<redacted>&sslmode=verify-full\n",
		"admin_token: <redacted>\n",
		"dashboard_url: https://ops:<redacted>@anyhook.example.com/\n",
		"secrets: [<redacted>, <redacted>]\n",
		"public_url: https://hooks.example.com/webhooks/twilio?token=<redacted>\n",
		"url: https://user:<redacted>@billing.example.com/hooks?api_key=<redacted>&tenant=acme\n",
		"signing_secret: <redacted>\n",
		"webhook: https://alerts.example.com/<redacted>\n",
		"slack: https://hooks.slack.com/<redacted>\n",
		"routing_key: <redacted>\n",
		"url: https://events.eu.pagerduty.com/v2/enqueue\n",
		"push_url: https://witness.example.com/anyhook?sig=<redacted>\n",
		"signature: none\n",
		"header: X-Signature\n",
		"rate: 10/s\n",
		"key_file: keys/anyhook-log.key # /etc/anyhook/keys/anyhook-log.key",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the effective configuration lacks %q:\n%s", want, out)
		}
	}
	if z, o := strings.Index(out, "  zeta:"), strings.Index(out, "  orders:"); z < 0 || o < z {
		t.Errorf("sources are not in the file's order:\n%s", out)
	}
}

// Every string key is classified as plain, secret or URL, so that a new
// key is never printed by mistake (an unclassified one is redacted).
func TestEffectiveClassifiesEveryKey(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	var walk func(typ reflect.Type, path string)
	walk = func(typ reflect.Type, path string) {
		switch typ.Kind() {
		case reflect.Pointer:
			walk(typ.Elem(), path)
			return
		case reflect.Slice:
			walk(typ.Elem(), path+"[]")
			return
		case reflect.Map:
			walk(typ.Elem(), path+".*")
			return
		case reflect.String:
			seen[path] = true
			if _, ok := valueKinds[path]; !ok {
				t.Errorf("key %s is not in valueKinds: say whether it is plain, a secret or a URL", path)
			}
			return
		case reflect.Struct:
			for name, i := range yamlFields(typ) {
				walk(typ.Field(i).Type, strings.TrimPrefix(path+"."+name, "."))
			}
		}
	}
	walk(reflect.TypeFor[Config](), "")
	for k := range valueKinds {
		if !seen[k] {
			t.Errorf("valueKinds names %s, which is no key", k)
		}
	}
}

// TestEffectiveRedactsUserNameKeys: many APIs take the key as the user
// name with no password (https://KEY:@host, https://KEY@host), and Azure
// Functions as ?code=KEY: config check shows none of them. A user name
// with a password is a name, and is kept.
func TestEffectiveRedactsUserNameKeys(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{
		"https://sk_live_SECRET1:@billing.example.com/hooks":          "url: https://<redacted>@billing.example.com/hooks\n",
		"https://SECRET2@billing.example.com/hooks":                   "url: https://<redacted>@billing.example.com/hooks\n",
		"https://fn.azurewebsites.net/api/hook?code=SECRET3&x=1":      "url: https://fn.azurewebsites.net/api/hook?code=<redacted>&x=1\n",
		"https://alice:SECRET4@billing.example.com/hooks?tenant=acme": "url: https://alice:<redacted>@billing.example.com/hooks?tenant=acme\n",
	} {
		src := minimal + "destinations:\n  d:\n    url: " + url + "\n    sources: [stripe]\n"
		out := string(mustParse(t, src).Effective())
		if strings.Contains(out, "SECRET") || !strings.Contains(out, want) {
			t.Errorf("url %s: want %q in:\n%s", url, want, out)
		}
	}
}
