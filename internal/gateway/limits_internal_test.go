package gateway

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/anyhook/anyhook/internal/config"
)

// TestServerLimits: the HTTP server bounds every phase of a connection and
// the header size (slowloris, slow bodies, idle connections).
func TestServerLimits(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg, err := config.Parse(filepath.Join(dir, "anyhook.yaml"), []byte("listen: 127.0.0.1:0\ndatabase: sqlite:anyhook.db\nsources: {s: {provider: stripe, secrets: [whsec_x]}}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(t.Context(), Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g.Start(context.Background(), ln)
	defer g.Stop(context.Background())
	s := g.servers[0]
	if s.ReadHeaderTimeout <= 0 || s.ReadTimeout <= 0 || s.WriteTimeout <= 0 || s.IdleTimeout <= 0 || s.MaxHeaderBytes <= 0 {
		t.Fatalf("server limits: read header %v, read %v, write %v, idle %v, max header bytes %d; want all set",
			s.ReadHeaderTimeout, s.ReadTimeout, s.WriteTimeout, s.IdleTimeout, s.MaxHeaderBytes)
	}
	if s.MaxHeaderBytes > 1<<20 {
		t.Errorf("MaxHeaderBytes %d, want at most 1 MiB", s.MaxHeaderBytes)
	}
}
