package config

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// A file with several mistakes gets them all at once, in line order, each
// on a line of its own naming file, line and key; a mistake that only
// repeats another (the key a misspelt one meant, missing) is not listed.
func TestEveryProblemAtOnce(t *testing.T) {
	t.Parallel()
	src := `listen: 8080
sources:
  stripe:
    provider: stripe
    secret: [whsec_abc]
destinations:
  billing:
    url: 127.0.0.1:9000/hooks
    sources: [stripe, strpe]
    max_retries: 3
  crm:
    url: http://127.0.0.1:9001/
    sources: [stripe]
    timeout: 0s
delivery:
  grace: 1m
`
	_, err := Parse("anyhook.yaml", []byte(src), env())
	want := []string{
		`anyhook.yaml:1: listen: must be HOST:PORT`,
		`anyhook.yaml:5: sources.stripe.secret: unknown key (did you mean "secrets"?)`,
		`anyhook.yaml:8: destinations.billing.url: must be an absolute http:// or https:// URL, and this one has no scheme: write http:// (or https://) in front of the host`,
		`anyhook.yaml:9: destinations.billing.sources[1]: unknown source "strpe" (did you mean stripe?)`,
		`anyhook.yaml:10: destinations.billing.max_retries: unknown key (did you mean "max_attempts"?)`,
		`anyhook.yaml:14: destinations.crm.timeout: must be greater than 0`,
		`anyhook.yaml:16: delivery.grace: must be greater than 0 and at most 10s`,
	}
	problems := List(err)
	if len(problems) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v", len(problems), len(want), err)
	}
	for i, p := range problems {
		if !strings.HasPrefix(p.Error(), want[i]) {
			t.Errorf("problem %d = %q, want %q…", i+1, p, want[i])
		}
	}
	if got := strings.Split(err.Error(), "\n"); len(got) != len(want) {
		t.Errorf("the error prints %d lines, want one per problem:\n%s", len(got), err)
	}
	var first *Error
	if !errors.As(err, &first) || first.Line != 1 || first.Key != "listen" {
		t.Errorf("errors.As finds %+v, want the first problem (line 1, listen)", first)
	}
}

// Names other webhook tools use for our keys are suggested.
func TestSynonymsSuggested(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ key, meant string }{
		{"max_retries", "max_attempts"}, {"retries", "max_attempts"}, {"endpoint", "url"}, {"signing_key", "signing_secret"},
	} {
		src := minimal + fmt.Sprintf("destinations:\n  d:\n    url: http://x/\n    sources: [stripe]\n    %s: 3\n", tt.key)
		_, err := Parse("a.yaml", []byte(src), env())
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("destinations.d.%s: unknown key (did you mean %q?)", tt.key, tt.meant)) {
			t.Errorf("%s: %v; want a suggestion of %s", tt.key, err, tt.meant)
		}
	}
	// Only where that key exists: a source has no max_attempts.
	_, err := Parse("a.yaml", []byte(minimal+"    max_retries: 3\n"), env())
	if err == nil || strings.Contains(err.Error(), "max_attempts") {
		t.Errorf("max_retries in a source: %v; want no suggestion of a destination's key", err)
	}
}

// A URL written without its scheme is refused with the fix, never quoting
// the URL (an alert URL is a secret).
func TestURLWithoutScheme(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ key, src string }{
		{"destinations.d.url", minimal + "destinations:\n  d:\n    url: 127.0.0.1:9000/hooks\n    sources: [stripe]\n"},
		{"destinations.d.url", minimal + "destinations:\n  d:\n    url: localhost:9000\n    sources: [stripe]\n"},
		{"alerts[0].slack", minimal + "destinations:\n  d: {url: 'http://x/', sources: [stripe]}\nalerts:\n  - slack: hooks.slack.com/services/T/B/SECRET\n"},
	} {
		_, err := Parse("a.yaml", []byte(tt.src), env())
		if err == nil || !strings.Contains(err.Error(), tt.key+": must be an absolute http:// or https:// URL, and this one has no scheme: write http://") {
			t.Errorf("%s: %v; want the missing scheme named", tt.key, err)
		}
		if err != nil && (strings.Contains(err.Error(), "SECRET") || strings.Contains(err.Error(), "9000")) {
			t.Errorf("%s: the error quotes the URL: %v", tt.key, err)
		}
	}
}

