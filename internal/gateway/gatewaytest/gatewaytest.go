// Package gatewaytest runs a gateway in-process for tests: from a YAML
// config text, on 127.0.0.1 at a free port, stopped when the test ends.
package gatewaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/gateway"
)

// Start parses yaml as the file anyhook.yaml in a fresh temporary directory
// (so `database: sqlite:anyhook.db` is a new database there), with %URL%
// replaced by the gateway's base URL (for public_url), runs the gateway
// with opt (its Config is set here) and returns its base URL
// ("http://127.0.0.1:PORT") and the gateway.
func Start(t testing.TB, yaml string, opt gateway.Options) (string, *gateway.Gateway) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	yaml = strings.ReplaceAll(yaml, "%URL%", base)
	cfg, err := config.Parse(filepath.Join(t.TempDir(), "anyhook.yaml"), []byte(yaml), nil)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	opt.Config = cfg
	if opt.Logger == nil {
		opt.Logger = failureLog(t)
	}
	g, err := gateway.New(t.Context(), opt)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	g.Start(context.Background(), ln)
	t.Cleanup(func() { g.Stop(context.Background()) })
	return base, g
}

// failureLog is a logger whose lines (info and up) t prints should it
// fail: a test that timed out waiting for a state then says what the
// gateway did meanwhile. (A test binary killed by -timeout runs no
// cleanup: a wait must fail the test before then.)
func failureLog(t testing.TB) *slog.Logger {
	var mu sync.Mutex
	var buf bytes.Buffer
	t.Cleanup(func() { // runs after the gateway's stop (cleanups run last first)
		mu.Lock()
		defer mu.Unlock()
		if t.Failed() && buf.Len() > 0 {
			b := buf.Bytes()
			if len(b) > maxFailureLog {
				b = b[len(b)-maxFailureLog:]
			}
			t.Logf("the gateway's log (its last %d bytes at most):\n%s", maxFailureLog, b)
		}
	})
	return slog.New(slog.NewTextHandler(tailWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

const maxFailureLog = 64 << 10

// tailWriter keeps the last lines written to it, between maxFailureLog
// and twice that: a long test's log does not grow without bound.
type tailWriter struct {
	mu  *sync.Mutex
	buf *bytes.Buffer
}

func (l tailWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buf.Len() > 2*maxFailureLog {
		tail := bytes.Clone(l.buf.Bytes()[l.buf.Len()-maxFailureLog:])
		l.buf.Reset()
		l.buf.Write(tail)
	}
	return l.buf.Write(p)
}

// AdminToken is the admin_token of the tests' configs.
const AdminToken = "test-token"

// Admin sends method url to a gateway's admin side with AdminToken as the
// bearer token and body ("" for none, else sent as JSON), and returns the
// answer's status and body. It fails t when no answer comes.
func Admin(t testing.TB, method, url, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+AdminToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the answer: %v", method, url, err)
	}
	return resp.StatusCode, b
}

// AdminJSON GETs url as Admin does, wants 200 and decodes the body into v.
func AdminJSON(t testing.TB, url string, v any) {
	t.Helper()
	code, b := Admin(t, "GET", url, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, b)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("GET %s: %v in %s", url, err, b)
	}
}
