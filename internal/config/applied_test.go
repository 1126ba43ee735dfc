package config_test

import (
	"go/types"
	"reflect"
	"strings"
	"testing"
	"time"

	"golang.org/x/tools/go/packages"

	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/provider"
)

// consumedInConfig are settings that package config itself turns into the
// values the rest of the program reads (the derived field or method named).
var consumedInConfig = map[string]string{
	"Destination.Sources":      "Source.Destinations",
	"Destination.OnStaleClaim": "Destination.StalePolicy",
	"LedgerSettings.KeyFile":   "Config.LedgerKeyPath",
	"Source.Type":              "Source.ProviderSettings",
	"Source.RecordOnly":        "Config.Warnings",
	// A source's provider settings reach the provider package through
	// Source.ProviderSettings (TestProviderSettings checks each one).
	"Source.Secrets":      "Source.ProviderSettings",
	"Source.Tolerance":    "Source.ProviderSettings",
	"Source.Signature":    "Source.ProviderSettings",
	"Source.ID":           "Source.ProviderSettings",
	"Signature.Header":    "Source.ProviderSettings",
	"Signature.Algorithm": "Source.ProviderSettings",
	"Signature.Encoding":  "Source.ProviderSettings",
	"Signature.Prefix":    "Source.ProviderSettings",
	"Ordering.Object":     "Source.ProviderSettings",
	"Ordering.Version":    "Source.ProviderSettings",
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
		config.Destination{}, config.Backoff{}, config.Alert{}, config.PagerDuty{}, config.DeliverySettings{}, config.LedgerSettings{}, config.Token{}} {
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

// TestProviderSettings: every setting a source gives its provider arrives.
func TestProviderSettings(t *testing.T) {
	t.Parallel()
	src := config.Source{Provider: "generic", Secrets: []string{"a", "b"}, Tolerance: config.Duration(time.Minute), PublicURL: "https://h/x",
		Signature: &config.Signature{Header: "X-S", Algorithm: "sha512", Encoding: "base64", Prefix: "v1="},
		ID:        "json:id", Type: "json:type", Ordering: &config.Ordering{Object: "json:o", Version: "json:v", Stale: "skip"}}
	want := provider.Settings{Provider: "generic", Secrets: []string{"a", "b"}, Tolerance: time.Minute, PublicURL: "https://h/x",
		Signature: &provider.Signature{Header: "X-S", Algorithm: "sha512", Encoding: "base64", Prefix: "v1="},
		ID:        "json:id", Type: "json:type", Ordering: &provider.Ordering{Object: "json:o", Version: "json:v"}}
	if got := src.ProviderSettings(); !reflect.DeepEqual(got, want) {
		t.Errorf("ProviderSettings() = %+v, want %+v", got, want)
	}
	// Every field of provider.Settings is set above, so none is forgotten.
	for f, v := range reflect.ValueOf(want).Fields() {
		if v.IsZero() {
			t.Errorf("the fixture leaves provider.Settings.%s unset", f.Name)
		}
	}
	src.Signature = &config.Signature{None: true}
	if got := src.ProviderSettings(); got.Signature == nil || !got.Signature.None {
		t.Errorf("signature: none = %+v", got.Signature)
	}
}
