package dashboard_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/admin"
	"github.com/anyhook/anyhook/internal/dashboard"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

// benchEvents is the size of the seeded store.
const benchEvents = 1_000_000

// seedFormat changes when the seeded data's shape does.
const seedFormat = "v1"

// benchDB returns the path of a SQLite store holding benchEvents events,
// seeding it on first use and caching it in os.TempDir, keyed by the
// schema (the migration files), the stored header encoding and the seed
// format, so reruns start at once.
func benchDB(b *testing.B) string {
	b.Helper()
	h := sha256.New()
	h.Write([]byte(seedFormat))
	files, _ := filepath.Glob("../store/sqlite/migrations/*.sql")
	if len(files) == 0 {
		b.Fatal("no migrations found: run the benchmark from internal/dashboard")
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		h.Write(data)
	}
	// The stored form of headers is part of the data, too.
	enc, err := store.EncodeHeader(http.Header{"Content-Type": {"application/json"}})
	if err != nil {
		b.Fatal(err)
	}
	h.Write(enc)
	path := filepath.Join(os.TempDir(), fmt.Sprintf("anyhook-bench-%d-%s.db", benchEvents, hex.EncodeToString(h.Sum(nil))[:12]))
	if _, err := os.Stat(path); err == nil {
		return path
	}
	b.Logf("seeding %d events into %s (once; cached for reruns)", benchEvents, path)
	start := time.Now()
	tmp := path + ".seeding"
	for _, p := range []string{tmp, tmp + "-wal", tmp + "-shm"} {
		os.Remove(p)
	}
	ctx := context.Background()
	st, err := sqlite.Open(ctx, tmp, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	// Thirty days of traffic, oldest first: about 1,400 events an hour.
	now := time.Now()
	step := 30 * 24 * time.Hour / benchEvents
	header := http.Header{"Content-Type": {"application/json"}, "Stripe-Signature": {"t=1700000000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd"}}
	const batch = 1000
	evs := make([]store.NewEvent, 0, batch)
	for i := range benchEvents {
		src, dests := "stripe", []string{"billing"}
		if i%5 == 0 {
			src, dests = "github", []string{"ci", "audit"}
		}
		key := fmt.Sprintf("evt_%07d", i)
		body := fmt.Sprintf(`{"id":%q,"object":"event","type":"invoice.paid","created":%d,"data":{"object":{"id":"in_%d","amount":%d,"currency":"eur","customer":"cus_%d"}}}`,
			key, 1700000000+i, i, 1000+i%5000, i%9973)
		evs = append(evs, store.NewEvent{Event: anyhook.Event{ID: store.NewID(), Source: src, DedupKey: key,
			ReceivedAt: now.Add(-time.Duration(benchEvents-i) * step), Method: "POST", Path: "/webhooks/" + src,
			Header: header, Body: []byte(body)}, Destinations: dests})
		if len(evs) == batch || i == benchEvents-1 {
			if _, err := st.Ingest(ctx, evs); err != nil {
				b.Fatal(err)
			}
			evs = evs[:0]
		}
	}
	st.Close()
	// Settle the queue as a live gateway would have: nearly everything
	// delivered a second after it arrived, one in 200 dead, a few held
	// and a few still pending.
	db, err := sql.Open("sqlite", "file:"+tmp)
	if err != nil {
		b.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE deliveries SET status = 'delivered', attempt_count = 1,
			next_attempt_at = (SELECT received_at FROM events e WHERE e.id = deliveries.event_id) + 1000000,
			updated_at = (SELECT received_at FROM events e WHERE e.id = deliveries.event_id) + 1000000`,
		`UPDATE deliveries SET status = 'dead', attempt_count = 8 WHERE rowid % 200 = 7`,
		`UPDATE deliveries SET status = 'held' WHERE rowid % 100000 = 11`,
		`UPDATE deliveries SET status = 'pending' WHERE rowid > (SELECT max(rowid) FROM deliveries) - 20`,
		`PRAGMA wal_checkpoint(TRUNCATE)`,
	} {
		if _, err := db.Exec(q); err != nil {
			b.Fatal(err)
		}
	}
	db.Close()
	if err := os.Rename(tmp, path); err != nil {
		b.Fatal(err)
	}
	os.Remove(tmp + "-wal")
	os.Remove(tmp + "-shm")
	b.Logf("seeded in %v", time.Since(start).Round(time.Second))
	return path
}

// BenchmarkPages measures page renders against a store of 1,000,000
// events. It runs only under -bench:
//
//	go test -run '^$' -bench Pages -benchtime 50x ./internal/dashboard
func BenchmarkPages(b *testing.B) {
	path := benchDB(b)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	srcs := map[string][]string{"stripe": {"billing"}, "github": {"ci", "audit"}}
	api := admin.New(admin.Options{Store: st, Token: token, Sources: srcs})
	d, err := dashboard.New(dashboard.Options{Store: st, API: api.Handler(), Token: token, Sources: srcs})
	if err != nil {
		b.Fatal(err)
	}
	h := d.Handler()
	login := httptest.NewRequest("POST", "/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	login.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, login)
	cookies := rec.Result().Cookies()
	if len(cookies) == 0 {
		b.Fatal("login failed")
	}

	// Targets: the newest event, one in the middle, and a deep cursor.
	newest, _, err := st.ListEvents(ctx, store.EventFilter{Limit: 1})
	if err != nil || len(newest) == 0 {
		b.Fatal(err)
	}
	mid, _, err := st.ListEvents(ctx, store.EventFilter{Q: fmt.Sprintf("evt_%07d", benchEvents/2), Source: "github"})
	if err != nil || len(mid) == 0 {
		b.Fatal("middle event not found", err)
	}
	pages := []struct{ name, path string }{
		{"overview", "/"},
		{"events", "/events"},
		{"events/live-refresh", "/events?partial"},
		{"events/source", "/events?source=github"},
		{"events/deep-cursor", "/events?cursor=" + mid[0].ID},
		{"events/search-id", fmt.Sprintf("/events?q=evt_%07d", benchEvents/2)},
		{"events/status-dead", "/events?status=dead"},
		{"events/status-held", "/events?status=held"}, // the store scans events newest first for a rare status
		{"event-detail", "/events/" + newest[0].ID},
		{"event-detail/middle", "/events/" + mid[0].ID},
		{"dead-queue", "/deliveries?status=dead"},
		{"held-queue", "/deliveries?status=held"},
		{"destinations", "/destinations"},
	}
	for _, p := range pages {
		b.Run(p.name, func(b *testing.B) {
			path, partial := strings.CutSuffix(p.path, "?partial")
			for b.Loop() {
				req := httptest.NewRequest("GET", path, nil)
				for _, c := range cookies {
					req.AddCookie(c)
				}
				if partial {
					req.Header.Set("X-AnyHook-Partial", "1")
				}
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("GET %s: %d %.300s", path, rec.Code, rec.Body.String())
				}
			}
		})
	}
}
