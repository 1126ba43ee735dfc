package auth_test

import (
	"testing"

	"github.com/anyhook/anyhook/internal/auth"
)

// A configured token with white space around it (a Kubernetes secret's
// trailing newline through ${VAR}) matches the token presented without
// it, as white space around a presented token is ignored.
func TestTokenWithTrailingNewline(t *testing.T) {
	secret := "alice-token-0123456789\n"
	ts := auth.New([]auth.Token{{Name: "alice", Secret: secret, Scopes: []string{"pull:dev"}}})
	for _, presented := range []string{secret, "alice-token-0123456789"} {
		if _, ok := ts.Resolve(presented); !ok {
			t.Errorf("token %q configured as %q: not resolved", presented, secret)
		}
	}
}
