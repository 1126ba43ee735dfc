package dashboard_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
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

// TestBrowserIncident is the on-call engineer's night, on a 390 px phone:
// a handler slower than its timeout (sent, no answer: it may have run), a
// destination that refuses connections (not sent, retrying with its next
// attempt time), and two claims whose worker died (in flight until their
// lease ends, then reclaimed or held as each destination declared). The
// pages say exactly that, and the lists are cards whose status, reason
// and buttons are on the screen.
func TestBrowserIncident(t *testing.T) {
	needChromium(t)
	ctx := context.Background()
	dbPath := filepath.Join(t.TempDir(), "anyhook.db")

	// A worker claimed these, then died: their leases run for an hour.
	st, err := sqlite.Open(ctx, dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	crashed := store.NewID()
	if _, err := st.Ingest(ctx, []store.NewEvent{{Event: anyhook.Event{ID: crashed, Source: "stripe", DedupKey: "evt_worker_died",
		ReceivedAt: time.Now(), Method: "POST", Path: "/webhooks/stripe", Header: http.Header{"Content-Type": {"application/json"}},
		Body: []byte(`{"id":"evt_worker_died"}`)}, Destinations: []string{"ledger", "vault"}}}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"ledger", "vault"} {
		if cs, err := st.Claim(ctx, d, 1, time.Hour); err != nil || len(cs) != 1 {
			t.Fatalf("claim %s: %d, %v", d, len(cs), err)
		}
	}
	st.Close()

	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done() // answers only once the gateway gave up
	}))
	t.Cleanup(slow.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := "http://" + ln.Addr().String() + "/hooks"
	ln.Close()
	ok := newRecorder(t, 200)
	base, _ := gatewaytest.Start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:%s
admin_token: %s
delivery: {poll_interval: 50ms, grace: 1s}
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  slow: {url: %s/hooks, sources: [stripe], timeout: 1s, max_attempts: 1}
  down: {url: %s, sources: [stripe], timeout: 5s, max_attempts: 5, backoff: {initial: 1h, max: 2h}}
  ledger: {url: %s/hooks, sources: [stripe], timeout: 5s}
  vault: {url: %s/hooks, sources: [stripe], timeout: 5s, on_stale_claim: hold}
`, dbPath, browserToken, browserSecret, slow.URL, refused, ok.URL, ok.URL), gateway.Options{})

	id := sendStripe(t, base, []byte(`{"id":"evt_incident_with_a_rather_long_provider_id","object":"event","type":"invoice.paid","created":1700000000,"data":{"object":{"id":"in_1"}}}`))
	waitAPI(t, base, "/api/deliveries?status=dead&destination=slow", func(items []map[string]any) bool { return len(items) == 1 })
	// The event's page first: should down never retry, its answer says
	// what down's delivery is instead.
	waitAPI(t, base, "/api/events/"+id, func(ev map[string]any) bool {
		ds, _ := ev["deliveries"].([]any)
		for _, d := range ds {
			if d, _ := d.(map[string]any); d["destination"] == "down" {
				return d["status"] == "retrying"
			}
		}
		return false
	})
	waitAPI(t, base, "/api/deliveries?status=retrying&destination=down", func(items []map[string]any) bool { return len(items) == 1 })
	// A request with a bad signature, for the refused list.
	resp, err := http.Post(base+"/webhooks/stripe", "application/json", strings.NewReader(`{"id":"evt_badsig"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	// The API names each attempt's outcome.
	ev := waitAPI(t, base, "/api/events/"+id, func(map[string]any) bool { return true })
	outcomes := map[string]string{}
	for _, d := range ev["deliveries"].([]any) {
		d := d.(map[string]any)
		for _, a := range d["attempts"].([]any) {
			outcomes[d["destination"].(string)] = a.(map[string]any)["outcome"].(string)
		}
	}
	if outcomes["slow"] != "no_answer" || outcomes["down"] != "not_sent" || outcomes["ledger"] != "answered" {
		t.Errorf("attempt outcomes %v; want slow no_answer, down not_sent, ledger answered", outcomes)
	}

	bctx := startChromium(t)
	b := browser{t, bctx}
	b.do("a 390 px phone", chromedp.EmulateViewport(390, 844))
	b.do("log in", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), browserToken), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("table#destinations")))

	// 1. Timed out is not refused.
	b.do("event", chromedp.Navigate(base+"/events/"+id), chromedp.WaitVisible(chromedp.CSS("#summary")))
	summary := b.text("#summary")
	for _, want := range []string{
		"slow: tried 1 time (1 attempt of its delivery); the handler may have run 1 time (1 sent without an answer: timed out or reset), answered 2xx 0 times.",
		"down: tried 1 time (1 attempt of its delivery); the handler may have run 0 times; 1 not sent (refused, DNS or TLS: the handler did not run), answered 2xx 0 times.",
	} {
		if !strings.Contains(summary, want) {
			t.Errorf("summary %q lacks %q", summary, want)
		}
	}
	// 2. Retrying is not waiting: the badge and the next attempt.
	if got := b.text(`section[data-status="retrying"] h3`); !strings.Contains(got, "retrying to down") {
		t.Errorf("down's delivery heading %q; want it retrying", got)
	}
	if got := b.text(`section[data-status="retrying"] p.muted`); !strings.Contains(got, "next attempt in ") {
		t.Errorf("down's delivery %q; want its next attempt time", got)
	}

	// 3. A stale claim tells someone, and never contradicts itself.
	b.do("crashed event", chromedp.Navigate(base+"/events/"+crashed), chromedp.WaitVisible(chromedp.CSS("#summary")))
	if page := b.text("main"); strings.Contains(page, "No attempts yet") {
		t.Errorf("the page of a claimed delivery says %q", "No attempts yet")
	}
	leaseEnds := regexp.MustCompile(`its lease ends in \d+m`)
	for dest, want := range map[string]string{
		"ledger": "it is sent again as attempt 2 (on_stale_claim: reclaim)",
		"vault":  "it is held for a person (on_stale_claim: hold)",
	} {
		all, _ := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("section.delivery")].map(s => s.querySelector("h3 strong").innerText + " | " + (s.querySelector("p.in-flight") || {innerText: ""}).innerText + " | " + (s.querySelector("tr.in-flight-row") || {innerText: ""}).innerText)`))
		var line string
		for _, l := range all {
			if strings.HasPrefix(l, dest+" |") {
				line = l
			}
		}
		if !strings.Contains(line, "Attempt 1 is in flight") || !leaseEnds.MatchString(line) || !strings.Contains(line, want) ||
			!strings.Contains(line, "in flight: may be running") {
			t.Errorf("%s: %q; want attempt 1 in flight, its lease end, and %q", dest, line, want)
		}
	}
	if got := b.text(`li[data-destination="ledger"]`); !strings.Contains(got, "tried 1 time (1 attempt of its delivery); 1 in flight now") {
		t.Errorf("ledger's summary %q; want its attempt in flight", got)
	}

	// 2. The retrying filter, its badge and next attempt, on the queue.
	b.do("retrying", chromedp.Navigate(base+"/deliveries?status=retrying"), chromedp.WaitVisible(chromedp.CSS("table#deliveries")))
	if got := b.text("table#deliveries tbody"); !strings.Contains(got, "retrying") || !strings.Contains(got, "down") || !strings.Contains(got, "next in ") ||
		!strings.Contains(got, "not sent: did not run") {
		t.Errorf("the retrying queue %q; want down's delivery, its next attempt and its outcome", got)
	}
	b.do("events retrying", chromedp.Navigate(base+"/events?status=retrying"), chromedp.WaitVisible(chromedp.CSS("table#events")))
	if got := b.text("#event-rows"); !strings.Contains(got, "down: retrying, next in ") {
		t.Errorf("events retrying %q; want down's badge with its next attempt", got)
	}

	// 14. The lists are cards on the phone: what a person acts on is on
	// the screen.
	for _, p := range []struct {
		name, path string
		sels       []string
		below      bool // may be below the fold: only the width is checked
	}{
		{"events", "/events", []string{"#event-rows tr td.states .badge"}, false},
		{"dead queue", "/deliveries?status=dead", []string{"#deliveries tbody tr .row-status", "#deliveries tbody tr .last-error",
			"#deliveries tbody tr .rowactions button[value=resend]", "#deliveries tbody tr .rowactions button[value=discard]"}, false},
		{"refused", "/rejections", []string{"#rejections tbody tr td.reason .badge", "#rejections tbody tr td.answer"}, false},
		{"event", "/events/" + id, []string{`section[data-status="retrying"] table.attempts tbody tr td.err`, `section[data-status="retrying"] table.attempts tbody tr td.outcome`}, true},
	} {
		b.do(p.name, chromedp.Navigate(base+p.path), chromedp.WaitVisible(chromedp.CSS("table.phone-cards")))
		for _, sel := range p.sels {
			r, err := chromedp.Run(bctx, chromedp.Evaluate[[]float64](fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) return []; const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom, r.width]; })()`, sel)))
			if err != nil || len(r) != 5 {
				t.Errorf("%s: %s: not found (%v)", p.name, sel, err)
				continue
			}
			if r[0] < 0 || r[2] > 390 || r[4] < 24 || !p.below && (r[1] < 0 || r[3] > 844) {
				t.Errorf("%s: %s at left %.0f, top %.0f, right %.0f, bottom %.0f (width %.0f); want it on the 390×844 screen", p.name, sel, r[0], r[1], r[2], r[3], r[4])
			}
		}
		if w, err := chromedp.Run(bctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`)); err != nil || w[0] > 390 {
			t.Errorf("%s: the page is %v px wide (%v); want at most 390", p.name, w, err)
		}
	}

	// On a desk the same lists are tables again: each header stands over
	// its column.
	b.do("a 1280 px screen", chromedp.EmulateViewport(1280, 800))
	for _, path := range []string{"/events", "/deliveries?status=dead", "/rejections"} {
		b.do(path, chromedp.Navigate(base+path), chromedp.WaitVisible(chromedp.CSS("table.phone-cards")))
		off, err := chromedp.Run(bctx, chromedp.Evaluate[[]float64](`(() => {
			const t = document.querySelector("table.phone-cards");
			const hs = [...t.querySelectorAll("thead th")], cs = [...t.querySelectorAll("tbody tr:first-child td")];
			if (hs.length === 0 || hs.length !== cs.length) return [-1, hs.length, cs.length];
			return hs.map((h, i) => Math.abs(h.getBoundingClientRect().left - cs[i].getBoundingClientRect().left));
		})()`))
		if err != nil || len(off) == 0 || off[0] < 0 || slices.Max(off) > 1 {
			t.Errorf("%s at 1280 px: headers off their columns by %v px (%v); want each over its column", path, off, err)
		}
	}
}
