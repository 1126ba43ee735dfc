package gateway

import (
	"net"
	"strings"
	"testing"
)

// FuzzLoopbackHost: whatever a client sends as Host, loopbackHost never
// panics, and what it accepts is a loopback address or a name under
// localhost, with an optional port of digits and nothing else.
func FuzzLoopbackHost(f *testing.F) {
	for _, s := range []string{"127.0.0.1:8080", "localhost", "LOCALHOST.", "a.localhost:1", "[::1]:8080", "[::1]",
		"rebind.attacker.example", "localhost.attacker.example", "[::ffff:127.0.0.1]", "[fe80::1%25lo]", "127.1", "", "::1", "[::1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, hostport string) {
		if !loopbackHost(hostport) {
			return
		}
		if strings.Trim(hostport, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") != "" {
			t.Fatalf("accepted %q, which holds other characters", hostport)
		}
		host := hostport
		if h, _, err := net.SplitHostPort(hostport); err == nil {
			host = h
		} else if strings.HasPrefix(host, "[") {
			host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		}
		host = strings.ToLower(strings.TrimSuffix(host, "."))
		if ip := net.ParseIP(host); ip != nil {
			if !ip.IsLoopback() {
				t.Fatalf("accepted %q: %s is not loopback", hostport, ip)
			}
			return
		}
		if host != "localhost" && !strings.HasSuffix(host, ".localhost") {
			t.Fatalf("accepted %q: %q is neither an address nor under localhost", hostport, host)
		}
	})
}
