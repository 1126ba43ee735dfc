package gateway_test

import (
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// The overview shows the tamper-evident log: intact while every checkpoint
// verifies, and the failure once the stored tree was tampered with.
func TestOverviewShowsLogIntegrity(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "anyhook.db")
	base, _ := gatewaytest.Start(t, fmt.Sprintf(`listen: 127.0.0.1:0
database: sqlite:%s
admin_token: test-token
log: {checkpoint_interval: 50ms}
sources:
  stripe: {provider: stripe, secrets: [%s]}
`, db, stripeSecret), gateway.Options{})
	e := &env{url: base}
	for i := range 3 {
		if a := e.sendStripe(t, fmt.Sprintf("evt_overview_%d", i)); a.Code != 200 {
			t.Fatalf("ingest: %+v", a)
		}
	}
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	resp, err := client.PostForm(base+"/login", url.Values{"token": {"test-token"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	overview := func() string {
		t.Helper()
		resp, err := client.Get(base + "/")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET /: %d %s", resp.StatusCode, b)
		}
		return string(b)
	}
	testwait.For(t, "an intact log of 3 events on the overview", func() bool {
		page := overview()
		return strings.Contains(page, ">intact<") && strings.Contains(page, ">3</div><div class=\"lbl\">events in the latest signed checkpoint")
	})

	// Tamper with the stored tree, then make the log grow: the next
	// checkpoint's self-check fails and the overview says so.
	raw, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`UPDATE ledger_hashes SET hash = zeroblob(32)`); err != nil {
		t.Fatal(err)
	}
	if a := e.sendStripe(t, "evt_overview_after"); a.Code != 200 {
		t.Fatalf("ingest: %+v", a)
	}
	testwait.For(t, "the failed self-check on the overview", func() bool {
		return strings.Contains(overview(), "check failed")
	})
}
