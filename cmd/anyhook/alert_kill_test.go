package main

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/anyhook/anyhook/internal/testkit/pgtest"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// TestKillWhileAlertsFold: three deliveries go dead, so the alert channel
// is owed the first alert at once and a summary of the other two when the
// window ends. The channel is down for the first post, and the gateway is
// killed (kill -9) while the summary waits for its window. Restarted, it
// sends the first alert again (the channel never took it) and then the
// summary: each arrives once at the recording channel on 127.0.0.1, and
// nothing more after a clean stop.
//
// The killed process has an hour's window, so the kill is certainly
// inside it; the restarted one a second's, so it finds the window over.
func TestKillWhileAlertsFold(t *testing.T) {
	t.Parallel()
	// The first delivery_dead post is refused; the incident's alerts
	// (the destination failing) go through, and are not counted here.
	var refused atomic.Bool
	isDead := func(body []byte) bool { return bytes.Contains(body, []byte(`"kind":"delivery_dead"`)) }
	alerts := sinktest.Start(t, sinktest.Options{Answer: func(_ *http.Request, body []byte) int {
		if isDead(body) && refused.CompareAndSwap(false, true) {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}})
	deadPosts := func(rs []sinktest.Request) []sinktest.Request {
		var out []sinktest.Request
		for _, r := range rs {
			if isDead(r.Body) {
				out = append(out, r)
			}
		}
		return out
	}
	dest := sinktest.Start(t, sinktest.Options{Answer: func(*http.Request, []byte) int { return http.StatusInternalServerError }})
	dir := t.TempDir()
	config := func(window string) string {
		return writeConfig(t, dir, gatewayConfig("sqlite:anyhook.db", dest.URL, "reclaim")+fmt.Sprintf(`    max_attempts: 1
alert_window: %s
alert_delivery_dead: true
alerts:
  - webhook: %s/alerts
`, window, alerts.URL))
	}
	p := start(t, config("1h"))
	for i := range 3 {
		if code, _, err := sendEvent(p.url, fmt.Sprintf("evt_fold_%d", i)); err != nil || code != 200 {
			t.Fatalf("send %d = %d, %v", i, code, err)
		}
	}
	alerts.Await(t, "the first delivery_dead alert, refused", func(rs []sinktest.Request) bool { return len(deadPosts(rs)) >= 1 })

	// Kill only once the store holds what the process owes: the two
	// folded alerts, and the refused post's outcome (due again soon).
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "anyhook.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	testwait.Value(t, "two alerts folded and the refused post recorded", func() (struct{}, error) {
		var pending, attempts int
		var lastErr sql.NullString
		if err := db.QueryRow(`SELECT pending FROM alert_folds WHERE fold = 'delivery_dead'`).Scan(&pending); err != nil {
			return struct{}{}, err
		}
		if err := db.QueryRow(`SELECT attempts, last_error FROM alert_outbox WHERE state = 'pending' AND kind = 'delivery_dead'`).Scan(&attempts, &lastErr); err != nil {
			return struct{}{}, err
		}
		if pending != 2 || attempts != 1 || !lastErr.Valid {
			return struct{}{}, fmt.Errorf("folded %d, first post: attempts %d, error %v", pending, attempts, lastErr)
		}
		return struct{}{}, nil
	})
	p.kill()

	p2 := start(t, config("1s"))
	posts := deadPosts(alerts.Await(t, "three delivery_dead posts", func(rs []sinktest.Request) bool { return len(deadPosts(rs)) >= 3 }))
	p2.stop(t)
	if n := len(deadPosts(alerts.Requests())); n != 3 {
		t.Fatalf("%d delivery_dead posts after a clean stop, want 3", n)
	}
	var got [3]struct {
		DeliveryID string `json:"delivery_id"`
		More       int
	}
	for i, r := range posts {
		if err := json.Unmarshal(r.Body, &got[i]); err != nil {
			t.Fatal(err)
		}
	}
	first, again, summary := got[0], got[1], got[2]
	if again != first || first.More != 0 {
		t.Errorf("the refused first alert %+v was sent again as %+v", first, again)
	}
	if summary.More != 1 || summary.DeliveryID == first.DeliveryID {
		t.Errorf("summary %+v, want another delivery standing for 1 more (first %s)", summary, first.DeliveryID)
	}
}

// TestPostgresAlertsTwoProcesses: two gateways on one PostgreSQL database
// each see deliveries of one destination go dead. The alert channel gets
// the first alert once and, at the stops, one summary standing for all
// the others once: the fold is the database's, not each process's, and
// each message is sent by one process.
func TestPostgresAlertsTwoProcesses(t *testing.T) {
	t.Parallel()
	const n = 10
	raw := pgtest.DSN(t)
	dsn := withPool(raw)
	alerts := sinktest.New(t)
	dest := sinktest.Start(t, sinktest.Options{Answer: func(*http.Request, []byte) int { return http.StatusInternalServerError }})
	ps := startConfigs(t, 2, func(int) string {
		return gatewayConfig(dsn, dest.URL, "reclaim") + fmt.Sprintf(`    max_attempts: 1
alert_window: 1h
alert_delivery_dead: true
alerts:
  - webhook: %s/alerts
`, alerts.URL)
	})
	for i := range n {
		if code, _, err := sendEvent(ps[i%2].url, fmt.Sprintf("evt_pg_alert_%d", i)); err != nil || code != 200 {
			t.Fatalf("send %d = %d, %v", i, code, err)
		}
	}
	db, err := sql.Open("pgx", raw)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	testwait.Value(t, fmt.Sprintf("%d alerts folded", n-1), func() (struct{}, error) {
		var pending int
		if err := db.QueryRow(`SELECT pending FROM alert_folds WHERE fold = 'delivery_dead'`).Scan(&pending); err != nil {
			return struct{}{}, err
		}
		if pending != n-1 {
			return struct{}{}, fmt.Errorf("%d folded", pending)
		}
		return struct{}{}, nil
	})
	ps[0].stop(t) // queues the summary
	ps[1].stop(t)
	accounted, seen := 0, map[string]bool{}
	var got []string
	for _, r := range alerts.Requests() {
		var m struct {
			Kind       string
			DeliveryID string `json:"delivery_id"`
			More       int
		}
		if err := json.Unmarshal(r.Body, &m); err != nil {
			t.Fatal(err)
		}
		if m.Kind != "delivery_dead" {
			continue // the destination's incident
		}
		got = append(got, fmt.Sprintf("%s+%d", m.DeliveryID, m.More))
		if seen[m.DeliveryID] {
			t.Errorf("%s alerted twice", m.DeliveryID)
		}
		seen[m.DeliveryID] = true
		accounted += 1 + m.More
	}
	if len(got) != 2 || accounted != n {
		t.Fatalf("posts %v, want 2 (the first, then one summary) standing for %d alerts", got, n)
	}
}
