package gateway

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
)

// hostRefused is what a request for another host name gets from a gateway
// without an admin token. It names the rule, never the host or anything
// else of the gateway.
const hostRefused = "this gateway has no admin_token, so its admin API, dashboard and metrics answer only " +
	"requests addressed to localhost or a loopback address (Host: localhost, 127.0.0.1, [::1]); " +
	"set admin_token to reach them under another name"

// loopbackHostsOnly guards what the admin token would otherwise guard (the
// admin API, the dashboard, /metrics) on a gateway that has none. Such a
// gateway listens on loopback only (config.Validate), but that alone does
// not keep browsers out: a page on rebind.attacker.example whose name the
// attacker points at 127.0.0.1 (DNS rebinding) is same-origin with itself,
// so the browser lets it read answers and send POSTs that pass every
// Origin check, with Host: rebind.attacker.example. Requiring a loopback
// Host closes that: the attacker's page can only ever send its own name.
// Anything else gets 421 Misdirected Request: this server will not answer
// for that name (the request is not wrong, nor are the caller's
// credentials).
//
// Ingest and the health probes are not wrapped: providers send their own
// Host, and the probes need no token even on a gateway that has one.
func loopbackHostsOnly(next http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if loopbackHost(r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		log.LogAttrs(r.Context(), slog.LevelWarn, "refused a request for a host name that is not loopback (no admin_token; DNS rebinding?)",
			slog.String("host", truncate(r.Host, 100)), slog.String("method", r.Method),
			slog.String("path", truncate(r.URL.Path, 200)), slog.String("remote", r.RemoteAddr))
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		if strings.HasPrefix(r.URL.Path, "/api/") {
			h.Set("Content-Type", "application/json; charset=utf-8")
			w.WriteHeader(http.StatusMisdirectedRequest)
			json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": "host_not_allowed", "message": hostRefused}})
			return
		}
		http.Error(w, hostRefused, http.StatusMisdirectedRequest)
	})
}

// loopbackHost reports whether hostport, a request's Host, names this
// machine in a way no one else can make a browser send: an IP address in
// 127.0.0.0/8 or ::1 (IPv6 in brackets), or localhost or a name under
// .localhost (RFC 6761: reserved, never delegated, and resolved to
// loopback by browsers without asking DNS). Any port or none; case does
// not matter; one trailing dot (the fully qualified form) is allowed. An
// empty Host, a zone, another spelling of an address ("127.1",
// "2130706433") and names that merely resolve to 127.0.0.1
// ("127.0.0.1.nip.io", "localhost.attacker.example") are not loopback.
func loopbackHost(hostport string) bool {
	host, port := hostport, ""
	if strings.HasPrefix(hostport, "[") {
		end := strings.IndexByte(hostport, ']')
		if end < 0 {
			return false
		}
		host, port = hostport[1:end], hostport[end+1:]
		if port != "" && !(port[0] == ':' && digits(port[1:])) {
			return false
		}
		ip := net.ParseIP(host)
		return ip != nil && ip.To4() == nil && ip.IsLoopback()
	}
	if i := strings.IndexByte(hostport, ':'); i >= 0 {
		host, port = hostport[:i], hostport[i+1:]
		if !digits(port) {
			return false
		}
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	if ip := net.ParseIP(host); ip != nil {
		return ip.To4() != nil && ip.IsLoopback()
	}
	if host != "localhost" && !strings.HasSuffix(host, ".localhost") {
		return false
	}
	for label := range strings.SplitSeq(host, ".") {
		if !hostLabel(label) {
			return false
		}
	}
	return true
}

// digits reports whether s is a port: at most five decimal digits, or
// none (RFC 3986 allows "localhost:").
func digits(s string) bool {
	if len(s) > 5 {
		return false
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// hostLabel reports whether s is one DNS label: letters, digits and
// hyphens, not empty.
func hostLabel(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i := range len(s) {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
