// Package proxytest is the tests' forward proxy: an HTTP CONNECT proxy on
// 127.0.0.1 that wants Proxy-Authorization (HTTP Basic) and records the
// hosts it was asked to reach, so that a test sees that a request went
// through it.
package proxytest

import (
	"bufio"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
)

// Proxy is a CONNECT proxy. Its URL carries no credentials: URL(user,
// password) does.
type Proxy struct {
	*httptest.Server
	mu    sync.Mutex
	hosts []string
}

// New starts a proxy that lets through CONNECTs authorized as user with
// password (407 otherwise) until the test ends.
func New(t testing.TB, user, password string) *Proxy {
	p := &Proxy{}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		if r.Header.Get("Proxy-Authorization") != want {
			w.WriteHeader(http.StatusProxyAuthRequired)
			return
		}
		p.mu.Lock()
		p.hosts = append(p.hosts, r.Host)
		p.mu.Unlock()
		up, err := net.Dial("tcp", r.Host)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			up.Close()
			return
		}
		io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n")
		go func() {
			defer up.Close()
			defer conn.Close()
			io.Copy(conn, up)
		}()
		go func() {
			defer up.Close()
			defer conn.Close()
			io.Copy(up, bufio.NewReader(rw)) // what the client sent after its CONNECT
		}()
	}))
	t.Cleanup(p.Close)
	return p
}

// URL is the proxy's URL with user and password in it.
func (p *Proxy) URL(user, password string) *url.URL {
	u, _ := url.Parse(p.Server.URL)
	u.User = url.UserPassword(user, password)
	return u
}

// Hosts are the host:port pairs the proxy was asked to CONNECT to, in
// order.
func (p *Proxy) Hosts() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.hosts...)
}