// A secret with white space around it is kept as written, with a warning
// naming its key and line (never the secret).
func TestSecretWithSpaceWarned(t *testing.T) {
	t.Parallel()
	c, err := Parse("a.yaml", []byte(`admin_token: "admin-t0ken "
sources:
  stripe:
    provider: stripe
    secrets: ["whsec_abc", " whsec_def"]
    api_key: "${KEY}"
destinations:
  d: {url: "http://x/", sources: [stripe]}
`), env("KEY", "sk_test_1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if c.AdminToken != "admin-t0ken " || c.Sources["stripe"].Secrets[1] != " whsec_def" || c.Sources["stripe"].APIKey != "sk_test_1\n" {
		t.Errorf("values changed: %q %q %q; want them as written", c.AdminToken, c.Sources["stripe"].Secrets[1], c.Sources["stripe"].APIKey)
	}
	var got []string
	for _, w := range c.Warnings() {
		got = append(got, fmt.Sprintf("%d %s", w.Line, w.Key))
		if !strings.Contains(w.Msg, "white space") || strings.Contains(w.Error(), "whsec_def") || strings.Contains(w.Error(), "t0ken") {
			t.Errorf("warning %q", w)
		}
	}
	if want := "1 admin_token,5 sources.stripe.secrets[1],6 sources.stripe.api_key"; strings.Join(got, ",") != want {
		t.Errorf("warnings at %q, want %q", strings.Join(got, ","), want)
	}
	// Not a secret: no warning (a URL or a path is checked on its own).
	c = mustParse(t, minimal+"destinations:\n  d: {url: 'http://x/', sources: [stripe], filter: ' type == \"x\" '}\n")
	for _, w := range c.Warnings() {
		if strings.Contains(w.Msg, "white space") {
			t.Errorf("a value that is not a secret is warned about: %v", w)
		}
	}
}

// A source no destination lists is warned about, unless it says
// record_only: true; a record-only source that a destination lists is an
// error.
func TestSourceDeliveredNowhere(t *testing.T) {
	t.Parallel()
	c := mustParse(t, minimal+"  audit:\n    provider: github\n    secrets: [x]\ndestinations:\n  d: {url: 'http://x/', sources: [audit]}\n")
	ws := c.Warnings()
	if len(ws) != 1 || ws[0].Error() != "/etc/anyhook/anyhook.yaml:2: sources.stripe: no destination lists this source: its events are recorded but delivered nowhere; add it to a destination's sources, or set record_only: true if that is meant" {
		t.Errorf("warnings = %v; want one about stripe at line 2", ws)
	}
	c = mustParse(t, minimal+"    record_only: true\n")
	if ws := c.Warnings(); len(ws) != 0 {
		t.Errorf("record_only: true: warnings %v", ws)
	}
	_, err := Parse("a.yaml", []byte(minimal+"    record_only: true\ndestinations:\n  d: {url: 'http://x/', sources: [stripe]}\n  e: {url: 'http://x/', sources: [stripe]}\n"), env())
	if err == nil || err.Error() != "a.yaml:5: sources.stripe.record_only: is true, but destinations d, e list the source: remove record_only, or the source from their sources" {
		t.Errorf("record_only with destinations: %v", err)
	}
}

// LoadFor skips a value the command does not use when its ${VAR} is unset
// or its ${file:PATH} missing, and still fails on one it uses.
func TestLoadForSkipsUnusedValues(t *testing.T) {
	t.Parallel()
	src := []byte(`database: ${DB}
sources:
  stripe:
    provider: stripe
    secrets: ["${STRIPE_SECRET}"]
    api_key: ${STRIPE_API_KEY}
destinations:
  d:
    url: http://x/
    sources: [stripe]
    signing_secret: ${file:missing-secret}
    filter: type == "${TYPE}"
`)
	uses := Uses("database", "destinations.*.filter", "destinations.*.sources")
	c, err := ParseFor("a.yaml", src, env("DB", "sqlite:x.db", "TYPE", "invoice.paid"), uses)
	if err != nil {
		t.Fatalf("unused values unset: %v", err)
	}
	var got []string
	for _, s := range c.Skipped {
		got = append(got, s.Error())
	}
	want := []string{
		"a.yaml:5: sources.stripe.secrets[0]: environment variable STRIPE_SECRET is not set",
		"a.yaml:6: sources.stripe.api_key: environment variable STRIPE_API_KEY is not set",
		"a.yaml:11: destinations.d.signing_secret: ${file:missing-secret}: file " + c.Dir + "/missing-secret not found",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("skipped:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if c.Database != "sqlite:x.db" || c.Destinations["d"].Filter != `type == "invoice.paid"` || c.Sources["stripe"].APIKey != "" {
		t.Errorf("values: %q %q %q", c.Database, c.Destinations["d"].Filter, c.Sources["stripe"].APIKey)
	}
	// A value it uses is an error, as in Load.
	_, err = ParseFor("a.yaml", src, env("TYPE", "x"), uses)
	if err == nil || err.Error() != "a.yaml:1: database: environment variable DB is not set" {
		t.Errorf("used value unset: %v", err)
	}
	// Parse (serve, config check) uses everything.
	_, err = Parse("a.yaml", src, env("DB", "sqlite:x.db", "TYPE", "x"))
	if n := len(List(err)); n != 3 || !strings.Contains(err.Error(), "STRIPE_API_KEY is not set") {
		t.Errorf("Parse: %d problems: %v; want the three unset values", n, err)
	}
	// A mistake in a value that is there is still reported.
	_, err = ParseFor("a.yaml", []byte(string(src)+"    timeout: 0s\n"), env("DB", "sqlite:x.db", "TYPE", "x"), uses)
	if err == nil || err.Error() != "a.yaml:13: destinations.d.timeout: must be greater than 0" {
		t.Errorf("a mistake beside skipped values: %v", err)
	}
}

func TestUses(t *testing.T) {
	t.Parallel()
	uses := Uses("database", "log", "sources.gh.api_key", "destinations.*.filter")
	for key, want := range map[string]bool{
		"database": true, "databases": false, "log.key_file": true, "sources.gh.api_key": true, "sources.gh.api_keys": false,
		"sources.ghx.api_key": false, "destinations.a.b.filter": true, "destinations.d.url": false, "listen": false,
	} {
		if got := uses(key); got != want {
			t.Errorf("uses(%q) = %v, want %v", key, got, want)
		}
	}
}

// A URL whose port cannot be one is refused when the config is read, not
// at every attempt.
func TestURLPortOutOfRange(t *testing.T) {
	t.Parallel()
	for _, port := range []string{"99999", "0"} {
		src := minimal + "destinations:\n  d:\n    url: https://localhost:" + port + "/x\n    sources: [stripe]\n"
		_, err := Parse("a.yaml", []byte(src), env())
		if err == nil || !strings.Contains(err.Error(), "destinations.d.url: URL's port "+port+" is not a port") {
			t.Errorf("port %s: %v; want the port refused", port, err)
		}
	}
}

// A destination that posts back into this gateway's own source is warned
// about (a loop when it delivers that source); one elsewhere is not.
func TestOwnSourceWarned(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ url, want string }{
		{"http://127.0.0.1:8080/webhooks/stripe", "which this destination delivers again: a loop"},
		{"http://localhost:8080/webhooks/stripe/", "which this destination delivers again: a loop"},
		{"http://127.0.0.1:8080/webhooks/other", "each delivery arrives as an event of other"},
		{"http://127.0.0.1:9090/webhooks/stripe", ""},
		{"http://10.0.0.1:8080/webhooks/stripe", ""},
		{"http://127.0.0.1:8080/hooks", ""},
	} {
		c := mustParse(t, "listen: 127.0.0.1:8080\n"+minimal+"  other: {provider: github, secrets: [x], record_only: true}\n"+
			"destinations:\n  d: {url: '"+tt.url+"', sources: [stripe]}\n")
		var got string
		for _, w := range c.Warnings() {
			if w.Key == "destinations.d.url" {
				got = w.Msg
			}
		}
		if tt.want == "" && got != "" || !strings.Contains(got, tt.want) {
			t.Errorf("url %s: warning %q; want %q", tt.url, got, tt.want)
		}
	}
}

// A source sheds by default when its provider retries a 503, queues when
// it does not; a wrong value or an out-of-range max_queue_wait names its
// key and line.
func TestOverloadSettings(t *testing.T) {
	t.Parallel()
	c := mustParse(t, minimal+"  gh:\n    provider: github\n    secrets: [s]\n")
	if c.Sources["stripe"].Overload != "shed" || c.Sources["gh"].Overload != "queue" || c.Ingest.MaxQueueWait.D() != DefaultMaxQueueWait {
		t.Errorf("defaults: stripe %q, github %q, max_queue_wait %s", c.Sources["stripe"].Overload, c.Sources["gh"].Overload, c.Ingest.MaxQueueWait)
	}
	c = mustParse(t, minimal+"    overload: queue\ningest: {max_queue_wait: 0s}\n")
	if c.Sources["stripe"].Overload != "queue" || c.Ingest.MaxQueueWait != 0 {
		t.Errorf("explicit: %q, %s", c.Sources["stripe"].Overload, c.Ingest.MaxQueueWait)
	}
	for src, want := range map[string]string{
		minimal + "    overload: drop\n":           `a.yaml:5: sources.stripe.overload: must be shed or queue, not "drop"`,
		minimal + "ingest: {max_queue_wait: 1m}\n": "a.yaml:5: ingest.max_queue_wait: must be between 0 (never shed) and 10s, not 1m0s",
	} {
		if _, err := Parse("a.yaml", []byte(src), env()); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %s", src, err, want)
		}
	}
}
