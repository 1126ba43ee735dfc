package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

// TestBrowserPhone is the 2 a.m. page on a 390 px wide phone: every page
// fits the screen (a wide table scrolls inside itself, never the page),
// every relative time has its absolute RFC 3339 time on hover, any id a
// handler or a log shows (event id, delivery id, provider event id)
// pasted into the search opens its event, and an orphaned destination's
// deliveries are shown in the queue's filter and discarded from the
// destinations page.
func TestBrowserPhone(t *testing.T) {
	needChromium(t)
	ctx := context.Background()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "anyhook.db")

	// A delivery to a destination the config below does not name.
	st, err := sqlite.Open(ctx, dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	orphanEvent := store.NewID()
	if _, err := st.Ingest(ctx, []store.NewEvent{{Event: anyhook.Event{ID: orphanEvent, Source: "stripe", DedupKey: "evt_for_legacy",
		ReceivedAt: time.Now().Add(-3 * time.Hour), Method: "POST", Path: "/webhooks/stripe",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":"evt_for_legacy"}`)}, Destinations: []string{"legacy-crm"}}}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	ok, failing := newRecorder(t, 200), newRecorder(t, 503)
	base, _ := gatewaytest.Start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:%s
admin_token: %s
delivery: {poll_interval: 50ms, grace: 1s}
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  billing: {url: %s/hooks, sources: [stripe], timeout: 5s}
  ledger-sync-with-a-long-name: {url: %s/hooks, sources: [stripe], timeout: 5s, max_attempts: 1}
`, dbPath, browserToken, browserSecret, ok.URL, failing.URL), gateway.Options{})

	var ids []string
	for i := range 3 {
		ids = append(ids, sendStripe(t, base, fmt.Appendf(nil, `{"id":"evt_phone_%d_with_a_rather_long_provider_id","object":"event","type":"invoice.paid","created":%d,"data":{"object":{"id":"in_%d"}}}`, i, 1700000000+i, i)))
	}
	waitAPI(t, base, "/api/deliveries?status=dead", func(items []map[string]any) bool { return len(items) == 3 })
	dead := waitAPI(t, base, "/api/deliveries?status=dead&limit=1", func(items []map[string]any) bool { return len(items) == 1 })[0]

	bctx := startChromium(t)
	do := browser{t, bctx}.do
	// A headless window is at least 500 px wide: emulate the phone's
	// screen instead.
	do("a 390 px phone", chromedp.EmulateViewport(390, 844))
	do("log in", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), browserToken), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("table#destinations")))

	// fits: the page body never scrolls sideways at 390 px.
	fits := func(page string) {
		t.Helper()
		w, err := chromedp.Run(bctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`))
		if err != nil {
			t.Fatalf("%s: %v", page, err)
		}
		if w[1] > 390 || w[0] > 390 {
			t.Errorf("%s: the page is %d px wide in a %d px window; want at most 390 (no sideways scroll)", page, w[0], w[1])
		}
	}
	// hover: every relative time ("3m ago", "in 2s") is a <time> whose
	// title is its RFC 3339 UTC time.
	hover := func(page string) {
		t.Helper()
		bad, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`(() => {
			const bad = [];
			const rel = /(\d+[smhd]( \d+m)? ago|in \d+[smhd])/;
			const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
			for (let n; (n = walk.nextNode()); ) {
				if (!rel.test(n.data)) continue;
				const t = n.parentElement.closest("time");
				if (!t || !/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/.test(t.title) || t.dateTime !== t.title) bad.push(n.data.trim());
			}
			return bad;
		})()`))
		if err != nil {
			t.Fatalf("%s: %v", page, err)
		}
		if len(bad) > 0 {
			t.Errorf("%s: relative times without their absolute time on hover: %q", page, bad)
		}
		n, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("time[title]").length`))
		t.Logf("%s: %d relative times, each with its absolute time", page, n)
	}
	for _, p := range []struct{ name, path, wait string }{
		{"overview", "/", "table#destinations"},
		{"events", "/events", "table#events"},
		{"event", "/events/" + ids[0], "#event-id"},
		{"dead queue", "/deliveries?status=dead", "table#deliveries"},
		{"held queue", "/deliveries?status=held", "table#deliveries"},
		{"destinations", "/destinations", "table#destinations"},
		{"refused", "/rejections", "main"},
	} {
		do(p.name, chromedp.Navigate(base+p.path), chromedp.WaitVisible(chromedp.CSS(p.wait)))
		fits(p.name)
		hover(p.name)
	}
	// The destinations, on the overview and their own page, are cards too:
	// every cell (the last error, the Pause button) is inside the screen,
	// not off to the side of a table that scrolls within itself.
	for _, page := range []string{"/", "/destinations"} {
		do(page, chromedp.Navigate(base+page), chromedp.WaitVisible(chromedp.CSS("table#destinations")))
		off, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#destinations td")].filter(td => td.getBoundingClientRect().right > 390).map(td => td.dataset.label || td.className)`))
		if err != nil || len(off) > 0 {
			t.Errorf("%s at 390 px: destination cells off the screen: %q (%v)", page, off, err)
		}
	}
	// The dead queue is cards: nothing of it is off to the side.
	do("dead queue", chromedp.Navigate(base+"/deliveries?status=dead"), chromedp.WaitVisible(chromedp.CSS("table#deliveries")))
	if w, err := chromedp.Run(bctx, chromedp.Evaluate[[]int](`(() => { const t = document.querySelector("#deliveries"); return [t.scrollWidth, t.clientWidth]; })()`)); err != nil || w[0] > w[1] {
		t.Errorf("the dead queue's cards: scroll width %v (%v); want them within their box", w, err)
	}
	// The orphaned destination is in the queue's destination filter.
	opts, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("select[name=destination] option")].map(o => o.innerText)`))
	if err != nil || !strings.Contains(strings.Join(opts, ","), "legacy-crm (not in config)") {
		t.Errorf("destination filter options %q (%v); want legacy-crm marked not in config", opts, err)
	}

	// Paste an id: the event id (X-AnyHook-Delivery), a delivery id, the
	// provider's event id: each opens the event.
	for _, q := range []string{ids[1], dead["id"].(string), "evt_phone_2_with_a_rather_long_provider_id"} {
		want := ids[1]
		if q == dead["id"] {
			want = dead["event_id"].(string)
		} else if strings.HasPrefix(q, "evt_phone_2") {
			want = ids[2]
		}
		do("search "+q, chromedp.Navigate(base+"/events"), chromedp.WaitVisible(chromedp.CSS(`input[name="q"]`)),
			chromedp.SendKeys(chromedp.CSS(`input[name="q"]`), q), chromedp.Submit(chromedp.CSS(`input[name="q"]`)),
			chromedp.WaitVisible(chromedp.CSS("#event-id")))
		if got, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#event-id"))); err != nil || got != want {
			t.Errorf("search %s opened %q (%v), want event %s", q, got, err, want)
		}
	}

	// Discard the orphaned destination's delivery from the destinations
	// page, with a reason.
	do("destinations", chromedp.Navigate(base+"/destinations"), chromedp.WaitVisible(chromedp.CSS(`button[data-discard="legacy-crm"]`)))
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(window.confirm = function () { return true; }, true)`)); err != nil {
		t.Fatal(err)
	}
	do("discard legacy-crm",
		chromedp.SendKeys(chromedp.CSS(`form[action="/destinations/legacy-crm/discard"] input[name="reason"]`), "legacy CRM retired"),
		chromedp.Click(chromedp.CSS(`button[data-discard="legacy-crm"]`)), chromedp.WaitVisible(chromedp.CSS(".flash-ok")))
	if msg, _ := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(".flash-ok"))); !strings.Contains(msg, "discarded 1 delivery") {
		t.Errorf("after the discard: %q", msg)
	}
	ev := waitAPI(t, base, "/api/events/"+orphanEvent, func(ev map[string]any) bool { return true })
	d := ev["deliveries"].([]any)[0].(map[string]any)
	if res, _ := d["resolution"].(map[string]any); d["status"] != "resolved" || res["kind"] != "discarded" || res["reason"] != "legacy CRM retired" ||
		!strings.HasPrefix(fmt.Sprint(res["by"]), "admin (dashboard session") {
		t.Errorf("the orphaned delivery after the discard: %v", d)
	}
}
