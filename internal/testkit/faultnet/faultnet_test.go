package faultnet_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/testkit/faultnet"
)

// TestProxyCut: a cut closes live connections and refuses new ones until
// the proxy is up again.
func TestProxyCut(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	p, err := faultnet.NewProxy(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	get := func() error {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := c.Get("http://" + p.Addr())
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	live, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	live.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	buf := make([]byte, 512)
	if _, err := live.Read(buf); err != nil {
		t.Fatalf("live connection: %v", err)
	}
	p.Cut()
	live.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, live); err != nil {
		t.Fatalf("live connection after the cut: %v, want EOF", err)
	}
	if err := get(); err == nil {
		t.Fatal("a new connection got through a cut proxy")
	}
	p.Restore()
	if err := get(); err != nil {
		t.Fatalf("after the cut: %v", err)
	}
}
