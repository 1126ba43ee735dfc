package admin

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/anyhook/anyhook/internal/store/sqlite"
)

type openapiDocument struct {
	OpenAPI string                                `json:"openapi"`
	Paths   map[string]map[string]json.RawMessage `json:"paths"`
}

func newTestAPI(t *testing.T) *API {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return New(Options{Store: st, Token: "t", Destinations: []string{"billing"}})
}

var pathParam = regexp.MustCompile(`\{[a-z_]+\}`)

// TestOpenAPIMatchesRoutes walks the document: every operation in it is
// routed by the handler, and every route the handler serves is in it.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	var doc openapiDocument
	if err := json.Unmarshal(openapiDoc, &doc); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		t.Errorf("openapi %q, want 3.1.x", doc.OpenAPI)
	}
	documented := map[string]bool{}
	for path, item := range doc.Paths {
		for method := range item {
			switch method {
			case "get", "put", "post", "delete", "patch", "head", "options", "trace":
			default:
				continue // parameters, summary, …
			}
			m := strings.ToUpper(method)
			documented[m+" "+path] = true
			req := httptest.NewRequest(m, pathParam.ReplaceAllString(path, "x"), nil)
			if _, pattern := a.mux.Handler(req); pattern != m+" "+path {
				t.Errorf("documented %s %s is routed to %q", m, path, pattern)
			}
		}
	}
	for _, rt := range a.routes {
		if !documented[rt.method+" "+rt.path] {
			t.Errorf("route %s %s is not in openapi.json", rt.method, rt.path)
		}
	}
}

// TestOpenAPIRefsResolve checks every $ref points at a component.
func TestOpenAPIRefsResolve(t *testing.T) {
	t.Parallel()
	var doc map[string]any
	if err := json.Unmarshal(openapiDoc, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				var target any = doc
				for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
					m, _ := target.(map[string]any)
					target = m[part]
				}
				if target == nil {
					t.Errorf("$ref %s does not resolve", ref)
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
}

func TestOpenAPIServed(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	req := httptest.NewRequest("GET", "/api/openapi.json", nil)
	req.Header.Set("Authorization", "Bearer t")
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("status %d, Content-Type %q", rec.Code, rec.Header().Get("Content-Type"))
	}
	if !slices.Equal(rec.Body.Bytes(), openapiDoc) {
		t.Error("served document differs from the embedded one")
	}
}

// TestDocsCoverRoutes keeps docs/api.md in step: it shows every route.
func TestDocsCoverRoutes(t *testing.T) {
	t.Parallel()
	a := newTestAPI(t)
	md, err := os.ReadFile(filepath.Join("..", "..", "docs", "api.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, rt := range a.routes {
		if !strings.Contains(string(md), "`"+rt.method+" "+rt.path+"`") {
			t.Errorf("docs/api.md does not show `%s %s`", rt.method, rt.path)
		}
	}
}
