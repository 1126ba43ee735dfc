package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

// switchable is a destination that answers code (changeable) and counts
// the requests it got.
type switchable struct {
	*httptest.Server
	code atomic.Int64
	hits atomic.Int64
}

func newSwitchable(t *testing.T, code int) *switchable {
	s := &switchable{}
	s.code.Store(int64(code))
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		s.hits.Add(1)
		w.WriteHeader(int(s.code.Load()))
	}))
	t.Cleanup(s.Close)
	return s
}

// metric reads one series of /metrics.
func metric(t *testing.T, base, series string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+browserToken)
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			return v
		}
	}
	t.Fatalf("/metrics has no %s", series)
	return ""
}

// TestBrowserRecords drives what the screens say after a crash, a dead
// destination, replays and a pause: the attempt a crash lost
// shows when it was sent; "Replay all dead" with a reason empties the dead
// queue, the overview and the dead gauge, and a second one replays
// nothing; the event page says per destination what happened and who
// replayed it, when and why; a paused destination's deliveries are paused
// on every page and in the metrics until it is resumed.
func TestBrowserRecords(t *testing.T) {
	needChromium(t)
	ctx := context.Background()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "anyhook.db")

	// A delivery claimed ten minutes ago by a worker that then crashed,
	// rescued (held) now: its lost attempt started ten minutes ago.
	claimedAt := time.Now().UTC().Add(-10 * time.Minute).Truncate(time.Second)
	then, err := sqlite.Open(ctx, dbPath, sqlite.Options{Now: func() time.Time { return claimedAt }})
	if err != nil {
		t.Fatal(err)
	}
	crashed := store.NewID()
	if _, err := then.Ingest(ctx, []store.NewEvent{{Event: anyhook.Event{ID: crashed, Source: "stripe", DedupKey: "evt_crashed",
		ReceivedAt: claimedAt, Method: "POST", Path: "/webhooks/stripe", Header: http.Header{"Content-Type": {"application/json"}},
		Body: []byte(`{"id":"evt_crashed"}`)}, Destinations: []string{"vault"}}}); err != nil {
		t.Fatal(err)
	}
	if cs, err := then.Claim(ctx, "vault", 1, time.Minute); err != nil || len(cs) != 1 {
		t.Fatalf("claim: %v, %d", err, len(cs))
	}
	then.Close()
	now, err := sqlite.Open(ctx, dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := now.Rescue(ctx, func(string) (store.StaleRule, bool) { return store.StaleRule{Policy: anyhook.Hold}, true }); err != nil {
		t.Fatal(err)
	}
	now.Close()

	billing, ledgerSync, vault := newSwitchable(t, 200), newSwitchable(t, 503), newSwitchable(t, 200)
	base, _ := gatewaytest.Start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:%s
admin_token: %s
delivery: {poll_interval: 50ms, grace: 1s}
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  billing: {url: %s/hooks, sources: [stripe], timeout: 5s}
  ledger-sync: {url: %s/hooks, sources: [stripe], timeout: 5s, max_attempts: 1}
  vault: {url: %s/hooks, sources: [stripe], timeout: 5s, on_stale_claim: hold}
`, dbPath, browserToken, browserSecret, billing.URL, ledgerSync.URL, vault.URL), gateway.Options{})

	var ids []string
	for i := range 3 {
		ids = append(ids, sendStripe(t, base, fmt.Appendf(nil, `{"id":"evt_rec_%d","object":"event","type":"invoice.paid","created":%d,"data":{"object":{"id":"in_%d"}}}`, i, 1700000000+i, i)))
	}
	waitAPI(t, base, "/api/deliveries?status=dead&destination=ledger-sync", func(items []map[string]any) bool { return len(items) == 3 })
	if got := metric(t, base, `anyhook_queue_depth{destination="ledger-sync",status="dead"}`); got != "3" {
		t.Fatalf("dead gauge before the replay = %s, want 3", got)
	}

	bctx := startChromium(t)
	b := browser{t, bctx}
	do, text := b.do, b.text
	do("log in", chromedp.Navigate(base+"/deliveries?status=dead"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), browserToken), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#replay-dead")))
	// confirmAll answers the page's confirmation dialogs yes (per page).
	confirmAll := func() {
		t.Helper()
		if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(window.confirm = function () { return true; }, true)`)); err != nil {
			t.Fatal(err)
		}
	}

	// The crash: the lost attempt started when it was claimed.
	do("the crashed event", chromedp.Navigate(base+"/events/"+crashed), chromedp.WaitVisible(chromedp.CSS("table.attempts")))
	if row := text("table.attempts tbody tr"); !strings.Contains(row, claimedAt.Format("2006-01-02 15:04:05Z")) || !strings.Contains(row, "unknown") ||
		strings.Contains(row, "0.0 ms") {
		t.Errorf("lost attempt row %q, want started at the claim %s, duration unknown", row, claimedAt.Format("2006-01-02 15:04:05Z"))
	}

	// ledger-sync is fixed; replay the dead queue, with a reason. Each row
	// says which provider event it is and how its last attempt failed.
	ledgerSync.code.Store(200)
	do("dead queue", chromedp.Navigate(base+"/deliveries?status=dead"), chromedp.WaitVisible(chromedp.CSS("#replay-dead")))
	rows, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#deliveries tbody tr")].map(r => r.querySelector(".provider-id").innerText + " | " + r.querySelector(".last-error").innerText)`))
	if err != nil || len(rows) != 3 {
		t.Fatalf("dead queue rows: %q, %v; want 3", rows, err)
	}
	for _, row := range rows {
		if !strings.HasPrefix(row, "evt_rec_") || !strings.Contains(row, "503") || !strings.Contains(row, "attempt 1") {
			t.Errorf("dead queue row %q; want its provider event id and last error (503, attempt 1)", row)
		}
	}
	confirmAll()
	do("replay all dead",
		chromedp.SendKeys(chromedp.CSS(`form[action="/replay"] input[name="reason"]`), "ledger-sync fixed (INC-7)"),
		chromedp.Click(chromedp.CSS("#replay-dead")), chromedp.WaitVisible(chromedp.CSS(".flash-ok")))
	if msg := text(".flash-ok"); !strings.Contains(msg, "Replay queued for 3 deliveries") {
		t.Fatalf("after replay all dead: %q", msg)
	}
	if rows := text("table#deliveries tbody"); !strings.Contains(rows, "Nothing here.") {
		t.Errorf("the dead queue after the replay still lists: %s", rows)
	}
	waitAPI(t, base, "/api/deliveries?status=delivered&destination=ledger-sync", func(items []map[string]any) bool { return len(items) == 3 })
	if got := metric(t, base, `anyhook_queue_depth{destination="ledger-sync",status="dead"}`); got != "0" {
		t.Errorf("dead gauge after the replay = %s, want 0", got)
	}
	do("overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("table#destinations")))
	if tile := text(`a.card.st-dead`); !strings.HasPrefix(strings.TrimSpace(tile), "0") {
		t.Errorf("overview dead tile %q, want 0", tile)
	}
	// The dead queue is empty: it offers no bulk button to press twice.
	do("dead queue again", chromedp.Navigate(base+"/deliveries?status=dead"), chromedp.WaitVisible(chromedp.CSS("table#deliveries")))
	buttons, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#replay-dead, .actions button[value=resend], .actions button[value=discard]").length`))
	if err != nil || buttons != 0 {
		t.Errorf("the empty dead queue shows %d bulk buttons (%v), want none", buttons, err)
	}
	if n := ledgerSync.hits.Load(); n != 6 {
		t.Errorf("ledger-sync got %d requests, want 6 (3 that failed, 3 replays)", n)
	}

	// The event page: per destination what happened, and who did it.
	do("event", chromedp.Navigate(base+"/events/"+ids[0]), chromedp.WaitVisible(chromedp.CSS("#summary")))
	summary := text("#summary")
	for _, want := range []string{
		"billing: tried 1 time (1 attempt of its delivery); the handler may have run 1 time (1 answered), answered 2xx 1 time.",
		"ledger-sync: tried 2 times (1 attempt of its delivery, 1 attempt of 1 replay); the handler may have run 2 times (2 answered), answered 2xx 1 time.",
	} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary %q lacks %q", summary, want)
		}
	}
	if page := text("main"); strings.Contains(page, "once per destination") {
		t.Errorf("the event page still claims delivery once per destination")
	}
	session := regexp.MustCompile(`^admin \(dashboard session [0-9a-f]{8}\)$`)
	actions := text("table#actions tbody")
	cells := strings.Split(strings.TrimSpace(actions), "\t")
	if len(cells) < 5 || !session.MatchString(strings.TrimSpace(cells[1])) || !strings.Contains(actions, "replayed to ledger-sync") ||
		!strings.Contains(actions, "ledger-sync fixed (INC-7)") {
		t.Errorf("actions %q, want the replay by a dashboard session with its reason", actions)
	}
	if res := text(`p.resolution[data-resolution="replayed"]`); !strings.Contains(res, "Resolved: replayed by admin (dashboard session") ||
		!strings.Contains(res, "ledger-sync fixed (INC-7)") || !strings.Contains(res, "carries the work") {
		t.Errorf("resolution of the dead delivery: %q", res)
	}

	// Pause billing: what waits for it is paused everywhere.
	do("destinations", chromedp.Navigate(base+"/destinations"), chromedp.WaitVisible(chromedp.CSS(`tr[data-destination="billing"]`)))
	confirmAll()
	do("pause billing", chromedp.Click(chromedp.CSS(`tr[data-destination="billing"] form[action="/destinations/billing/pause"] button`)),
		chromedp.WaitVisible(chromedp.CSS(".flash-ok")))
	paused := sendStripe(t, base, []byte(`{"id":"evt_rec_paused","object":"event","type":"invoice.paid","created":1700000100,"data":{"object":{"id":"in_p"}}}`))
	waitAPI(t, base, "/api/deliveries?status=paused&destination=billing", func(items []map[string]any) bool { return len(items) == 1 })
	do("paused event", chromedp.Navigate(base+"/events/"+paused), chromedp.WaitVisible(chromedp.CSS(`section.delivery[data-status="paused"]`)))
	if got := metric(t, base, `anyhook_queue_depth{destination="billing",status="paused"}`); got != "1" {
		t.Errorf("paused gauge = %s, want 1", got)
	}
	if got := metric(t, base, `anyhook_queue_depth{destination="billing",status="pending"}`); got != "0" {
		t.Errorf("billing pending gauge while paused = %s, want 0", got)
	}
	do("overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("table#destinations")))
	if tile := text(`a.card.st-paused`); !strings.HasPrefix(strings.TrimSpace(tile), "1") {
		t.Errorf("overview paused tile %q, want 1", tile)
	}
	do("events filtered paused", chromedp.Navigate(base+"/events?status=paused"), chromedp.WaitVisible(chromedp.CSS("table#events")))
	if rows := text("#event-rows"); !strings.Contains(rows, "billing: paused") {
		t.Errorf("events ?status=paused: %q", rows)
	}
	do("resume billing", chromedp.Navigate(base+"/destinations"),
		chromedp.Click(chromedp.CSS(`tr[data-destination="billing"] form[action="/destinations/billing/resume"] button`)),
		chromedp.WaitVisible(chromedp.CSS(".flash-ok")))
	waitAPI(t, base, "/api/events/"+paused, func(ev map[string]any) bool {
		for _, d := range ev["deliveries"].([]any) {
			if d := d.(map[string]any); d["destination"] == "billing" {
				return d["status"] == "delivered"
			}
		}
		return false
	})
}
