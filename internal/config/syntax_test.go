package config

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

// A YAML syntax error names the line the mistake is on and says what the
// usual mistake there is, rather than only the parser's message.
func TestSyntaxErrorHints(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, yaml string
		line       int
		want       string
	}{
		{"indented deeper", "sources:\n  stripe:\n    provider: stripe\n     secrets: [x]\n", 4, "indented deeper than line 3"},
		{"indented to no key", "sources:\n  stripe:\n    provider: stripe\n   secrets: [x]\n", 4, "indented 3 spaces, which lines up with no key above it (those are at 0, 2 or 4)"},
		{"tab", "sources:\n  stripe:\n\tprovider: stripe\n", 3, "indented with a tab: YAML indents with spaces only"},
		{"tab after spaces", "sources:\n  stripe:\n  \t provider: stripe\n", 3, "tab"},
		{"no space after colon", "sources:\n  stripe:\n    provider:stripe\n    secrets: [x]\n", 3, `a key needs a space after its colon ("provider: …", not "provider:…")`},
		{"no space before a list", "sources:\n  stripe:\n    provider: stripe\n    secrets:[x]\n", 4, `"secrets: …"`},
		{"no space, top level", "listen:127.0.0.1:8080\nsources:\n  s: {}\n", 1, `"listen: …"`},
		{"colon in a value", "admin_token: abc: def\nsources: {}\n", 1, `the value of "admin_token" contains ": ": quote it`},
		{"colon at the end of a value", "database: sqlite::memory:\nsources: {}\n", 1, `the value of "database" ends with ":": quote it`},
		{"unclosed list", "sources:\n  stripe:\n    provider: stripe\n    secrets: [x\n", 4, "not closed"},
		{"unclosed quote", "admin_token: \"abc\nsources: {}\n", 1, "quoted value on this line is not closed"},
		{"list in a mapping", "sources:\n  stripe:\n    provider: stripe\n  - x\n", 1, "check the indentation"},
	}
	for _, tt := range tests {
		_, err := Parse("anyhook.yaml", []byte(tt.yaml), nil)
		var ce *Error
		if !errors.As(err, &ce) {
			t.Errorf("%s: %v, want an *Error", tt.name, err)
			continue
		}
		if ce.Line != tt.line || !strings.Contains(ce.Msg, "invalid YAML: ") || !strings.Contains(ce.Msg, tt.want) {
			t.Errorf("%s: %v; want line %d with %q", tt.name, err, tt.line, tt.want)
		}
		if strings.Contains(err.Error(), "abc") || strings.Contains(err.Error(), "def") || strings.Contains(err.Error(), "127.0.0.1") {
			t.Errorf("%s: the error quotes a value: %v", tt.name, err)
		}
	}
}

// The hints look at valid files without finding anything: they could
// only mislead.
func TestSyntaxHintsQuietOnValidFiles(t *testing.T) {
	t.Parallel()
	files := map[string]string{
		"examples/anyhook.yaml": string(mustRead(t, "../../examples/anyhook.yaml")),
		"nested lists":          "alerts:\n- webhook: http://x\n- pagerduty:\n    routing_key: k\n  # comment\nsources:\n  s:\n    provider: generic\n    secrets:\n      - a\n      - b\n    signature: {header: X-Sig,\n      prefix: \"sha256=\"}\n    id: header:X-Id\nlog:\n  origin: |\n    text: with: colons\n    and\ta tab\n  retention: 24h\n",
	}
	for _, name := range []string{"../../docs/configuration.md", "../../SPEC.md", "../../README.md"} {
		for i, m := range regexp.MustCompile("(?s)```yaml\n(.*?)```").FindAllStringSubmatch(string(mustRead(t, name)), -1) {
			files[name+"#"+string(rune('0'+i))] = m[1]
		}
	}
	for name, text := range files {
		if _, err := parseNode(name, []byte(text)); err != nil {
			t.Errorf("%s is not valid YAML: %v", name, err)
		}
		if line, hint := suspectLine(text); line != 0 {
			t.Errorf("%s: line %d: %s", name, line, hint)
		}
	}
}
