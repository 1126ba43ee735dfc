package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFileReference(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("secrets/stripe", "whsec_from_file\n")
	abs := write("token", "tok-abs\r\n")
	write("two-lines", "a\nb\n\n")
	cfgPath := filepath.Join(dir, "anyhook.yaml")
	src := "admin_token: ${file:" + abs + "}\n" +
		"sources:\n  stripe:\n    provider: stripe\n    secrets: ['${file:secrets/stripe}', 'x${file:two-lines}y']\n"
	c, err := Parse(cfgPath, []byte(src), env())
	if err != nil {
		t.Fatal(err)
	}
	if c.AdminToken != "tok-abs" {
		t.Errorf("admin_token = %q, want tok-abs (trailing CRLF trimmed)", c.AdminToken)
	}
	if got := c.Sources["stripe"].Secrets; got[0] != "whsec_from_file" || got[1] != "xa\nb\ny" {
		t.Errorf("secrets = %q: relative to the config dir, one trailing newline trimmed", got)
	}

	bad := []struct {
		name, src string
		want      []string
	}{
		{"missing", "admin_token: ${file:nope.txt}\n" + minimal, []string{"anyhook.yaml:1", "admin_token", filepath.Join(dir, "nope.txt"), "not found"}},
		{"directory", minimal + "    tolerance: ${file:secrets}\n", []string{"anyhook.yaml:5", "sources.stripe.tolerance", "not a regular file"}},
		{"empty path", "admin_token: ${file:}\n" + minimal, []string{"anyhook.yaml:1", "needs a path"}},
		{"literal", "admin_token: $${file:x}\n" + minimal, nil},
	}
	for _, tt := range bad {
		c, err := Parse(cfgPath, []byte(tt.src), env())
		if tt.want == nil {
			if err != nil || c.AdminToken != "${file:x}" {
				t.Errorf("%s: %v, token %q", tt.name, err, c.AdminToken)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: parsed, want an error", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not name %q", tt.name, err, w)
			}
		}
	}

	// A huge file (or /dev/zero) is refused, not read to the end.
	big := write("big", strings.Repeat("x", maxFileValue+1))
	if _, err := Parse(cfgPath, []byte("admin_token: ${file:"+big+"}\n"+minimal), env()); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("big file: %v", err)
	}
	if _, err := Parse(cfgPath, []byte("admin_token: ${file:/dev/zero}\n"+minimal), env()); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("/dev/zero: %v", err)
	}
	// The error never shows the contents of a file it did read.
	write("notwhsec", "sk_secret_contents\n")
	_, err = Parse(cfgPath, []byte("sources:\n  s:\n    provider: stripe\n    secrets: [x]\n    max_body: ${file:notwhsec}\n"), env())
	if err == nil || strings.Contains(err.Error(), "sk_secret_contents") {
		t.Errorf("bad value from a file: %v", err)
	}
}

func TestRateLimitAndTLS(t *testing.T) {
	t.Parallel()
	c := mustParse(t, minimal+"    rate_limit: {rps: 50}\n"+`destinations:
  d: {url: "https://x/", sources: [stripe], tls_insecure_skip_verify: true}
  e: {url: "https://y/", sources: [stripe]}
`)
	if rl := c.Sources["stripe"].RateLimit; rl == nil || rl.RPS != 50 || rl.Burst != 50 {
		t.Errorf("rate_limit = %+v, want rps 50, burst 50 (default rps)", rl)
	}
	if !c.Destinations["d"].TLSInsecureSkipVerify || c.Destinations["e"].TLSInsecureSkipVerify {
		t.Errorf("tls_insecure_skip_verify: d %v, e %v", c.Destinations["d"].TLSInsecureSkipVerify, c.Destinations["e"].TLSInsecureSkipVerify)
	}
	if c := mustParse(t, minimal); c.Sources["stripe"].RateLimit != nil {
		t.Errorf("rate limit by default: %+v", c.Sources["stripe"].RateLimit)
	}
	for src, want := range map[string]string{
		minimal + "    rate_limit: {rps: 0}\n":            "sources.stripe.rate_limit.rps",
		minimal + "    rate_limit: {rps: 5, burst: 0}\n":  "sources.stripe.rate_limit.burst",
		minimal + "    rate_limit: {rps: 5, brust: 9}\n":  "sources.stripe.rate_limit.brust",
		minimal + "    rate_limit: {rps: 1.5}\n":          "sources.stripe.rate_limit.rps",
		minimal + "    rate_limit: {rps: 5, burst: -1}\n": "sources.stripe.rate_limit.burst",
	} {
		_, err := Parse("anyhook.yaml", []byte(src), env())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an error naming %s", src, err, want)
		}
	}
}
