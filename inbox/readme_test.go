package inbox_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeExample keeps the README's inbox snippet equal to the compiled
// code of Example (between its README:begin and README:end markers), so the
// README never shows code that does not build.
func TestReadmeExample(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	_, code, ok := strings.Cut(string(src), "\t// README:begin\n")
	if ok {
		code, _, ok = strings.Cut(code, "\t// README:end\n")
	}
	if !ok {
		t.Fatal("example_test.go: no README:begin/README:end markers")
	}
	lines := strings.Split(strings.TrimSuffix(code, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "\t")
	}
	want := strings.Join(lines, "\n") + "\n"

	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- inbox/example_test.go: Example -->\n```go\n"
	_, got, ok := strings.Cut(string(readme), marker)
	if ok {
		got, _, ok = strings.Cut(got, "```\n")
	}
	if !ok {
		t.Fatalf("README.md: no %q followed by a code block", marker)
	}
	if got != want {
		t.Errorf("README.md's inbox snippet differs from Example in inbox/example_test.go; copy it over.\nREADME:\n%s\nExample:\n%s", got, want)
	}
}
