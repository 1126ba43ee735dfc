package anyhook_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// badIDKeys are log keys that name an id ambiguously. The logs, the API,
// the alerts and the docs say event_id for the AnyHook event id (the
// X-AnyHook-Delivery value), delivery_id for a delivery, and
// provider_event_id for the provider's event id (the dedup key); see
// docs/operations.md, "Ids".
var badIDKeys = map[string]string{
	"delivery": "delivery_id", "event": "event_id", "id": "event_id or delivery_id",
	"dedup_key": "provider_event_id", "dedup": "provider_event_id", "eventID": "event_id",
	"deliveryID": "delivery_id", "provider_id": "provider_event_id", "event_key": "provider_event_id",
}

// logMethods are the log/slog calls whose arguments after the message are
// key-value pairs (With and the attribute constructors take them first).
var logMethods = map[string]int{
	"Debug": 1, "Info": 1, "Warn": 1, "Error": 1, "DebugContext": 2, "InfoContext": 2, "WarnContext": 2,
	"ErrorContext": 2, "Log": 3, "LogAttrs": 3, "With": 0,
	"String": 0, "Any": 0, "Int": 0, "Int64": 0, "Bool": 0, "Time": 0, "Duration": 0, "Group": 0,
}

// TestLogIDKeys reads every non-test Go file and checks the keys of its
// log calls: no log names an id "delivery", "event" or "id".
func TestLogIDKeys(t *testing.T) {
	t.Parallel()
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			first, ok := logMethods[sel.Sel.Name]
			if !ok {
				return true
			}
			x, _ := sel.X.(*ast.Ident)
			attr := x != nil && x.Name == "slog" // slog.String("key", v): one key
			if x != nil && x.Name != "slog" && first == 0 && sel.Sel.Name != "With" {
				return true // strconv.Quote, time.Duration, … are not log calls
			}
			checked++
			for i := first; i < len(call.Args); i++ {
				if (i-first)%2 != 0 || (attr && i > first) {
					continue // a value
				}
				lit, ok := call.Args[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				key, _ := strconv.Unquote(lit.Value)
				if want, bad := badIDKeys[key]; bad {
					t.Errorf("%s: log key %q names an id ambiguously; use %s", fset.Position(lit.Pos()), key, want)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 30 {
		t.Fatalf("only %d log calls found: the walk is broken", checked)
	}
}
