// Package gatewaytest runs a gateway in-process for tests: from a YAML
// config text, on 127.0.0.1 at a free port, stopped when the test ends.
package gatewaytest

import (
	"context"
	"net"
	"path/filepath"
	"strings"
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
	g, err := gateway.New(t.Context(), opt)
	if err != nil {
		ln.Close()
		t.Fatal(err)
	}
	g.Start(context.Background(), ln)
	t.Cleanup(func() { g.Stop(context.Background()) })
	return base, g
}
