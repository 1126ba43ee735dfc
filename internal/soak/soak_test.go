package soak

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	t.Parallel()
	o, err := parse([]string{"--binary", "/bin/true"}, io.Discard)
	if err != nil || o.duration != 2*time.Minute || o.gateways != 1 || o.rate != 40 {
		t.Fatalf("defaults: %+v, %v", o, err)
	}
	o, err = parse([]string{"--binary", "/bin/true", "--database", "postgres://x@h/db"}, io.Discard)
	if err != nil || o.gateways != 2 {
		t.Fatalf("postgres: %+v, %v", o, err)
	}
	for _, bad := range [][]string{{"--duration", "0s"}, {"--rate", "0"}, {"--database", "sqlite:x.db"}, {"extra"}} {
		if _, err := parse(append(bad, "--binary", "/bin/true"), io.Discard); err == nil {
			t.Errorf("%v: accepted", bad)
		}
	}
}

// TestProxyCut: a cut closes live connections and refuses new ones until
// the proxy is up again.
func TestProxyCut(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	p, err := newProxy(strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	get := func() error {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
		resp, err := c.Get("http://" + p.addr)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(); err != nil {
		t.Fatalf("through the proxy: %v", err)
	}
	live, err := net.Dial("tcp", p.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	live.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	buf := make([]byte, 512)
	if _, err := live.Read(buf); err != nil {
		t.Fatalf("live connection: %v", err)
	}
	p.setUp(false)
	live.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.Copy(io.Discard, live); err != nil {
		t.Fatalf("live connection after the cut: %v, want EOF", err)
	}
	if err := get(); err == nil {
		t.Fatal("a new connection got through a cut proxy")
	}
	p.setUp(true)
	if err := get(); err != nil {
		t.Fatalf("after the cut: %v", err)
	}
}
