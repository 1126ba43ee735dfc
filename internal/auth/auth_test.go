package auth_test

import (
	"net/http/httptest"
	"testing"

	"github.com/anyhook/anyhook/internal/auth"
)

func tokens() *auth.Tokens {
	return auth.New([]auth.Token{
		{Name: "admin", Secret: "admin-token-0123456789", Scopes: []string{auth.ScopeAdmin}},
		{Name: "grafana", Secret: "read-token-0123456789", Scopes: []string{auth.ScopeRead}},
		{Name: "alice", Secret: "pull-token-0123456789", Scopes: []string{"pull:dev-alice"}},
	})
}

func TestTokenResolve(t *testing.T) {
	t.Parallel()
	ts := tokens()
	for presented, want := range map[string]string{
		"admin-token-0123456789":     "admin",
		" read-token-0123456789\n":   "grafana",
		"pull-token-0123456789":      "alice",
		"pull-token-012345678":       "",
		"":                           "",
		"admin-token-0123456789 xyz": "",
	} {
		p, ok := ts.Resolve(presented)
		if ok != (want != "") || p.Name != want {
			t.Errorf("Resolve(%q) = %v, %v; want %q", presented, p, ok, want)
		}
	}
	if !(*auth.Tokens)(nil).Off() || !auth.New(nil).Off() || ts.Off() {
		t.Error("Off: want true without tokens only")
	}
	if _, ok := auth.New(nil).Resolve(""); ok {
		t.Error("no tokens resolved an empty one")
	}
}

func TestScopeRules(t *testing.T) {
	t.Parallel()
	ts := tokens()
	admin, _ := ts.Lookup("admin")
	read, _ := ts.Lookup("grafana")
	pull, _ := ts.Lookup("alice")
	type can struct{ read, login, act, pullOwn, pullOther, replayOwn, replayAll bool }
	for _, c := range []struct {
		p    auth.Principal
		want can
	}{
		{admin, can{true, true, true, true, true, true, true}},
		{auth.Anonymous, can{true, true, true, true, true, true, true}},
		{read, can{read: true, login: true}},
		{pull, can{pullOwn: true, replayOwn: true}},
		{auth.Principal{}, can{}},
	} {
		got := can{c.p.CanRead(), c.p.CanLogin(), c.p.CanAct(), c.p.CanPull("dev-alice"), c.p.CanPull("billing"),
			c.p.CanReplay("dev-alice"), c.p.CanReplay("")}
		if got != c.want {
			t.Errorf("%s: %+v; want %+v", c.p.Describe(), got, c.want)
		}
	}
	if got := pull.Pulls(); len(got) != 1 || got[0] != "dev-alice" {
		t.Errorf("Pulls = %v", got)
	}
}

func TestTokenKeyAndBearer(t *testing.T) {
	t.Parallel()
	ts := tokens()
	k1, ok1 := ts.Key("admin", "purpose")
	k2, _ := ts.Key("grafana", "purpose")
	if _, ok := ts.Key("nobody", "purpose"); ok || !ok1 || string(k1) == string(k2) {
		t.Error("Key: want one key per token, none for an unknown name")
	}
	same := auth.New([]auth.Token{{Name: "admin", Secret: "another-admin-token-0123", Scopes: []string{auth.ScopeAdmin}}})
	if k3, _ := same.Key("admin", "purpose"); string(k3) == string(k1) {
		t.Error("Key: a changed token keeps its key")
	}
	r := httptest.NewRequest("GET", "/api/events", nil)
	if _, ok := auth.Bearer(r); ok {
		t.Error("Bearer without a header")
	}
	r.Header.Set("Authorization", "bearer  abc ")
	if tok, ok := auth.Bearer(r); !ok || tok != "abc" {
		t.Errorf("Bearer = %q, %v", tok, ok)
	}
	r.Header.Set("Authorization", "Basic abc")
	if _, ok := auth.Bearer(r); ok {
		t.Error("Bearer took Basic")
	}
}
