package inbox_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestDependencies keeps the receiver library light: package inbox and the
// database/sql adapter link only the standard library and inboxdriver; the
// pgx adapter adds pgx and nothing else of ours.
func TestDependencies(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go command not found")
	}
	for _, c := range []struct {
		pkg     string
		allowed func(dep string) bool
	}{
		{"github.com/anyhook/anyhook/inbox", only("github.com/anyhook/anyhook/inbox", "github.com/anyhook/anyhook/inbox/inboxdriver")},
		{"github.com/anyhook/anyhook/inbox/inboxdriver", only("github.com/anyhook/anyhook/inbox/inboxdriver")},
		{"github.com/anyhook/anyhook/inbox/inboxsql", only("github.com/anyhook/anyhook/inbox/inboxsql", "github.com/anyhook/anyhook/inbox/inboxdriver")},
		{"github.com/anyhook/anyhook/inbox/inboxpgx", func(dep string) bool {
			return only("github.com/anyhook/anyhook/inbox/inboxpgx", "github.com/anyhook/anyhook/inbox/inboxdriver")(dep) ||
				strings.HasPrefix(dep, "github.com/jackc/") || strings.HasPrefix(dep, "golang.org/x/text/")
		}},
		{"github.com/anyhook/anyhook/inbox/inboxtest", only("github.com/anyhook/anyhook/inbox/inboxtest", "github.com/anyhook/anyhook/inbox", "github.com/anyhook/anyhook/inbox/inboxdriver")},
	} {
		out, err := exec.Command("go", "list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", c.pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", c.pkg, err, out)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, c.pkg) {
			t.Fatalf("go list %s did not list the package itself: %q", c.pkg, deps)
		}
		for _, d := range deps {
			if !c.allowed(d) {
				t.Errorf("%s depends on %s", c.pkg, d)
			}
		}
	}
}

func only(pkgs ...string) func(string) bool {
	return func(dep string) bool { return slices.Contains(pkgs, dep) }
}
