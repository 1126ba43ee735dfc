package gateway_test

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
)

// setupYAML runs a gateway on 127.0.0.1:0 from a whole config file.
func setupYAML(t *testing.T, yaml string) *env {
	t.Helper()
	base, g := gatewaytest.Start(t, yaml, gateway.Options{})
	return &env{url: base, gw: g, store: g.Store()}
}

func TestSourceRateLimit(t *testing.T) {
	t.Parallel()
	e := setupYAML(t, `
listen: 127.0.0.1:0
database: sqlite:anyhook.db
sources:
  stripe: {provider: stripe, secrets: [`+stripeSecret+`], rate_limit: {rps: 1, burst: 3}}
  other: {provider: stripe, secrets: [`+stripeSecret+`]}
`)
	body := func(i int) []byte {
		return []byte(fmt.Sprintf(`{"id":"evt_rl_%d","object":"event","created":1700000000}`, i))
	}
	var codes []int
	var limited *http.Response
	for i := range 6 {
		req := stripeRequest(t, e.url+"/webhooks/stripe", stripeSecret, body(i), time.Now())
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		codes = append(codes, resp.StatusCode)
		if resp.StatusCode == http.StatusTooManyRequests && limited == nil {
			limited = resp
		}
	}
	// The burst of 3 passes; at 1/s the rest of a quick loop cannot all
	// pass (a slow machine may refill a token or two).
	if codes[0] != 200 || codes[1] != 200 || codes[2] != 200 || limited == nil {
		t.Fatalf("codes %v, want 200 ×3 then 429", codes)
	}
	if s, err := strconv.Atoi(limited.Header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q, want whole seconds ≥ 1", limited.Header.Get("Retry-After"))
	}
	// Nothing was stored for the refused requests.
	evs, _, err := e.store.ListEvents(t.Context(), store.EventFilter{Source: "stripe"})
	if err != nil {
		t.Fatal(err)
	}
	accepted := 0
	for _, c := range codes {
		if c == 200 {
			accepted++
		}
	}
	if len(evs) != accepted {
		t.Errorf("%d events stored, %d accepted", len(evs), accepted)
	}
	// Another source has no limit.
	for i := range 10 {
		if a := do(t, stripeRequest(t, e.url+"/webhooks/other", stripeSecret, body(100+i), time.Now())); a.Code != 200 {
			t.Fatalf("unlimited source: %d", a.Code)
		}
	}
}

