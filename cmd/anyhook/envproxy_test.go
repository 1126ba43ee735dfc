package main

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// A credential in the environment's proxy (HTTP_PROXY) is a secret like
// a configured proxy's: a proxy that quotes the Proxy-Authorization it
// was sent has the quote scrubbed from what the attempt stores and shows.
func TestEnvProxyCredentialScrubbed(t *testing.T) {
	t.Parallel()
	const user, pw = "u", "EnvProxyPw9-0123"
	cred := base64.StdEncoding.EncodeToString([]byte(user + ":" + pw))
	seen := make(chan string, 10)
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Get("Proxy-Authorization")
		w.WriteHeader(http.StatusBadGateway)
		fmt.Fprintf(w, "refused: Proxy-Authorization %s (password %s)", r.Header.Get("Proxy-Authorization"), pw)
	}))
	t.Cleanup(proxy.Close)
	// Not a loopback name: the environment's proxy is not used for those.
	cfg := writeConfig(t, t.TempDir(), strings.Replace(gatewayConfig("sqlite:anyhook.db", "http://billing.example.invalid/hooks", "reclaim"),
		"timeout: 2s", "timeout: 2s\n    max_attempts: 1", 1))
	cmd := exec.Command(binary, "serve", "--config", cfg, "--log-level", "warn")
	cmd.Env = append(os.Environ(), "HTTP_PROXY=http://"+user+":"+pw+"@"+strings.TrimPrefix(proxy.URL, "http://"))
	p, err := startCmd(t, cmd)
	if err != nil {
		t.Fatal(err)
	}
	code, id, err := sendEvent(p.url, "evt_env_proxy")
	if err != nil || code != http.StatusOK {
		t.Fatalf("send: %d %v", code, err)
	}
	select {
	case got := <-seen:
		if got != "Basic "+cred {
			t.Fatalf("the proxy was sent %q", got)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the delivery did not go through the environment's proxy")
	}
	var body string
	testwait.For(t, "the attempt recorded", func() bool {
		req, _ := http.NewRequest("GET", p.url+"/api/events/"+id, nil)
		req.Header.Set("Authorization", "Bearer test-token")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		body = string(b)
		return strings.Contains(body, "refused: Proxy-Authorization")
	})
	if strings.Contains(body, cred) || strings.Contains(body, pw) {
		t.Fatalf("the stored attempt quotes the environment proxy's credential: %s", body)
	}
}
