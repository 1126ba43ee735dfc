package gateway_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
)

// TestURLsThatAreNotText: an admin API or dashboard URL whose path or
// query holds bytes that are not UTF-8, or a NUL byte, once decoded — an
// event id, a dedup key, a source to filter or to replay — is answered
// 400 naming what is wrong, alike on both stores. No stored id, key or
// name holds such bytes; PostgreSQL failed such lookups (503, logged as a
// store failure) where SQLite found nothing (404, or an empty list).
func TestURLsThatAreNotText(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			db := "sqlite:anyhook.db"
			if backend == "postgres" {
				db = pgtest.DSN(t)
			}
			base, _ := gatewaytest.Start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
database: %q
sources:
  gen: {provider: generic, signature: none}
destinations:
  d: {url: http://127.0.0.1:1/x, sources: [gen]}
`, db), gateway.Options{})
			for _, c := range []struct{ method, path, body, says string }{
				{"GET", "/api/events/%FF", "", "the URL path is not valid UTF-8"},
				{"GET", "/api/events/a%00", "", "the URL path holds a NUL byte"},
				{"GET", "/api/events/%FF/proof", "", "the URL path is not valid UTF-8"},
				{"GET", "/api/events?q=%FF", "", "q: is not valid UTF-8"},
				{"GET", "/api/events?type=a%00", "", "type: holds a NUL byte"},
				{"GET", "/api/deliveries?source=%FF", "", "source: is not valid UTF-8"},
				{"GET", "/api/rejections?source=%00", "", "source: holds a NUL byte"},
				{"POST", "/api/replay", `{"source":"a\u0000"}`, "source: holds a NUL byte"},
				{"GET", "/events/%FF", "", "the URL path is not valid UTF-8"},
				{"GET", "/events?q=%FF", "", "q: is not valid UTF-8"},
				{"GET", "/deliveries?source=%00", "", "source: holds a NUL byte"},
			} {
				req, err := http.NewRequest(c.method, base+c.path, strings.NewReader(c.body))
				if err != nil {
					t.Fatal(err)
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), c.says) {
					t.Errorf("%s %s: %d %.300s; want 400 saying %q", c.method, c.path, resp.StatusCode, b, c.says)
				}
			}
		})
	}
}
