package config

import (
	"strings"
	"testing"
)

// tokensBase has a destination for pull scopes and listens beyond
// loopback, where an admin token is required.
const tokensBase = `listen: 0.0.0.0:8080
sources:
  stripe:
    provider: stripe
    secrets: [whsec_abc]
destinations:
  dev-alice:
    url: https://alice.example.com/hook
    sources: [stripe]
`

const (
	adminSecret = "admin-0123456789abcdef"
	readSecret  = "read-0123456789abcdef"
	pullSecret  = "pull-0123456789abcdef"
)

func TestTokensParse(t *testing.T) {
	t.Parallel()
	src := tokensBase + `tokens:
  - name: ops
    token: ${OPS_TOKEN}
    scopes: [admin]
  - name: grafana
    token: ${READ_TOKEN}
    scopes: [read]
  - name: alice
    token: ${PULL_TOKEN}
    scopes: ["pull:dev-alice"]
`
	c, err := Parse("/etc/anyhook/anyhook.yaml", []byte(src), env("OPS_TOKEN", adminSecret, "READ_TOKEN", readSecret, "PULL_TOKEN", pullSecret))
	if err != nil {
		t.Fatalf("Parse: %v (an admin-scoped token stands for admin_token off loopback)", err)
	}
	if len(c.Tokens) != 3 || c.Tokens[2].Name != "alice" || c.Tokens[2].Token != pullSecret || c.Tokens[2].Scopes[0] != "pull:dev-alice" {
		t.Errorf("tokens = %+v", c.Tokens)
	}
	eff := string(c.Effective())
	for _, s := range []string{adminSecret, readSecret, pullSecret} {
		if strings.Contains(eff, s) {
			t.Errorf("the effective config shows a token:\n%s", eff)
		}
	}
	if !strings.Contains(eff, "name: alice") || !strings.Contains(eff, "pull:dev-alice") || strings.Count(eff, Redacted) < 3 {
		t.Errorf("effective config: want names and scopes shown, tokens redacted:\n%s", eff)
	}
}

func TestTokensRefused(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, tokens string
		want         []string // in the error, with file and line
	}{
		{"short", `  - {name: ops, token: short-token, scopes: [admin]}`, []string{"anyhook.yaml:11", "tokens[0].token", "11 characters", "at least 16"}},
		{"duplicate name", `  - {name: ops, token: ` + adminSecret + `, scopes: [admin]}
  - {name: ops, token: ` + readSecret + `, scopes: [read]}`, []string{"anyhook.yaml:12", "tokens[1].name", `"ops" is taken by tokens[0]`}},
		{"name of admin_token", `  - {name: admin, token: ` + readSecret + `, scopes: [read]}
admin_token: ` + adminSecret, []string{"tokens[0].name", "taken by admin_token"}},
		{"duplicate token", `  - {name: ops, token: ` + adminSecret + `, scopes: [admin]}
  - {name: ro, token: ` + adminSecret + `, scopes: [read]}`, []string{"anyhook.yaml:12", "tokens[1].token", "same token as tokens[0]"}},
		{"unknown destination", `  - {name: ops, token: ` + adminSecret + `, scopes: [admin]}
  - {name: bob, token: ` + pullSecret + `, scopes: ["pull:dev-bob"]}`, []string{"anyhook.yaml:12", "tokens[1].scopes[0]", `no destination "dev-bob"`, "dev-alice"}},
		{"unknown scope", `  - {name: ops, token: ` + adminSecret + `, scopes: [admin, write]}`, []string{"tokens[0].scopes[1]", `unknown scope "write"`}},
		{"no scopes", `  - {name: ops, token: ` + adminSecret + `}`, []string{"tokens[0].scopes", "required"}},
		{"no name", `  - {token: ` + adminSecret + `, scopes: [admin]}`, []string{"tokens[0].name", "required"}},
		{"no admin", `  - {name: ro, token: ` + readSecret + `, scopes: [read]}`, []string{"admin_token is required", "or a token in tokens with scope admin", "no token has scope admin"}},
	} {
		src := tokensBase + "tokens:\n" + tt.tokens + "\n"
		_, err := Parse("/etc/anyhook/anyhook.yaml", []byte(src), env())
		if err == nil {
			t.Errorf("%s: parsed, want an error", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tt.name, err, w)
			}
		}
		for _, s := range []string{adminSecret, readSecret, pullSecret, "short-token"} {
			if strings.Contains(err.Error(), s) {
				t.Errorf("%s: the error shows a token: %v", tt.name, err)
			}
		}
	}
}

func TestTokensAdminTokenOptional(t *testing.T) {
	t.Parallel()
	// Off loopback without any admin token: refused, naming both ways.
	_, err := Parse("/etc/anyhook/anyhook.yaml", []byte(tokensBase), env())
	if err == nil || !strings.Contains(err.Error(), "admin_token is required when listen (0.0.0.0:8080) is not a loopback address (or a token in tokens with scope admin)") {
		t.Errorf("no admin token off loopback: %v", err)
	}
	// admin_token alone still does.
	if _, err := Parse("/etc/anyhook/anyhook.yaml", []byte(tokensBase+"admin_token: "+adminSecret+"\n"), env()); err != nil {
		t.Errorf("admin_token alone: %v", err)
	}
}
