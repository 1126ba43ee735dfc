package gateway_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/gateway"
)

// Check finds what New would refuse without a store: a provider's secret
// of the wrong form.
func TestCheck(t *testing.T) {
	t.Parallel()
	ok := "sources:\n  stripe: {provider: stripe, secrets: [whsec_abc]}\n"
	for _, tt := range []struct{ src, want string }{
		{ok, ""},
		{"sources:\n  stripe:\n    provider: stripe\n    secrets: [sk_live_123]\n", "anyhook.yaml:4: sources.stripe.secrets[0]: "},
		{"sources:\n  s:\n    provider: standard\n    secrets: [\"whsec_not base64!\"]\n", "anyhook.yaml:4: sources.s.secrets[0]: "},
	} {
		cfg, err := config.Parse("anyhook.yaml", []byte(tt.src), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatalf("%q: %v", tt.src, err)
		}
		err = gateway.Check(cfg)
		var ce *gateway.ConfigError
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%q: %v", tt.src, err)
		case tt.want != "" && (!errors.As(err, &ce) || !strings.HasPrefix(err.Error(), tt.want)):
			t.Errorf("%q: %v, want a ConfigError starting %q", tt.src, err, tt.want)
		case strings.Contains(tt.src, "sk_live_123") && strings.Contains(err.Error(), "sk_live_123"):
			t.Errorf("the error quotes the secret: %v", err)
		}
	}
}