// clientFrom is an HTTP client whose connections come from the local
// address ip (any of 127.0.0.0/8 works on loopback).
func clientFrom(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	return &http.Client{
		Transport:     &http.Transport{DialContext: d.DialContext},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func TestAdminBruteForceSlowed(t *testing.T) {
	t.Parallel()
	e := setup(t, sinktest.New(t), "")
	attacker, friend := clientFrom("127.0.0.7"), clientFrom("127.0.0.8")
	get := func(c *http.Client, token string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", e.url+"/api/events", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	login := func(c *http.Client, token string) int {
		t.Helper()
		resp, err := c.PostForm(e.url+"/login", url.Values{"token": {token}})
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	// Failures through every door count alike: API, metrics, login form.
	for i := range gateway.AuthMaxFailures {
		var code int
		switch i % 3 {
		case 0:
			code = get(attacker, fmt.Sprintf("guess-%d", i)).StatusCode
		case 1:
			req, _ := http.NewRequest("GET", e.url+"/metrics", nil)
			req.Header.Set("Authorization", "Bearer guess")
			resp, err := attacker.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			code = resp.StatusCode
		case 2:
			code = login(attacker, "guess")
		}
		if code != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d, want 401", i, code)
		}
	}
	// The right token passes at once, through the API and the login form:
	// a guesser sharing the address (a proxy, a broken scraper) never
	// locks out the person who has it.
	if code := get(attacker, "test-token").StatusCode; code != 200 {
		t.Fatalf("the right token after %d failures: %d, want 200", gateway.AuthMaxFailures, code)
	}
	if code := login(attacker, "test-token"); code != http.StatusSeeOther {
		t.Errorf("the right login after %d failures: %d, want 303", gateway.AuthMaxFailures, code)
	}
	// The eleventh wrong one gets 429, with Retry-After and no
	// WWW-Authenticate (the handler's 401 headers are not leaked).
	resp := get(attacker, "guess-11")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a wrong token after %d failures: %d, want 429", gateway.AuthMaxFailures, resp.StatusCode)
	}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err != nil || s < 1 || s > int(gateway.AuthWindow.Seconds()) {
		t.Errorf("Retry-After %q, want 1..%v seconds", resp.Header.Get("Retry-After"), gateway.AuthWindow.Seconds())
	}
	if h := resp.Header.Get("WWW-Authenticate"); h != "" {
		t.Errorf("429 carries WWW-Authenticate %q", h)
	}
	if code := login(attacker, "guess"); code != http.StatusTooManyRequests {
		t.Errorf("a wrong login from the blocked address: %d, want 429", code)
	}
	if code := get(attacker, "test-token").StatusCode; code != 200 {
		t.Errorf("the right token after the 429s: %d, want 200", code)
	}
	// Other addresses and ingest are unaffected.
	if code := get(friend, "test-token").StatusCode; code != 200 {
		t.Errorf("another address with the token: %d, want 200", code)
	}
	if code := login(friend, "test-token"); code != http.StatusSeeOther {
		t.Errorf("another address logging in: %d, want 303", code)
	}
	if a := e.sendStripe(t, "evt_during_lockout"); a.Code != 200 {
		t.Errorf("ingest during a lockout: %d", a.Code)
	}
	// A page without a session is no guess: it never blocks.
	viewer := clientFrom("127.0.0.9")
	for range 3 * gateway.AuthMaxFailures {
		req, _ := http.NewRequest("GET", e.url+"/events", nil)
		req.Header.Set("X-AnyHook-Partial", "1")
		resp, err := viewer.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if code := login(viewer, "test-token"); code != http.StatusSeeOther {
		t.Errorf("login after expired-session refreshes: %d, want 303", code)
	}
}

func TestChunkedBodyOverMaxBody(t *testing.T) {
	t.Parallel()
	e := setup(t, sinktest.New(t), "") // max_body: 64KiB
	body := io.MultiReader(strings.NewReader(`{"id":"evt_big","pad":"`), strings.NewReader(strings.Repeat("x", 200<<10)), strings.NewReader(`"}`))
	req, _ := http.NewRequest("POST", e.url+"/webhooks/stripe", io.NopCloser(body))
	req.Header.Set("Stripe-Signature", "t=1,v1=00")
	if req.ContentLength != 0 {
		t.Fatalf("ContentLength %d: the request must be chunked", req.ContentLength)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("chunked body over max_body: %d, want 413", resp.StatusCode)
	}
	evs, _, _ := e.store.ListEvents(t.Context(), store.EventFilter{})
	if len(evs) != 0 {
		t.Fatalf("%d events stored", len(evs))
	}
}

// TestMaxBodyBoundary: a validly signed body of exactly max_body bytes is
// accepted and stored whole; one byte more is 413 and nothing is stored,
// whether the length is announced or the body is chunked. A body is never
// cut to the limit and acknowledged.
func TestMaxBodyBoundary(t *testing.T) {
	t.Parallel()
	e := setup(t, sinktest.New(t), "") // max_body: 64KiB
	const max = 64 << 10
	signed := func(id string, size int) []byte {
		head, tail := `{"id":"`+id+`","object":"event","created":1700000000,"pad":"`, `"}`
		return []byte(head + strings.Repeat("x", size-len(head)-len(tail)) + tail)
	}
	for _, tc := range []struct {
		name    string
		size    int
		chunked bool
		want    int
	}{
		{"announced, at the limit", max, false, 200},
		{"chunked, at the limit", max, true, 200},
		{"announced, one byte over", max + 1, false, http.StatusRequestEntityTooLarge},
		{"chunked, one byte over", max + 1, true, http.StatusRequestEntityTooLarge},
	} {
		id := "evt_" + strings.ReplaceAll(tc.name, " ", "_")
		body := signed(id, tc.size)
		req := stripeRequest(t, e.url+"/webhooks/stripe", stripeSecret, body, time.Now())
		if tc.chunked {
			req.Body, req.ContentLength = io.NopCloser(io.MultiReader(bytes.NewReader(body))), -1
		}
		a := do(t, req)
		if a.Code != tc.want {
			t.Errorf("%s: %d %q, want %d", tc.name, a.Code, a.Error, tc.want)
			continue
		}
		evs, _, err := e.store.ListEvents(t.Context(), store.EventFilter{Q: id, Source: "stripe"})
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case tc.want != 200 && len(evs) != 0:
			t.Errorf("%s: refused, yet %d events stored", tc.name, len(evs))
		case tc.want == 200 && len(evs) != 1:
			t.Errorf("%s: accepted, %d events stored", tc.name, len(evs))
		case tc.want == 200:
			ev, err := e.store.Event(t.Context(), evs[0].ID)
			if err != nil || !bytes.Equal(ev.Body, body) {
				t.Errorf("%s: stored %d bytes, sent %d (%v)", tc.name, len(ev.Body), len(body), err)
			}
		}
	}
}

// TestSlowloris: a client that sends its headers one byte every 100ms is
// cut off by the read-header timeout; the test only bounds how long it
// waits for that.
func TestSlowloris(t *testing.T) {
	t.Parallel()
	e := setup(t, sinktest.New(t), "")
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	closed := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, bufio.NewReader(conn))
		closed <- err
	}()
	if _, err := io.WriteString(conn, "POST /webhooks/stripe HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	fail := time.After(2 * time.Minute)
	header := "X-Slow: " + strings.Repeat("a", 1<<20)
	for i := 0; ; i++ {
		select {
		case <-closed:
			t.Logf("cut off after %d header bytes", i)
			return
		case <-fail:
			t.Fatal("a client dribbling its headers was not cut off")
		case <-tick.C:
			conn.Write([]byte{header[i%len(header)]}) // errors once the server hung up
		}
	}
}
