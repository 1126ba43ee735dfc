package send

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/route"
)

// TestREADMEFilters: the README's three filter examples compile and route
// the realistic samples as they say, with the type each provider reads.
func TestREADMEFilters(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := string(readme)
	if i := strings.Index(section, "## Routing"); i >= 0 {
		section = section[i:]
		if j := strings.Index(section[1:], "\n## "); j >= 0 {
			section = section[:j+1] // that section only
		}
	}
	filters := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^    sources: \[(\w+)\]\n    filter: (.+)$`).FindAllStringSubmatch(section, -1) {
		filters[m[1]] = m[2]
	}
	if len(filters) != 3 {
		t.Fatalf("README's Routing section: %d filter examples (%v), want stripe, github and shopify", len(filters), filters)
	}
	now := time.Now()
	p := params{ID: "x1", Object: "1", Version: "1", Now: now, run: strings.Repeat("r", 32), hook: "1", subA: "1", subB: "2"}
	for _, tc := range []struct {
		provider string
		edit     func(body string) string
		want     bool
	}{
		{"stripe", func(b string) string { return b }, false}, // payment_intent.succeeded
		{"stripe", func(b string) string {
			return strings.Replace(b, `"type": "payment_intent.succeeded"`, `"type": "invoice.paid"`, 1)
		}, true},
		{"github", func(b string) string { return b }, true}, // a push to main
		{"github", func(b string) string { return strings.Replace(b, `"refs/heads/main"`, `"refs/heads/dev"`, 1) }, false},
		{"shopify", func(b string) string { return b }, false}, // 409.94
		{"shopify", func(b string) string {
			return strings.Replace(b, `"total_price":"409.94"`, `"total_price":"1409.94"`, 1)
		}, true},
	} {
		s := samples[tc.provider]
		body, h := s.build(p)
		body = []byte(tc.edit(string(body)))
		if h == nil {
			h = map[string][]string{}
		}
		h.Set("Content-Type", s.contentType)
		prov, err := provider.New(provider.Settings{Provider: tc.provider, Secrets: []string{secretFor(tc.provider)}})
		if err != nil {
			t.Fatal(err)
		}
		x, err := prov.Extract(&provider.Request{Method: "POST", Header: h, Body: body})
		if err != nil || len(x.Events) != 1 {
			t.Fatalf("%s: extract %v %d", tc.provider, err, len(x.Events))
		}
		f, err := route.Compile(filters[tc.provider])
		if err != nil {
			t.Fatalf("README filter for %s: %v", tc.provider, err)
		}
		ok, err := f.Match(route.NewInput(&route.Event{Source: tc.provider, Type: x.Events[0].Type, Header: h, Body: body}))
		if ok != tc.want || err != nil {
			t.Errorf("%s (type %q): %s = %v, %v; want %v", tc.provider, x.Events[0].Type, filters[tc.provider], ok, err, tc.want)
		}
	}
}
