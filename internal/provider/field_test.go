package provider

import (
	"slices"
	"strings"
	"testing"
)

func TestParseField(t *testing.T) {
	t.Parallel()
	for spec, want := range map[string]string{
		"header:x-request-id": "header:X-Request-Id",
		"json:data.id":        "json:data.id",
		"json:items.0.id":     "json:items.0.id",
	} {
		f, err := ParseField(spec)
		if err != nil || f.String() != want || f.IsZero() {
			t.Errorf("ParseField(%q) = %v, %v; want %s", spec, f, err, want)
		}
	}
	for _, bad := range []string{"", "id", "header:", "header:a b", "header:a:b", "json:", "json:a.", "json:.a", "query:x"} {
		if _, err := ParseField(bad); err == nil {
			t.Errorf("ParseField(%q) succeeded", bad)
		}
	}
	if !(Field{}).IsZero() || (Field{}).From(hdr("A", "b"), []byte(`{"a":1}`)) != "" {
		t.Error("the zero Field extracts something")
	}
}

func TestFieldFrom(t *testing.T) {
	t.Parallel()
	body := []byte(`{
		"skip": {"deep": [1, {"id": "no"}, [[[]]]], "s": "}]"},
		"id": "evt_\u00e9\"1",
		"big": 12345678901234567890123,
		"float": 1.50e+10,
		"neg": -0.0,
		"t": true, "f": false, "n": null,
		"obj": {"id": 7, "nested": {"x": "y"}},
		"arr": [{"id": "a0"}, {"id": "a1"}],
		"dup": 1, "dup": 2
	}`)
	for path, want := range map[string]string{
		"id": "evt_é\"1", "big": "12345678901234567890123", "float": "1.50e+10", "neg": "-0.0",
		"t": "true", "f": "false", "n": "", "obj.id": "7", "obj.nested.x": "y", "obj": "", "obj.nested": "",
		"arr.1.id": "a1", "arr.0.id": "a0", "arr.2.id": "", "arr.x": "", "missing": "", "id.x": "", "dup": "1",
	} {
		f, err := ParseField("json:" + path)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.From(nil, body); got != want {
			t.Errorf("From(%s) = %q, want %q", path, got, want)
		}
	}
	h, _ := ParseField("header:X-Request-Id")
	if got := h.From(hdr("X-Request-Id", "r1"), nil); got != "r1" {
		t.Errorf("header From = %q", got)
	}
	for _, junk := range []string{``, `[`, `{"id"`, `{"id":}`, `not json`, `"str"`, `{"a":[1,2}`, `{"id":"x"`} {
		f, _ := ParseField("json:id")
		got := f.From(nil, []byte(junk))
		if junk == `{"id":"x"` {
			if got != "x" {
				t.Errorf("truncated after the value: %q", got)
			}
			continue
		}
		if got != "" {
			t.Errorf("From(%q) = %q", junk, got)
		}
	}
}

func TestJSONScalarsOnePass(t *testing.T) {
	t.Parallel()
	got := jsonScalars([]byte(`{"a":{"b":1,"c":[true,"x"]},"d":"e"}`), []string{"a", "b"}, []string{"a", "c", "1"}, []string{"d"}, []string{"a", "c"}, []string{"zz"})
	if want := []string{"1", "x", "e", "", ""}; !slices.Equal(got, want) {
		t.Errorf("jsonScalars = %q, want %q", got, want)
	}
	// Deep nesting off the paths is skipped without recursion.
	deep := `{"x":` + strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `,"id":"ok"}`
	if got := jsonScalars([]byte(deep), []string{"id"}); got[0] != "ok" {
		t.Errorf("deep = %q", got)
	}
}

func TestURLVariants(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]string{
		"https://a.com/p?q=1":        {"https://a.com/p?q=1", "https://a.com:443/p?q=1"},
		"http://a.com":               {"http://a.com", "http://a.com:80"},
		"https://a.com:8443/p":       {"https://a.com:8443/p", "https://a.com/p"},
		"https://u:p@a.com/p":        {"https://u:p@a.com/p", "https://u:p@a.com:443/p"},
		"https://[::1]/p":            {"https://[::1]/p", "https://[::1]:443/p"},
		"https://[::1]:9/p":          {"https://[::1]:9/p", "https://[::1]/p"},
		"ftp://a.com/x":              {"ftp://a.com/x"},
		"no-scheme":                  {"no-scheme"},
		"https://a.com?x=http://b:1": {"https://a.com?x=http://b:1", "https://a.com:443?x=http://b:1"},
	} {
		if got := urlVariants(in); !slices.Equal(got, want) {
			t.Errorf("urlVariants(%q) = %q, want %q", in, got, want)
		}
	}
}
