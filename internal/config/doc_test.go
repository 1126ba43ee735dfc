package config

import (
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestDocumented keeps docs/configuration.md in step with the code: every
// key is documented, and its complete example parses.
func TestDocumented(t *testing.T) {
	t.Parallel()
	doc := string(mustRead(t, "../../docs/configuration.md"))
	var walk func(t reflect.Type)
	walk = func(typ reflect.Type) {
		for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
			typ = typ.Elem()
		}
		if typ.Kind() != reflect.Struct || typ == reflect.TypeFor[Duration]() {
			return
		}
		for name, i := range yamlFields(typ) {
			// A row for the key itself, for one of its keys, or for it
			// inside its parent ("backoff.initial", "delivery.grace").
			if !strings.Contains(doc, "| `"+name+"` |") && !strings.Contains(doc, "| `"+name+".") &&
				!strings.Contains(doc, "."+name+"` |") {
				t.Errorf("key %s is not in docs/configuration.md", name)
			}
			walk(typ.Field(i).Type)
		}
	}
	walk(reflect.TypeFor[Config]())

	m := regexp.MustCompile("(?s)## A complete file\n\n```yaml\n(.*?)```").FindStringSubmatch(doc)
	if m == nil {
		t.Fatal("no complete example in docs/configuration.md")
	}
	if _, err := Parse("configuration.md", []byte(m[1]), env("ANYHOOK_ADMIN_TOKEN", "t")); err != nil {
		t.Errorf("the documented example does not parse: %v", err)
	}
}
