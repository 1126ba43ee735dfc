package redirect_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/anyhook/anyhook/internal/redirect"
)

// TestCheck: what a redirect of a POST to https://api.example:8443/x may
// become. net/http has already turned a 301/302/303 of a POST into a GET
// when it asks.
func TestCheck(t *testing.T) {
	first, _ := http.NewRequest(http.MethodPost, "https://api.example:8443/x", nil)
	for _, c := range []struct {
		method, url string
		hops        int
		refused     string // "" when followed
	}{
		{"POST", "https://api.example:8443/y", 1, ""},
		{"POST", "https://api.example:8443/y", redirect.MaxHops, "stopped after"},
		{"GET", "https://api.example:8443/y", 1, "redirected as a GET"},
		{"POST", "http://api.example:8443/y", 1, "to http://api.example:8443"},
		{"POST", "https://api.example/y", 1, "to https://api.example"},
		{"POST", "https://other.example:8443/y", 1, "to https://other.example:8443"},
	} {
		req, _ := http.NewRequest(c.method, c.url, nil)
		via := make([]*http.Request, c.hops)
		for i := range via {
			via[i] = first
		}
		err := redirect.Check(req, via)
		switch {
		case c.refused == "" && err != nil:
			t.Errorf("%s %s: refused (%v), want followed", c.method, c.url, err)
		case c.refused != "" && (err == nil || !strings.Contains(err.Error(), c.refused)):
			t.Errorf("%s %s after %d: %v, want an error with %q", c.method, c.url, c.hops, err, c.refused)
		}
		if got, want := redirect.AnswerOtherwise(req, via), err; (got == nil) != (want == nil) || (got != nil && got != http.ErrUseLastResponse) {
			t.Errorf("%s %s: AnswerOtherwise %v, Check %v", c.method, c.url, got, want)
		}
	}
}
