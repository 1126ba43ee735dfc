package config_test

import (
	"go/types"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/tools/go/packages"

	"github.com/anyhook/anyhook/internal/config"
)

// consumedInConfig are settings that package config itself turns into the
// values the rest of the program reads (the derived field or method named).
var consumedInConfig = map[string]string{
	"Destination.Sources":      "Source.Destinations",
	"Destination.OnStaleClaim": "Destination.StalePolicy",
	"LogSettings.KeyFile":      "Config.LogKeyPath",
	"Destination.Filter":       "Destination.Route",
}

// TestEverySettingIsApplied guards against a setting that is accepted but
// never applied: every field of the config structs that YAML can set is
// read by some package outside internal/config (or turned by config into
// a value that is, as listed above). It type-checks the program's
// packages and collects every selection of a config struct field.
func TestEverySettingIsApplied(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks the whole module")
	}
	cfg := &packages.Config{Mode: packages.NeedName | packages.NeedTypes | packages.NeedTypesInfo | packages.NeedSyntax, Tests: false}
	pkgs, err := packages.Load(cfg, "github.com/anyhook/anyhook/...")
	if err != nil {
		t.Fatal(err)
	}
	const configPath = "github.com/anyhook/anyhook/internal/config"
	read := map[string]bool{} // "Type.Field"
	for _, p := range pkgs {
		if len(p.Errors) > 0 {
			t.Fatalf("%s: %v", p.PkgPath, p.Errors)
		}
		if p.PkgPath == configPath {
			continue
		}
		for _, sel := range p.TypesInfo.Selections {
			v, ok := sel.Obj().(*types.Var)
			if !ok || !v.IsField() || v.Pkg() == nil || v.Pkg().Path() != configPath {
				continue
			}
			recv := sel.Recv()
			if ptr, ok := recv.(*types.Pointer); ok {
				recv = ptr.Elem()
			}
			if named, ok := recv.(*types.Named); ok {
				read[named.Obj().Name()+"."+v.Name()] = true
			}
		}
	}
	for _, typ := range []any{config.Config{}, config.Source{}, config.Signature{}, config.Ordering{}, config.RateLimit{},
		config.Destination{}, config.Backoff{}, config.Alert{}, config.PagerDuty{}, config.DeliverySettings{}, config.LogSettings{}} {
		rt := reflect.TypeOf(typ)
		for f := range rt.Fields() {
			tag := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if tag == "" || tag == "-" {
				continue
			}
			key := rt.Name() + "." + f.Name
			if read[key] {
				continue
			}
			if derived, ok := consumedInConfig[key]; ok {
				t.Logf("%s (%s) is applied through %s", key, tag, derived)
				continue
			}
			t.Errorf("setting %s (%s) is accepted but nothing outside internal/config reads it", key, tag)
		}
	}
}
