package config

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
)

// env is a fake environment for ${VAR} expansion.
func env(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

// minimal is the smallest valid file; tests append to it or replace it.
const minimal = `sources:
  stripe:
    provider: stripe
    secrets: [whsec_abc]
`

func mustParse(t *testing.T, src string) *Config {
	t.Helper()
	c, err := Parse("/etc/anyhook/anyhook.yaml", []byte(src), env())
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

func TestDefaults(t *testing.T) {
	t.Parallel()
	c := mustParse(t, minimal+`
  orders:
    provider: generic
    signature: {header: X-Signature}
    ordering: {object: json:order.id, version: json:order.updated_at}
destinations:
  billing:
    url: https://example.com/hooks
    sources: [stripe, orders]
alerts:
  - pagerduty: {routing_key: abc}
`)
	if c.Listen != "127.0.0.1:8080" || c.Database != "sqlite:anyhook.db" {
		t.Errorf("listen, database = %q, %q", c.Listen, c.Database)
	}
	s := c.Sources["stripe"]
	if s.Name != "stripe" || s.Tolerance.D() != 5*time.Minute || s.MaxBody != 10<<20 {
		t.Errorf("source defaults: %+v", s)
	}
	o := c.Sources["orders"]
	if o.Signature.Algorithm != "sha256" || o.Signature.Encoding != "hex" || o.Signature.None {
		t.Errorf("signature defaults: %+v", o.Signature)
	}
	if o.Ordering.Stale != "deliver" {
		t.Errorf("ordering.stale = %q, want deliver (the default)", o.Ordering.Stale)
	}
	d := c.Destinations["billing"]
	want := Destination{
		Name: "billing", URL: "https://example.com/hooks", Sources: []string{"stripe", "orders"},
		Timeout: Duration(15 * time.Second), MaxAttempts: 8,
		Backoff:      Backoff{Initial: Duration(5 * time.Second), Max: Duration(2 * time.Hour)},
		OnStaleClaim: "reclaim", StalePolicy: anyhook.Reclaim, MaxInFlight: 64,
	}
	if !equalDest(*d, want) {
		t.Errorf("destination = %+v, want %+v", *d, want)
	}
	if got := c.Delivery; got.PollInterval.D() != time.Second || got.Grace.D() != 5*time.Second || got.Shutdown.D() != 10*time.Second {
		t.Errorf("delivery = %+v", got)
	}
	if got := c.Alerts[0].PagerDuty.URL; got != PagerDutyURL {
		t.Errorf("pagerduty.url = %q", got)
	}
	if strings.Join(c.SourceOrder, ",") != "stripe,orders" || strings.Join(c.DestinationOrder, ",") != "billing" {
		t.Errorf("orders: %v %v", c.SourceOrder, c.DestinationOrder)
	}
	if strings.Join(s.Destinations, ",") != "billing" || strings.Join(o.Destinations, ",") != "billing" {
		t.Errorf("derived destinations: %v %v", s.Destinations, o.Destinations)
	}
	if p, ok := c.SQLitePath(); !ok || p != "/etc/anyhook/anyhook.db" {
		t.Errorf("SQLitePath = %q, %v", p, ok)
	}
	if _, ok := c.PostgresURL(); ok {
		t.Error("PostgresURL ok for sqlite")
	}
}

func equalDest(a, b Destination) bool {
	return a.Name == b.Name && a.URL == b.URL && strings.Join(a.Sources, ",") == strings.Join(b.Sources, ",") &&
		a.Timeout == b.Timeout && a.MaxAttempts == b.MaxAttempts && a.Backoff == b.Backoff &&
		a.OnStaleClaim == b.OnStaleClaim && a.StalePolicy == b.StalePolicy && a.MaxInFlight == b.MaxInFlight
}

func TestExplicitValues(t *testing.T) {
	t.Parallel()
	c := mustParse(t, `listen: 0.0.0.0:9090
database: postgres://anyhook@db:5432/anyhook
admin_token: t0k
sources:
  gh:
    provider: github
    secrets: [a, b]
    tolerance: 90s
    max_body: 512KiB
    public_url: https://hooks.example.com/webhooks/gh
  plain:
    provider: generic
    signature: none
    id: json:data.id
    ordering: {object: header:X-Object, version: header:X-Version, stale: deliver}
destinations:
  ship:
    url: http://10.0.0.5/hook
    sources: [gh]
    signing_secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
    timeout: 150ms
    max_attempts: 3
    backoff: {initial: 250ms, max: 10s}
    on_stale_claim: hold
    drop_headers: [X-Internal]
    max_in_flight: 2
    rate: 600/m
delivery:
  poll_interval: 500ms
  grace: 10s
  shutdown: 0s
alerts:
  - slack: https://hooks.slack.com/services/T/B/X
  - webhook: http://127.0.0.1:9100/alerts
`)
	if u, ok := c.PostgresURL(); !ok || u != "postgres://anyhook@db:5432/anyhook" {
		t.Errorf("PostgresURL = %q %v", u, ok)
	}
	if _, ok := c.SQLitePath(); ok {
		t.Error("SQLitePath ok for postgres")
	}
	gh := c.Sources["gh"]
	if gh.Tolerance.D() != 90*time.Second || gh.MaxBody != 512<<10 || len(gh.Secrets) != 2 {
		t.Errorf("gh = %+v", gh)
	}
	if p := c.Sources["plain"]; !p.Signature.None || p.Ordering.Stale != "deliver" || len(p.Destinations) != 0 {
		t.Errorf("plain = %+v", p)
	}
	d := c.Destinations["ship"]
	if d.Timeout.D() != 150*time.Millisecond || d.MaxAttempts != 3 || d.Backoff.Initial.D() != 250*time.Millisecond ||
		d.StalePolicy != anyhook.Hold || d.MaxInFlight != 2 || d.Rate.PerSecond() != 10 {
		t.Errorf("ship = %+v", d)
	}
	if c.Delivery.Shutdown != 0 || c.Delivery.Grace.D() != 10*time.Second {
		t.Errorf("delivery = %+v", c.Delivery)
	}
	if c.Alerts[0].Slack == "" || c.Alerts[1].Webhook == "" {
		t.Errorf("alerts = %+v", c.Alerts)
	}
}

func TestExpand(t *testing.T) {
	t.Parallel()
	c, err := Parse("a.yaml", []byte(`admin_token: ${TOKEN}
database: sqlite:${DIR}/x.db
sources:
  s:
    provider: stripe
    secrets: ["${S1}", "lit$${S1}", "a$b"]
destinations:
  d:
    url: http://${HOST}:9000/
    sources: [s]
    max_attempts: ${N}
    timeout: ${T}
`), env("TOKEN", "secret", "DIR", "/data", "S1", "whsec_1", "HOST", "h", "N", "3", "T", "2s"))
	if err != nil {
		t.Fatal(err)
	}
	if c.AdminToken != "secret" || c.Database != "sqlite:/data/x.db" {
		t.Errorf("token, db = %q, %q", c.AdminToken, c.Database)
	}
	if got := strings.Join(c.Sources["s"].Secrets, " "); got != "whsec_1 lit${S1} a$b" {
		t.Errorf("secrets = %q", got)
	}
	d := c.Destinations["d"]
	if d.URL != "http://h:9000/" || d.MaxAttempts != 3 || d.Timeout.D() != 2*time.Second {
		t.Errorf("d = %+v", d)
	}
	if p, _ := c.SQLitePath(); p != "/data/x.db" {
		t.Errorf("SQLitePath = %q", p)
	}
}

func TestExpandValueIsLiteral(t *testing.T) {
	t.Parallel()
	// A variable's value is not YAML: "true", "~" or "${X}" stay strings.
	c, err := Parse("a.yaml", []byte("admin_token: ${A}\n"+minimal), env("A", "~"))
	if err != nil {
		t.Fatal(err)
	}
	if c.AdminToken != "~" {
		t.Errorf("admin_token = %q", c.AdminToken)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		line int
		key  string
		msg  string
	}{
		{"unset var", "listen: 127.0.0.1:1\nadmin_token: ${ANYHOOK_ADMIN_TOKEN}\n" + minimal,
			2, "admin_token", "environment variable ANYHOOK_ADMIN_TOKEN is not set"},
		{"bad var", "admin_token: ${A-B}\n" + minimal, 1, "admin_token", "invalid environment variable"},
		{"unterminated var", "admin_token: ${A\n" + minimal, 1, "admin_token", "unterminated"},
		{"unknown top key", "lisen: x\n" + minimal, 1, "lisen", `unknown key (did you mean "listen"?)`},
		{"resolve_after too short", "incidents:\n  resolve_after: 0s\n" + minimal, 2, "incidents.resolve_after", "must be at least 1s"},
		{"escalate_events negative", "incidents:\n  escalate_events: -1\n" + minimal, 2, "incidents.escalate_events", "must not be negative"},
		{"reopen_within negative", minimal + "incidents:\n  reopen_within: -1m\n", 6, "incidents.reopen_within", "must not be negative"},
		{"incidents unknown key", minimal + "incidents:\n  resolve_afte: 1m\n", 6, "incidents.resolve_afte", "unknown key"},
		{"incident retention short", minimal + "incidents:\n  retention: 1h\n", 6, "incidents.retention", "at least 24h"},
		{"incident retention negative", minimal + "incidents:\n  retention: -1h\n", 6, "incidents.retention", "must be 0s"},
		{"incident retention within reopen", minimal + "incidents:\n  reopen_within: 48h\n  retention: 30h\n", 7, "incidents.retention", "longer than incidents.reopen_within (48h0m0s)"},
		{"unknown nested key", minimal + "    secret: [x]\n", 5, "sources.stripe.secret", "unknown key"},
		{"unknown backoff key", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    backoff: {inital: 1s}\n",
			9, "destinations.d.backoff.inital", "unknown key"},
		{"duplicate key", minimal + "    provider: github\n", 5, "sources.stripe.provider", "duplicate key (first at line 3)"},
		{"syntax", "sources: [\n", 1, "", "invalid YAML"},
		{"not a mapping", "- a\n- b\n", 1, "", "must be a mapping"},
		{"two documents", minimal + "---\nlisten: x\n", 5, "", "more than one YAML document"},
		{"no sources", "listen: 127.0.0.1:1\n", 0, "sources", "at least one source"},
		{"empty sources", "sources: {}\n", 1, "sources", "at least one source"},
		{"source null", "sources:\n  a:\n", 2, "sources.a", "must be a mapping"},
		{"source name", "sources:\n  a/b:\n    provider: stripe\n", 2, "sources.a/b", "invalid name"},
		{"source dotdot", "sources:\n  ..:\n    provider: stripe\n", 2, "sources...", "invalid name"},
		{"source name too long", "sources:\n  " + strings.Repeat("s", 201) + ":\n    provider: stripe\n", 2, "sources." + strings.Repeat("s", 201), "name of 201 characters: at most 200"},
		{"no provider", "sources:\n  a:\n    secrets: [x]\n", 2, "sources.a.provider", "required"},
		{"bad duration", minimal + "    tolerance: 5\n", 5, "sources.stripe.tolerance", "not a duration"},
		{"zero tolerance", minimal + "    tolerance: 0s\n", 5, "sources.stripe.tolerance", "greater than 0"},
		{"bad size", minimal + "    max_body: 10MB\n", 5, "sources.stripe.max_body", "not a size"},
		{"negative size", minimal + "    max_body: -1\n", 5, "sources.stripe.max_body", "not a size"},
		{"size overflow", minimal + "    max_body: 99999999999GiB\n", 5, "sources.stripe.max_body", "not a size"},
		{"secrets scalar", "sources:\n  a:\n    provider: stripe\n    secrets: whsec_supersecret\n", 4, "sources.a.secrets", "must be a list"},
		{"empty secret", "sources:\n  a:\n    provider: x\n    secrets: [\"\"]\n", 4, "sources.a.secrets[0]", "is empty"},
		{"public_url", minimal + "    public_url: /webhooks/x\n", 5, "sources.stripe.public_url", "absolute"},
		{"api_base", minimal + "    api_key: sk_test_x\n    api_base: api.stripe.com\n", 6, "sources.stripe.api_base", "absolute"},
		{"api_base over http", minimal + "    api_key: sk_test_x\n    api_base: http://api.stripe.com\n", 6, "sources.stripe.api_base", "must be https://"},
		{"api_base over http to a private address", minimal + "    api_key: sk_test_x\n    api_base: http://10.0.0.7:8080\n", 6, "sources.stripe.api_base", "not 10.0.0.7"},
		{"api_key without backfill", "sources:\n  s:\n    provider: shopify\n    secrets: [x]\n    api_key: k\n", 5, "sources.s.api_key", "provider shopify has no backfill"},
		{"backfill on stripe", minimal + "    api_key: sk_test_x\n    backfill: {repo: a/b, hook_id: 1}\n", 6, "sources.stripe.backfill", "only a github source"},
		{"github api_key without hook", "sources:\n  gh:\n    provider: github\n    secrets: [x]\n    api_key: ghp_x\n", 2, "sources.gh.backfill", "names its hook"},
		{"github repo and org", "sources:\n  gh:\n    provider: github\n    secrets: [x]\n    api_key: ghp_x\n    backfill: {repo: a/b, org: a, hook_id: 1}\n", 6, "sources.gh.backfill", "either repo"},
		{"github bad repo", "sources:\n  gh:\n    provider: github\n    secrets: [x]\n    api_key: ghp_x\n    backfill:\n      repo: ab\n      hook_id: 1\n", 7, "sources.gh.backfill.repo", "owner/name"},
		{"github no hook_id", "sources:\n  gh:\n    provider: github\n    secrets: [x]\n    api_key: ghp_x\n    backfill: {org: a}\n", 6, "sources.gh.backfill.hook_id", "hook's id"},
		{"signature scalar", "sources:\n  g:\n    provider: generic\n    signature: nope\n", 4, "sources.g.signature", `must be "none"`},
		{"signature algorithm", "sources:\n  g:\n    provider: generic\n    signature:\n      header: X-S\n      algorithm: md5\n",
			6, "sources.g.signature.algorithm", "sha1, sha256 or sha512"},
		{"signature encoding", "sources:\n  g:\n    provider: generic\n    signature: {header: X-S, encoding: b32}\n",
			4, "sources.g.signature.encoding", "hex or base64"},
		{"signature unknown key", "sources:\n  g:\n    provider: generic\n    signature: {headr: X-S}\n",
			4, "sources.g.signature.headr", "unknown key"},
		{"id", "sources:\n  g:\n    provider: generic\n    signature: none\n    id: body:id\n", 5, "sources.g.id", "header:NAME or json:PATH"},
		{"ordering stale", "sources:\n  g:\n    provider: generic\n    ordering:\n      object: json:a\n      version: json:v\n      stale: drop\n",
			7, "sources.g.ordering.stale", "skip or deliver"},
		{"ordering object", "sources:\n  g:\n    provider: generic\n    ordering: {version: json:v}\n", 4, "sources.g.ordering.object", "required"},
		{"empty admin token", "admin_token: \"  \"\nsources:\n  s: {provider: stripe, secrets: [x]}\n", 1, "admin_token", "is empty"},
		{"twilio without public_url", "sources:\n  sms:\n    provider: twilio\n    secrets: [x]\n", 2, "sources.sms.public_url", "required for twilio"},
		{"ordering half override", "sources:\n  s:\n    provider: stripe\n    secrets: [x]\n    ordering: {object: json:a}\n", 5, "sources.s.ordering.version", "required"},
		{"database", "database: mysql://x\n" + minimal, 1, "database", "sqlite:PATH or postgres://"},
		{"database sqlite empty", "database: 'sqlite:'\n" + minimal, 1, "database", "sqlite:PATH"},
		{"listen", "listen: 8080\n" + minimal, 1, "listen", "HOST:PORT"},
		{"token required", "listen: 0.0.0.0:8080\n" + minimal, 1, "listen", "admin_token is required"},
		{"token required empty", "listen: :8080\nadmin_token: ''\n" + minimal, 2, "admin_token", "is empty"},
		{"dest null", minimal + "destinations:\n  d:\n", 6, "destinations.d", "must be a mapping"},
		{"dest url missing", minimal + "destinations:\n  d:\n    sources: [stripe]\n", 6, "destinations.d.url", "required"},
		{"dest url relative", minimal + "destinations:\n  d:\n    url: /hooks\n    sources: [stripe]\n", 7, "destinations.d.url", "absolute"},
		{"dest url scheme", minimal + "destinations:\n  d:\n    url: ftp://x/\n    sources: [stripe]\n", 7, "destinations.d.url", "absolute"},
		{"dest sources missing", minimal + "destinations:\n  d:\n    url: http://x/\n", 6, "destinations.d.sources", "required"},
		{"dest unknown source", minimal + "destinations:\n  d:\n    url: http://x/\n    sources:\n      - stripe\n      - nope\n",
			10, "destinations.d.sources[1]", `unknown source "nope"`},
		{"dest source twice", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe, stripe]\n",
			8, "destinations.d.sources[1]", "listed twice"},
		{"max_attempts zero", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    max_attempts: 0\n",
			9, "destinations.d.max_attempts", "at least 1"},
		{"max_attempts text", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    max_attempts: many\n",
			9, "destinations.d.max_attempts", "must be an integer"},
		{"on_stale_claim", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    on_stale_claim: drop\n",
			9, "destinations.d.on_stale_claim", "reclaim or hold"},
		{"backoff order", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    backoff:\n      initial: 1h\n      max: 1m\n",
			9, "destinations.d.backoff", "initial (1h0m0s) is greater than max (1m0s)"},
		{"backoff zero", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    backoff: {initial: 0s}\n",
			9, "destinations.d.backoff.initial", "greater than 0"},
		{"timeout zero", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    timeout: 0s\n",
			9, "destinations.d.timeout", "greater than 0"},
		{"signing secret", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    signing_secret: whsec_!!\n",
			9, "destinations.d.signing_secret", "Standard Webhooks secret"},
		{"signing secret too short", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    signing_secret: notwhsec\n",
			9, "destinations.d.signing_secret", "24 to 64 random bytes"},
		{"max_in_flight", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    max_in_flight: -1\n",
			9, "destinations.d.max_in_flight", "at least 1"},
		{"auto_pause null", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    auto_pause:\n", 9, "destinations.d.auto_pause", "must be a mapping"},
		{"auto_pause no rule", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    auto_pause: {probe_every: 10s}\n", 9, "destinations.d.auto_pause", "needs a rule"},
		{"auto_pause two rules", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    auto_pause:\n      consecutive_failures: 5\n      failure_rate: 0.5\n      window: 100\n",
			9, "destinations.d.auto_pause", "both consecutive_failures and failure_rate"},
		{"auto_pause consecutive", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    auto_pause:\n      consecutive_failures: 1\n", 10, "destinations.d.auto_pause.consecutive_failures", "from 2 to 10000, not 1"},
		{"auto_pause rate", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    auto_pause:\n      failure_rate: 1.5\n      window: 100\n", 10, "destinations.d.auto_pause.failure_rate", "above 0 and at most 1"},
		{"auto_pause rate no window", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    auto_pause:\n      failure_rate: 0.5\n", 9, "destinations.d.auto_pause.window", "required with failure_rate"},
		{"auto_pause window", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    auto_pause:\n      failure_rate: 0.5\n      window: 20000\n", 11, "destinations.d.auto_pause.window", "from 10 to 10000"},
		{"auto_pause probe_every", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    auto_pause:\n      consecutive_failures: 20\n      probe_every: 2h\n", 11, "destinations.d.auto_pause.probe_every", "from 1s to 1h0m0s, not 2h0m0s"},
		{"rate zero", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    rate: 0\n",
			9, "destinations.d.rate", "positive number"},
		{"rate unit", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    rate: 5/day\n",
			9, "destinations.d.rate", "per minute (600/m)"},
		{"drop_headers", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    drop_headers: [\"a b\"]\n",
			9, "destinations.d.drop_headers[0]", "not a valid header name"},
		{"order value", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    order: fifo\n",
			9, "destinations.d.order", `must be per_object, not "fifo"`},
		{"order empty", minimal + "destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    order: ''\n",
			9, "destinations.d.order", "is empty"},
		{"order without ordering rules", minimal + "  g:\n    provider: generic\n    signature: none\ndestinations:\n  d:\n    url: http://x/\n    sources: [stripe, g]\n    order: per_object\n",
			12, "destinations.d.order", `source "g" (provider generic) has none: set sources.g.ordering.object and .version`},
		{"filter syntax", minimal + "destinations:\n  billing:\n    url: http://x/\n    sources: [stripe]\n    filter: 'type.startsWith(\"invoice.\") ||'\n",
			9, "destinations.billing.filter", "invalid CEL expression: column"},
		{"filter undeclared", minimal + "destinations:\n  billing:\n    url: http://x/\n    sources: [stripe]\n    filter: event_type == 'x'\n",
			9, "destinations.billing.filter", "undeclared reference to 'event_type'"},
		{"filter not bool", minimal + "destinations:\n  billing:\n    url: http://x/\n    sources: [stripe]\n    filter: type + 'x'\n",
			9, "destinations.billing.filter", "a filter must be true or false"},
		{"filter empty", minimal + "destinations:\n  billing:\n    url: http://x/\n    sources: [stripe]\n    filter: ''\n",
			9, "destinations.billing.filter", "is empty"},
		{"filter block", minimal + "destinations:\n  billing:\n    url: http://x/\n    sources: [stripe]\n    filter: >-\n      type == 'a' &&\n      body.x >\n",
			9, "destinations.billing.filter", "invalid CEL expression"},
		{"type", "sources:\n  g:\n    provider: generic\n    signature: none\n    type: body:type\n", 5, "sources.g.type", "header:NAME or json:PATH"},
		{"dest name", minimal + "destinations:\n  'a b':\n    url: http://x/\n    sources: [stripe]\n", 6, "destinations.a b", "invalid name"},
		{"alert none", minimal + "alerts:\n  - {}\n", 6, "alerts[0]", "exactly one of webhook, slack or pagerduty"},
		{"alert two", minimal + "alerts:\n  - webhook: http://a/\n    slack: http://b/\n", 6, "alerts[0]", "exactly one"},
		{"alert url", minimal + "alerts:\n  - webhook: http://a/\n  - slack: hooks.slack.com/x\n", 7, "alerts[1].slack", "absolute"},
		{"alert pd key", minimal + "alerts:\n  - pagerduty: {url: http://pd/}\n", 6, "alerts[0].pagerduty.routing_key", "required"},
		{"alert unknown", minimal + "alerts:\n  - email: a@b\n", 6, "alerts[0].email", "unknown key"},
		{"alerts mapping", minimal + "alerts:\n  slack: http://x/\n", 6, "alerts", "must be a list"},
		{"grace", minimal + "delivery:\n  grace: 11s\n", 6, "delivery.grace", "at most 10s"},
		{"poll", minimal + "delivery:\n  poll_interval: 0s\n", 6, "delivery.poll_interval", "greater than 0"},
		{"shutdown", minimal + "delivery:\n  shutdown: -1s\n", 6, "delivery.shutdown", "negative"},
		{"merge key", "x: &a {provider: stripe}\n" + minimal, 1, "x", "unknown key"},
		{"merge key used", "sources:\n  s:\n    <<: {provider: stripe}\n", 3, "sources.s.<<", "merge keys"},
		{"non-scalar key", "? [a]\n: b\n" + minimal, 1, "", "keys must be plain strings"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("conf/anyhook.yaml", []byte(tt.src), env())
			if err == nil {
				t.Fatalf("no error; want %q", tt.msg)
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not *Error: %v", err, err)
			}
			msg := err.Error()
			if strings.Contains(msg, "\n") {
				t.Errorf("multi-line error: %q", msg)
			}
			prefix := "conf/anyhook.yaml:"
			if tt.line > 0 {
				prefix += strconv.Itoa(tt.line) + ":"
			}
			if !strings.HasPrefix(msg, prefix) {
				t.Errorf("error %q does not start with %q", msg, prefix)
			}
			if ce.File != "conf/anyhook.yaml" || ce.Line != tt.line || ce.Key != tt.key {
				t.Errorf("error fields = %q %d %q, want line %d key %q (%s)", ce.File, ce.Line, ce.Key, tt.line, tt.key, msg)
			}
			if tt.key != "" && !strings.Contains(msg, " "+tt.key+": ") {
				t.Errorf("error %q does not name key %q", msg, tt.key)
			}
			if !strings.Contains(msg, tt.msg) {
				t.Errorf("error %q does not contain %q", msg, tt.msg)
			}
			if strings.Contains(msg, "supersecret") {
				t.Errorf("error %q quotes a secret", msg)
			}
		})
	}
}

func TestErrorFormat(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		e    Error
		want string
	}{
		{Error{File: "a.yaml", Line: 3, Key: "admin_token", Msg: "x"}, "a.yaml:3: admin_token: x"},
		{Error{File: "a.yaml", Key: "sources", Msg: "x"}, "a.yaml: sources: x"},
		{Error{File: "a.yaml", Line: 2, Msg: "bad\n  thing\n"}, "a.yaml:2: bad; thing"},
	} {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
}

func TestErrorf(t *testing.T) {
	t.Parallel()
	c, err := Parse("anyhook.yaml", []byte(`# comment
sources:
  orders:
    provider: generic

    id: header:X-Id
alerts:
  - webhook: http://x/
`), env())
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		key  string
		want string
	}{
		// Not written: the nearest enclosing key's line.
		{"sources.orders.signature", `anyhook.yaml:3: sources.orders.signature: required for generic sources (say "signature: none")`},
		{"sources.orders.id", `anyhook.yaml:6: sources.orders.id: required for generic sources (say "signature: none")`},
		{"alerts[0].webhook", `anyhook.yaml:8: alerts[0].webhook: required for generic sources (say "signature: none")`},
		{"nowhere", `anyhook.yaml: nowhere: required for generic sources (say "signature: none")`},
	} {
		err := c.Errorf(tt.key, "required for %s sources (say %q)", "generic", "signature: none")
		if err.Error() != tt.want {
			t.Errorf("Errorf(%q) = %q, want %q", tt.key, err, tt.want)
		}
	}
}

func TestSizes(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want Size
		str  string
	}{
		{"1024", 1024, "1KiB"},
		{"1000", 1000, "1000"},
		{"0", 0, "0"},
		{"512KiB", 512 << 10, "512KiB"},
		{"10MiB", 10 << 20, "10MiB"},
		{"10 MiB", 10 << 20, "10MiB"},
		{"2GiB", 2 << 30, "2GiB"},
		{"1536MiB", 1536 << 20, "1536MiB"},
		{"7B", 7, "7"},
	} {
		var s Size
		if err := s.parseScalar(tt.in); err != nil || s != tt.want || s.String() != tt.str {
			t.Errorf("Size(%q) = %d (%s), %v; want %d (%s)", tt.in, s, s, err, tt.want, tt.str)
		}
	}
	for _, bad := range []string{"", "MiB", "10MB", "1.5MiB", "-1", "+1", "0x10", "1TiB", "9223372036854775807KiB"} {
		var s Size
		if err := s.parseScalar(bad); err == nil {
			t.Errorf("Size(%q) = %d, want error", bad, s)
		}
	}
}

func TestDurations(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want time.Duration
	}{
		{"150ms", 150 * time.Millisecond},
		{"5m", 5 * time.Minute},
		{"1h30m", 90 * time.Minute},
		{"0", 0},
	} {
		var d Duration
		if err := d.parseScalar(tt.in); err != nil || d.D() != tt.want {
			t.Errorf("Duration(%q) = %v, %v", tt.in, d, err)
		}
	}
	for _, bad := range []string{"", "5", "five minutes", "1d"} {
		var d Duration
		if err := d.parseScalar(bad); err == nil {
			t.Errorf("Duration(%q) = %v, want error", bad, d)
		}
	}
}

func TestSQLitePath(t *testing.T) {
	t.Parallel()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		file, db, want string
	}{
		{"/etc/anyhook/anyhook.yaml", "sqlite:anyhook.db", "/etc/anyhook/anyhook.db"},
		{"/etc/anyhook/anyhook.yaml", "sqlite:data/a.db", "/etc/anyhook/data/a.db"},
		{"/etc/anyhook/anyhook.yaml", "sqlite:../a.db", "/etc/a.db"},
		{"/etc/anyhook/anyhook.yaml", "sqlite:/var/lib/a.db", "/var/lib/a.db"},
		{"/etc/anyhook/anyhook.yaml", "sqlite::memory:", ":memory:"},
		{"anyhook.yaml", "sqlite:anyhook.db", filepath.Join(wd, "anyhook.db")},
		{"sub/anyhook.yaml", "sqlite:anyhook.db", filepath.Join(wd, "sub", "anyhook.db")},
	} {
		c, err := Parse(tt.file, []byte("database: '"+tt.db+"'\n"+minimal), env())
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := c.SQLitePath(); !ok || got != tt.want {
			t.Errorf("%s with %s: SQLitePath = %q, %v; want %q", tt.file, tt.db, got, ok, tt.want)
		}
		if c.Database != tt.db {
			t.Errorf("Database changed to %q", c.Database)
		}
	}
}

func TestLoad(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "anyhook.yaml")
	if err := os.WriteFile(path, []byte(minimal), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != path || c.Dir != dir {
		t.Errorf("Path, Dir = %q, %q", c.Path, c.Dir)
	}
	missing := filepath.Join(dir, "nope.yaml")
	_, err = Load(missing)
	var ce *Error
	if !errors.As(err, &ce) || !errors.Is(err, os.ErrNotExist) || !strings.HasPrefix(err.Error(), missing+": ") ||
		!strings.Contains(err.Error(), "not found") {
		t.Errorf("Load(missing) = %v", err)
	}
}

func TestResolve(t *testing.T) {
	// Not parallel: it sets the environment.
	t.Setenv(EnvPath, "")
	if got := Resolve(""); got != "anyhook.yaml" {
		t.Errorf("Resolve() = %q", got)
	}
	t.Setenv(EnvPath, "/env/a.yaml")
	if got := Resolve(""); got != "/env/a.yaml" {
		t.Errorf("Resolve() with env = %q", got)
	}
	if got := Resolve("flag.yaml"); got != "flag.yaml" {
		t.Errorf("Resolve(flag) = %q", got)
	}
}

func TestEmptyFile(t *testing.T) {
	t.Parallel()
	for _, src := range []string{"", "# only a comment\n", "---\n", "~\n"} {
		_, err := Parse("a.yaml", []byte(src), env())
		if err == nil || !strings.Contains(err.Error(), "a.yaml: sources: at least one source is required") {
			t.Errorf("Parse(%q) = %v", src, err)
		}
	}
}

func TestAliases(t *testing.T) {
	t.Parallel()
	c := mustParse(t, minimal+`
destinations:
  a: &dest
    url: http://x/
    sources: [stripe]
  b: *dest
`)
	if c.Destinations["b"].URL != "http://x/" || c.Destinations["b"].Name != "b" || c.Destinations["a"].Name != "a" {
		t.Errorf("alias: %+v %+v", c.Destinations["a"], c.Destinations["b"])
	}
	if got := strings.Join(c.Sources["stripe"].Destinations, ","); got != "a,b" {
		t.Errorf("derived = %q", got)
	}
}

func TestExample(t *testing.T) {
	t.Parallel()
	c, err := Parse("../../examples/anyhook.yaml", mustRead(t, "../../examples/anyhook.yaml"), env())
	if err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:8080" || c.Database != "sqlite:anyhook.db" || c.AdminToken == "" {
		t.Errorf("example server settings: %q %q", c.Listen, c.Database)
	}
	if c.Sources["stripe"] == nil || c.Sources["demo"] == nil || !c.Sources["demo"].Signature.None ||
		c.Sources["demo"].ID != "header:X-Request-Id" {
		t.Errorf("example sources: %v", c.SourceOrder)
	}
	if o := c.Sources["stripe"].Ordering; o == nil || o.Stale != "deliver" {
		t.Errorf("example stripe ordering: %+v, want stale: deliver spelled out", o)
	}
	if d := c.Destinations["echo"]; d == nil || d.URL != "http://127.0.0.1:9000/hooks" || d.Backoff.Initial.D() != time.Second {
		t.Errorf("example destination: %+v", d)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte("admin_token: ${X}\nlisten: 0.0.0.0:1\n" + minimal))
	f.Add(mustReadF(f, "../../examples/anyhook.yaml"))
	f.Add([]byte("a: &a [*a, *a]\n"))
	f.Add([]byte("sources: {s: {provider: generic, signature: none, ordering: {object: json:a, version: json:b}}}\n" +
		"destinations: {d: {url: 'http://x/', sources: [s], backoff: {initial: 1ms, max: 1ms}}}\n" +
		"alerts: [{pagerduty: {routing_key: k}}, {slack: 'https://x/'}]\ndelivery: {grace: 1s}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse("fuzz.yaml", data, env("X", "x"))
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not *Error: %v", err, err)
			}
			// Every problem is one line of its own.
			for _, e := range List(err) {
				if strings.ContainsAny(e.Error(), "\n") {
					t.Fatalf("multi-line error %q", e)
				}
			}
			if n := len(List(err)); strings.Count(err.Error(), "\n") != n-1 {
				t.Fatalf("%d problems on %d lines: %q", n, strings.Count(err.Error(), "\n")+1, err)
			}
			return
		}
		if len(c.Sources) == 0 || len(c.SourceOrder) != len(c.Sources) {
			t.Fatalf("valid config without sources or order: %+v", c)
		}
	})
}

func mustReadF(f *testing.F, path string) []byte {
	b, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}

func TestRateUnits(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]float64{"50": 50, "50/s": 50, " 2.5 ": 2.5, "600/m": 10, "3600/h": 1, "1/m": 1.0 / 60} {
		var r Rate
		if err := r.parseScalar(in); err != nil || r.PerSecond() != want {
			t.Errorf("rate %q = %v, %v; want %v", in, r.PerSecond(), err, want)
		}
	}
	for _, in := range []string{"", "-1", "0/s", "fast", "NaN", "+Inf", "5/d", "/s"} {
		var r Rate
		if err := r.parseScalar(in); err == nil {
			t.Errorf("rate %q = %v, want an error", in, r.PerSecond())
		}
	}
}

