package delivery_test

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/anyhook/anyhook/internal/delivery"
)

// ADVERSARY (issue 35, secrets): the answer is cut to 4 KiB before it is
// cleaned of the destination's secrets, so a credential the destination
// echoes across the cut is stored in part: here the first half of the
// bearer token.
func TestAdvEchoedSecretAcrossTheCut(t *testing.T) {
	t.Parallel()
	const bearer = "BEARER-secret-token-0123456789abcdef"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		// 4 KiB less half the token, then the token.
		fmt.Fprintf(w, "%s%s and more", strings.Repeat(".", 4<<10-len(tok)/2), tok)
	}))
	t.Cleanup(echo.Close)
	o := attempt(t, withDefaults(delivery.Destination{URL: echo.URL, Auth: &delivery.Auth{Bearer: bearer}}), nil)
	if len(o.Result.ResponseBody) == 0 {
		t.Fatal("no answer stored")
	}
	noSecret(t, o, bearer[:len(bearer)/2])
}

// ADVERSARY (issue 35, secrets): the proxy's credential goes out as
// Proxy-Authorization: Basic base64(user:password). Only the password is
// cleaned from what is stored, not its encoding (as basic auth's is): a
// proxy answering an http:// destination's request with a body that quotes
// the request has the decodable credential stored, shown by the API and
// the dashboard.
func TestAdvProxyEchoesItsCredential(t *testing.T) {
	t.Parallel()
	const pw = "PROXY-password-echoed-42"
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, "denied: %s %s Proxy-Authorization: %s", r.Method, r.URL, r.Header.Get("Proxy-Authorization"))
	}))
	t.Cleanup(proxy.Close)
	pu, _ := url.Parse(proxy.URL)
	pu.User = url.UserPassword("p", pw)
	// Not loopback, so that the proxy is used; the proxy answers it.
	d := withDefaults(delivery.Destination{URL: "http://handler.example.invalid/hooks", Proxy: pu})
	o := attempt(t, d, nil)
	if !strings.Contains(string(o.Result.ResponseBody), "denied") {
		t.Fatalf("the proxy was not asked: %s %q %q", o.Status, o.Result.Error, o.Result.ResponseBody)
	}
	noSecret(t, o, pw, base64.StdEncoding.EncodeToString([]byte("p:"+pw)))
}

// ADVERSARY (issue 35, secrets): the same through CONNECT (an https://
// destination): Go makes the proxy's refusal's reason phrase the error
// text, which is stored, logged and alerted.
func TestAdvProxyCONNECTRefusalQuotesCredential(t *testing.T) {
	t.Parallel()
	const pw = "PROXY-password-echoed-43"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				fmt.Fprintf(c, "HTTP/1.1 407 refused %s\r\nContent-Length: 0\r\n\r\n", req.Header.Get("Proxy-Authorization"))
			}()
		}
	}()
	pu := &url.URL{Scheme: "http", Host: l.Addr().String(), User: url.UserPassword("p", pw)}
	d := withDefaults(delivery.Destination{URL: "https://handler.example.invalid/hooks", Proxy: pu})
	o := attempt(t, d, nil)
	if !strings.Contains(o.Result.Error, "refused") {
		t.Fatalf("the proxy's refusal is not the error: %s %q", o.Status, o.Result.Error)
	}
	noSecret(t, o, pw, base64.StdEncoding.EncodeToString([]byte("p:"+pw)))
}

// ADVERSARY (issue 35, secrets): headers: {Authorization: "Bearer T"}
// (allowed without auth:) is scrubbed as the whole value only; a
// destination that echoes the token alone ("invalid token T") has it
// stored.
func TestAdvHeaderAuthorizationTokenEchoed(t *testing.T) {
	t.Parallel()
	const tok = "HEADER-bearer-token-0123456789"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, "invalid token %s", strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
	}))
	t.Cleanup(echo.Close)
	o := attempt(t, withDefaults(delivery.Destination{URL: echo.URL, Headers: http.Header{"Authorization": {"Bearer " + tok}}}), nil)
	noSecret(t, o, tok)
}
