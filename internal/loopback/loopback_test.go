package loopback_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/anyhook/anyhook/internal/loopback"
)

func TestPlain(t *testing.T) {
	for u, want := range map[string]bool{
		"http://localhost:8080/x": true,
		"HTTP://127.0.0.1/":       true,
		"hTtP://[::1]/":           true,
		"https://localhost/":      false,
		"http:/localhost":         false,
		"":                        false,
	} {
		if got := loopback.Plain(u); got != want {
			t.Errorf("Plain(%q) = %v, want %v", u, got, want)
		}
	}
}

// TestTransport: a request through the transport reaches a server on a
// loopback address, and is refused before connecting to any other
// address, an IPv4-mapped one included, with an error that says why.
func TestTransport(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	c := &http.Client{Transport: loopback.Transport()}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatalf("a server on 127.0.0.1: %v", err)
	}
	resp.Body.Close()
	for _, u := range []string{"http://192.0.2.1:9/", "http://[::ffff:192.0.2.1]:9/"} {
		_, err := c.Get(u)
		if err == nil || !strings.Contains(err.Error(), "loopback") {
			t.Errorf("%s: %v, want a refusal naming loopback", u, err)
		}
	}
}
