// Package loopback keeps on this machine a credential that travels over
// plain HTTP. The configuration allows http:// for a URL that carries a
// credential (a backfill's api_base, a Slack or PagerDuty alert channel)
// only when its host is a loopback one — a test server, or a local proxy
// that adds TLS — but a host name such as localhost is the resolver's to
// answer (/etc/hosts, DNS). A Transport of this package connects only to
// loopback addresses, whatever the name resolved to, and refuses any other
// before connecting.
package loopback

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// Plain reports whether rawURL is plain http:// (any case), the URLs that
// need a Transport of this package.
func Plain(rawURL string) bool {
	const p = "http://"
	return len(rawURL) >= len(p) && strings.EqualFold(rawURL[:len(p)], p)
}

// Transport returns a transport that connects only to loopback addresses,
// through no proxy.
func Transport() *http.Transport {
	return &http.Transport{
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, Control: control}).DialContext,
		ResponseHeaderTimeout: 30 * time.Second,
		MaxIdleConnsPerHost:   2,
		IdleConnTimeout:       90 * time.Second,
	}
}

// control refuses, before connecting, an address that is not loopback.
func control(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("a plain http:// URL that carries a credential must reach a loopback address, and this one resolved to %s: not sending it in the clear", host)
	}
	return nil
}
