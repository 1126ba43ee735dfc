// Package faultnet injects network faults for tests and the soak: a TCP
// proxy in front of a server (PostgreSQL, a destination) that can be cut
// and restored, or made to hold back the server's replies, so a client sees
// an outage (or a request whose answer never comes) without the shared
// server being touched.
package faultnet

import (
	"io"
	"net"
	"sync"
)

// Proxy forwards TCP connections from Addr to a target.
type Proxy struct {
	addr   string
	target string
	ln     net.Listener

	mu    sync.Mutex
	up    bool
	conns map[net.Conn]bool
	held  chan struct{} // non-nil while replies are held; closed on release
}

// NewProxy listens on 127.0.0.1 (a free port) and forwards to target.
func NewProxy(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{addr: ln.Addr().String(), target: target, ln: ln, up: true, conns: map[net.Conn]bool{}}
	go p.serve()
	return p, nil
}

// Addr is the proxy's host:port; clients connect here instead of the
// target.
func (p *Proxy) Addr() string { return p.addr }

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.handle(c)
	}
}

func (p *Proxy) handle(c net.Conn) {
	if !p.track(c) {
		c.Close()
		return
	}
	defer p.untrack(c)
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	if !p.track(s) {
		s.Close()
		return
	}
	defer p.untrack(s)
	done := make(chan struct{}, 2)
	go func() { io.Copy(s, c); done <- struct{}{} }()
	go func() { io.Copy(gate{c, p}, s); done <- struct{}{} }()
	<-done
}

// track registers a connection; false while the proxy is cut.
func (p *Proxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.up {
		return false
	}
	p.conns[c] = true
	return true
}

func (p *Proxy) untrack(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// Cut closes every open connection and refuses new ones until Restore.
func (p *Proxy) Cut() { p.set(false) }

// Restore lets connections through again, on the same address.
func (p *Proxy) Restore() { p.set(true) }

func (p *Proxy) set(up bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.up = up
	if !up {
		for c := range p.conns {
			c.Close()
		}
	}
}

// HoldReplies stops forwarding what the target sends until ReleaseReplies:
// requests still reach the target (a COMMIT is carried out), but the
// client waits for an answer.
func (p *Proxy) HoldReplies() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held == nil {
		p.held = make(chan struct{})
	}
}

// ReleaseReplies forwards the held replies and those that follow.
func (p *Proxy) ReleaseReplies() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.held != nil {
		close(p.held)
		p.held = nil
	}
}

// gate writes the target's bytes to a client once replies are not held.
type gate struct {
	w net.Conn
	p *Proxy
}

func (g gate) Write(b []byte) (int, error) {
	g.p.mu.Lock()
	held := g.p.held
	g.p.mu.Unlock()
	if held != nil {
		<-held
	}
	return g.w.Write(b)
}

// Close stops listening and cuts every connection.
func (p *Proxy) Close() error {
	err := p.ln.Close()
	p.ReleaseReplies()
	p.Cut()
	return err
}