// A provider with built-in ordering may set only the stale policy.
func TestOrderingStaleOnly(t *testing.T) {
	c, err := Parse("anyhook.yaml", []byte("sources:\n  s:\n    provider: stripe\n    secrets: [x]\n    ordering: {stale: deliver}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if o := c.Sources["s"].Ordering; o == nil || o.Stale != "deliver" || o.Object != "" || o.Version != "" {
		t.Fatalf("ordering = %+v, want stale: deliver over the built-in fields", o)
	}
	if _, err := Parse("anyhook.yaml", []byte("sources:\n  g:\n    provider: generic\n    signature: none\n    ordering: {stale: deliver}\n"), nil); err == nil || !strings.Contains(err.Error(), "ordering.object") {
		t.Fatalf("generic with only a stale policy: err = %v, want ordering.object required", err)
	}
}

// order: per_object takes sources whose events carry an object and a
// version: a provider with built-in ordering, or a generic source whose
// ordering rule names both.
func TestOrderPerObject(t *testing.T) {
	c := mustParse(t, minimal+"  g:\n    provider: generic\n    signature: none\n    ordering: {object: json:id, version: json:v}\n"+
		"destinations:\n  d:\n    url: http://x/\n    sources: [stripe, g]\n    order: per_object\n  e:\n    url: http://x/\n    sources: [g]\n")
	if c.Destinations["d"].Order != OrderPerObject || c.Destinations["e"].Order != "" {
		t.Fatalf("order = %q, %q", c.Destinations["d"].Order, c.Destinations["e"].Order)
	}
}

// TestAPIBase: where api_base may send the api_key. https:// anywhere
// (the scheme in any case), http:// only to a loopback host (named as the
// docs list them: localhost. with its trailing dot is refused, on the
// safe side); never with
// credentials of its own (the key is api_key; a user name or password in
// the URL would be shown by errors and config check), a query or a
// fragment (the API's paths are appended to it). An error never quotes
// what the URL holds beyond its host.
func TestAPIBase(t *testing.T) {
	t.Parallel()
	for _, base := range []string{"https://api.stripe.com", "HTTPS://api.stripe.com", "https://ghe.example/api/v3/",
		"http://localhost:12111", "http://127.0.0.2:1", "http://[::1]:8080"} {
		if _, err := Parse("a.yaml", []byte(minimal+"    api_key: sk_test_x\n    api_base: "+base+"\n"), env()); err != nil {
			t.Errorf("api_base %s: %v", base, err)
		}
	}
	for base, want := range map[string]string{
		"http://127.0.0.1.example.com":            "not 127.0.0.1.example.com",
		"http://localhost.example.com:80":         "not localhost.example.com",
		"http://localhost.:8080":                  "not localhost.",
		"https://api.stripe.com@SECRET.example":   "user name or password",
		"https://SECRETUSER:SECRETPW@ghe.example": "user name or password",
		"https://SECRETUSER@ghe.example/api/v3":   "user name or password",
		"http://SECRETUSER:SECRETPW@127.0.0.1:1":  "user name or password",
		"https://api.stripe.com/?SECRETQ=1":       "query",
		"https://api.stripe.com/#SECRETF":         "fragment",
	} {
		_, err := Parse("a.yaml", []byte(minimal+"    api_key: sk_test_x\n    api_base: "+base+"\n"), env())
		if err == nil || !strings.Contains(err.Error(), "sources.stripe.api_base") || !strings.Contains(err.Error(), want) ||
			strings.Contains(err.Error(), "SECRET") {
			t.Errorf("api_base %s: %v; want an error about sources.stripe.api_base saying %q, quoting nothing of the URL", base, err, want)
		}
	}
}

// TestAlertCredentialsOverTLS: a Slack URL (itself the credential) and a
// PagerDuty url (the routing_key goes in the body) are https://, or
// http:// to a loopback host, as api_base is; a generic webhook sink may
// be plain http:// like a destination. An error never quotes the URL.
func TestAlertCredentialsOverTLS(t *testing.T) {
	t.Parallel()
	ok := []string{
		"alerts:\n  - slack: https://hooks.slack.com/services/T/B/SECRET\n",
		"alerts:\n  - slack: http://127.0.0.1:9/services/T/B/SECRET\n",
		"alerts:\n  - pagerduty: {routing_key: k, url: \"http://[::1]:9/v2/enqueue\"}\n",
		"alerts:\n  - pagerduty: {routing_key: k}\n",
		"alerts:\n  - webhook: http://alerts.internal/SECRET\n",
	}
	for _, src := range ok {
		if _, err := Parse("a.yaml", []byte(minimal+src), env()); err != nil {
			t.Errorf("%s: %v", src, err)
		}
	}
	for src, key := range map[string]string{
		"alerts:\n  - slack: http://hooks.slack.com/services/T/B/SECRET\n":                      "alerts[0].slack",
		"alerts:\n  - pagerduty: {routing_key: k, url: \"http://pd.example/SECRET/enqueue\"}\n": "alerts[0].pagerduty.url",
	} {
		_, err := Parse("a.yaml", []byte(minimal+src), env())
		if err == nil || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "must be https://") || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("%s: %v; want %s: must be https://, quoting nothing of the URL", src, err, key)
		}
	}
}

func TestIncidentDefaults(t *testing.T) {
	t.Parallel()
	c := mustParse(t, minimal)
	in := c.Incidents
	if in.ResolveAfter.D() != DefaultResolveAfter || in.ReopenWithin.D() != DefaultReopenWithin || in.EscalateEvents != DefaultEscalateEvents ||
		in.EscalateAfter.D() != DefaultEscalateAfter || in.Retention.D() != 90*24*time.Hour || c.AlertDeliveryDead {
		t.Errorf("defaults: %+v, alert_delivery_dead %v", in, c.AlertDeliveryDead)
	}
	c = mustParse(t, minimal+"alert_delivery_dead: true\nincidents:\n  resolve_after: 1m\n  reopen_within: 0s\n  escalate_events: 0\n  escalate_after: 0s\n  retention: 0s\n")
	in = c.Incidents
	if in.ResolveAfter.D() != time.Minute || in.ReopenWithin != 0 || in.EscalateEvents != 0 || in.EscalateAfter != 0 || in.Retention != 0 || !c.AlertDeliveryDead {
		t.Errorf("explicit: %+v, alert_delivery_dead %v", in, c.AlertDeliveryDead)
	}
}
