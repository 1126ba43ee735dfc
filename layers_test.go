package anyhook_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// module is this module's path; rel strips it from an import path.
const module = "github.com/anyhook/anyhook"

func rel(p string) string {
	if p == module {
		return ""
	}
	return strings.TrimPrefix(p, module+"/")
}

func ours(p string) bool { return p == module || strings.HasPrefix(p, module+"/") }

// The workshop is what is not the product: the test kits and the tools
// (docs/design.md, "Packages"). Each is known by its folder (internal/testkit/,
// internal/tools/), or a kit beside what it fakes by its name (…test).

// testKit says whether p is a test kit: under internal/testkit/, or named
// …test beside the package it fakes (storetest, gatewaytest, inboxtest …).
func testKit(p string) bool {
	r := rel(p)
	return strings.HasPrefix(r, "internal/testkit/") || strings.HasSuffix(path.Base(r), "test")
}

// tool says whether p is a tool behind a command of its own (anyhook
// bench, soak, send): under internal/tools/.
func tool(p string) bool { return strings.HasPrefix(rel(p), "internal/tools/") }

func workshop(p string) bool { return testKit(p) || tool(p) }

// brokerClient says whether p is a broker destination's client
// (internal/broker/natsdest, rabbitdest, kafkadest).
func brokerClient(p string) bool { return strings.HasPrefix(rel(p), "internal/broker/") }

// wiring says whether p is where the config meets the components.
func wiring(p string) bool { return rel(p) == "internal/gateway" || rel(p) == "cmd/anyhook" }

// storePkg says whether p is the storage contract or a backend (its kit,
// storetest, aside).
func storePkg(p string) bool {
	r := rel(p)
	return (r == "internal/store" || strings.HasPrefix(r, "internal/store/")) && !testKit(p)
}

// backend says whether p is one of the two stores or a package of theirs.
func backend(p string) bool {
	r := rel(p)
	return strings.HasPrefix(r, "internal/store/sqlite") || strings.HasPrefix(r, "internal/store/postgres")
}

// httpServing are the standard packages that serve or test HTTP; no store
// imports them.
var httpServing = []string{"net/http/httptest", "net/http/httputil", "net/http/pprof", "net/http/cgi", "net/http/fcgi"}

type listed struct {
	ImportPath string
	Imports    []string // of the package's non-test files
	Deps       []string
}

func goList(t *testing.T) []listed {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go command not found")
	}
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", "./...").Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	var pkgs []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	return pkgs
}

// TestLayers holds the module to the layering docs/design.md states:
//
//   - only the wiring (internal/gateway, cmd/anyhook) reads the config;
//     the workshop (test kits and the tools, which write configs) may;
//   - only cmd/anyhook and the workshop import the wiring;
//   - no product package depends on a test kit or a tool, and cmd/anyhook
//     imports the tools but no test kit, and only it imports the tools;
//   - nothing of the product, cmd/anyhook included, links "testing";
//   - the stores depend on nothing of ours but the domain and each other,
//     import no HTTP serving package, and the backends no net/http at all;
//   - only the wiring and the workshop import a broker client
//     (internal/broker/natsdest …); the engine knows internal/broker alone.
func TestLayers(t *testing.T) {
	t.Parallel()
	for _, p := range goList(t) {
		name := p.ImportPath
		for _, imp := range p.Imports {
			switch {
			case imp == module+"/internal/config" && !wiring(name) && !workshop(name) && name != imp:
				t.Errorf("%s imports internal/config: only the wiring (internal/gateway, cmd/anyhook) reads the config", name)
			case imp == module+"/internal/gateway" && rel(name) != "cmd/anyhook" && !workshop(name):
				t.Errorf("%s imports internal/gateway: only cmd/anyhook and the workshop run the wiring", name)
			case rel(name) == "cmd/anyhook" && testKit(imp):
				t.Errorf("cmd/anyhook imports the test kit %s", imp)
			case tool(imp) && rel(name) != "cmd/anyhook" && !tool(name):
				t.Errorf("%s imports the tool %s: only cmd/anyhook runs the tools", name, imp)
			case storePkg(name) && slices.Contains(httpServing, imp):
				t.Errorf("the store package %s imports %s", name, imp)
			case backend(name) && imp == "net/http":
				t.Errorf("the backend %s imports net/http", name)
			case brokerClient(imp) && !wiring(name) && !workshop(name):
				t.Errorf("%s imports the broker client %s: only the wiring builds them (the engine sees a broker.Publisher)", name, imp)
			}
		}
		for _, dep := range p.Deps {
			switch {
			case (dep == "testing" || strings.HasPrefix(dep, "testing/")) && !workshop(name):
				// The binary would link the test framework (its flags
				// among them), through a kit a tool reached.
				t.Errorf("the product package %s depends on %s", name, dep)
			case storePkg(name) && slices.Contains(httpServing, dep):
				t.Errorf("the store package %s depends on %s", name, dep)
			case !ours(dep):
			case !workshop(name) && rel(name) != "cmd/anyhook" && workshop(dep):
				t.Errorf("the product package %s depends on %s, of the workshop", name, dep)
			case storePkg(name) && dep != module && !storePkg(dep):
				t.Errorf("the store package %s depends on %s: a store knows only the domain and the store packages", name, dep)
			}
		}
	}
}

// TestLayersKnowTheWorkshop: the classification holds for today's folders
// and for the ones the workshop moves to (internal/testkit/,
// internal/tools/).
func TestLayersKnowTheWorkshop(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		rel       string
		kit, tool bool
	}{
		{"internal/testkit/pgtest", true, false},
		{"internal/testkit/testwait", true, false},
		{"internal/store/storetest", true, false},
		{"internal/gateway/gatewaytest", true, false},
		{"internal/testkit/clock", true, false},
		{"internal/testkit/faultnet", true, false},
		{"inbox/inboxtest", true, false},
		{"internal/tools/bench", false, true},
		{"internal/tools/soak", false, true},
		{"internal/store", false, false},
		{"internal/delivery", false, false},
		{"cmd/anyhook", false, false},
	} {
		p := module + "/" + c.rel
		if testKit(p) != c.kit || tool(p) != c.tool {
			t.Errorf("%s: test kit %v, tool %v; want %v, %v", c.rel, testKit(p), tool(p), c.kit, c.tool)
		}
	}
}

// TestDesignListsEveryPackage: docs/design.md's package table names every
// package of the module (in its first column, in backquotes: `anyhook`
// for the root, else the path inside the module), and no package that is
// gone.
func TestDesignListsEveryPackage(t *testing.T) {
	t.Parallel()
	f, err := os.Open("docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	listedInDoc := map[string]bool{}
	tick := regexp.MustCompile("`([^`]+)`")
	in := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "## ") {
			in = line == "## Packages"
			continue
		}
		if !in || !strings.HasPrefix(line, "| `") {
			continue
		}
		first, _, _ := strings.Cut(strings.TrimPrefix(line, "|"), "|")
		for _, m := range tick.FindAllStringSubmatch(first, -1) {
			p := module + "/" + m[1]
			if m[1] == "anyhook" {
				p = module
			}
			listedInDoc[p] = true
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(listedInDoc) == 0 {
		t.Fatal(`docs/design.md has no "## Packages" table`)
	}
	for _, p := range goList(t) {
		if !listedInDoc[p.ImportPath] {
			t.Errorf("docs/design.md's package table does not list %s", rel(p.ImportPath))
		}
		delete(listedInDoc, p.ImportPath)
	}
	for p := range listedInDoc {
		t.Errorf("docs/design.md's package table lists %s, which is not a package", rel(p))
	}
}
