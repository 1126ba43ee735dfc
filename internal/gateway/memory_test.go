package gateway_test

import (
	"bytes"
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
)

// sqlite::memory: (documented for throwaway runs) is a working gateway:
// it ingests, delivers, replays, answers the API, /readyz and /metrics.
func TestInMemoryDatabaseWorks(t *testing.T) {
	t.Parallel()
	sk := sinktest.New(t)
	base, g := gatewaytest.Start(t, `
listen: 127.0.0.1:0
database: "sqlite::memory:"
admin_token: test-token
delivery: {poll_interval: 50ms, grace: 1s}
sources:
  stripe: {provider: stripe, secrets: [`+stripeSecret+`]}
destinations:
  billing: {url: `+sk.URL+`/hooks, sources: [stripe], backoff: {initial: 10ms, max: 40ms}}
`, gateway.Options{})
	e := &env{url: base, gw: g, store: g.Store(), sink: sk}
	a := e.sendStripe(t, "evt_memory")
	if a.Code != 200 || a.Status != "accepted" {
		t.Fatalf("ingest on sqlite::memory: = %+v", a)
	}
	e.waitStatus(t, a.ID, anyhook.StatusDelivered)
	// Poll and rescue cycles run meanwhile: they must not fail either.
	time.Sleep(200 * time.Millisecond)
	if code, body := gatewaytest.Admin(t, "GET", base+"/readyz", ""); code != 200 {
		t.Fatalf("/readyz = %d %q", code, body)
	}
	if code, body := gatewaytest.Admin(t, "GET", base+"/api/events/"+a.ID, ""); code != 200 || !bytes.Contains(body, []byte("evt_memory")) {
		t.Fatalf("GET /api/events/%s = %d %s", a.ID, code, body)
	}
	if code, _ := gatewaytest.Admin(t, "POST", base+"/api/events/"+a.ID+"/replay", `{}`); code != 202 {
		t.Fatalf("replay = %d", code)
	}
	sk.Wait(t, 2)
	code, body := gatewaytest.Admin(t, "GET", base+"/metrics", "")
	if code != 200 || !bytes.Contains(body, []byte("anyhook_store_scrape_error 0\n")) ||
		!bytes.Contains(body, []byte(`anyhook_ingest_requests_total{outcome="duplicate",source="stripe"} 0`+"\n")) {
		t.Fatalf("/metrics = %d, want the store read and every series there:\n%s", code, body)
	}
}

// /readyz fails when the store does: a database that lost its tables
// answers SELECT 1, but ingest answers 503, and so must /readyz.
func TestReadyzFailsWhenTheStoreDoes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "anyhook.db")
	sk := sinktest.New(t)
	base, g := gatewaytest.Start(t, `
listen: 127.0.0.1:0
database: sqlite:`+path+`
admin_token: test-token
sources:
  stripe: {provider: stripe, secrets: [`+stripeSecret+`]}
destinations:
  billing: {url: `+sk.URL+`/hooks, sources: [stripe]}
`, gateway.Options{})
	if code, body := gatewaytest.Admin(t, "GET", base+"/readyz", ""); code != 200 {
		t.Fatalf("/readyz of a fresh gateway = %d %q", code, body)
	}
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)&_pragma=foreign_keys(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'`)
	if err != nil {
		t.Fatal(err)
	}
	var tables []string
	for rows.Next() {
		var name string
		rows.Scan(&name)
		tables = append(tables, name)
	}
	rows.Close()
	for _, name := range tables {
		if _, err := db.Exec(`DROP TABLE "` + name + `"`); err != nil {
			t.Fatal(err)
		}
	}
	e := &env{url: base, gw: g, store: g.Store(), sink: sk}
	if a := e.sendStripe(t, "evt_no_tables"); a.Code != 503 {
		t.Fatalf("ingest without tables = %+v, want 503", a)
	}
	if code, body := gatewaytest.Admin(t, "GET", base+"/readyz", ""); code != 503 || !bytes.Contains(body, []byte("store unavailable")) {
		t.Fatalf("/readyz = %d %q while the store fails, want 503", code, body)
	}
}
