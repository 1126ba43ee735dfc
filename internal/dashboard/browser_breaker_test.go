package dashboard_test

import (
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
)

// TestBrowserBreaker: a destination that refuses connections, with
// auto_pause, pauses itself; on a 390 px phone the destinations page says
// it is paused by its breaker, with why and the next probe, apart from a
// destination a person paused; the event page says why its delivery waits;
// the Resume button clears the breaker.
func TestBrowserBreaker(t *testing.T) {
	needChromium(t)
	dbPath := filepath.Join(t.TempDir(), "anyhook.db")
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
  down:
    url: %s
    sources: [stripe]
    max_attempts: 5
    backoff: {initial: 1h, max: 2h}
    auto_pause: {consecutive_failures: 2, probe_every: 1h}
  held: {url: %s/hooks, sources: [stripe]}
`, dbPath, browserToken, browserSecret, refused, ok.URL), gateway.Options{})

	var last string
	for i := range 3 {
		last = sendStripe(t, base, []byte(fmt.Sprintf(`{"id":"evt_breaker_%d","object":"event","type":"invoice.paid","created":1700000000}`, i)))
	}
	waitAPI(t, base, "/api/destinations", func(m map[string]any) bool {
		for _, d := range m["items"].([]any) {
			if d := d.(map[string]any); d["name"] == "down" && d["paused_by"] == "breaker" {
				return true
			}
		}
		return false
	})

	bctx := startChromium(t)
	b := browser{t, bctx}
	b.do("a 390 px phone", chromedp.EmulateViewport(390, 844))
	b.do("log in", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), browserToken), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("table#destinations")))
	b.do("person pauses held", chromedp.Navigate(base+"/destinations"), chromedp.WaitVisible(chromedp.CSS("table#destinations")))
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(() => { const f = document.querySelector('form[action="/destinations/held/pause"]'); f.querySelector("button").removeAttribute("data-confirm"); f.submit(); return true })()`)); err != nil {
		t.Fatal(err)
	}
	b.do("destinations", chromedp.WaitVisible(chromedp.CSS(`tr[data-destination="held"] [data-paused-by="person"]`)))
	// 2 or more: attempts already in flight when it trips count too.
	consecutive := regexp.MustCompile(`\b\d+ consecutive failed attempts`)
	if got := b.text(`tr[data-destination="down"]`); !strings.Contains(got, "paused by breaker") ||
		!consecutive.MatchString(got) || !strings.Contains(got, "next probe in ") {
		t.Errorf("down's row %q; want paused by breaker, why, and the next probe", got)
	}
	if got := b.text(`tr[data-destination="held"]`); strings.Contains(got, "breaker") {
		t.Errorf("held's row %q; a person's pause is not the breaker's", got)
	}
	if w, err := chromedp.Run(bctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`)); err != nil || w[0] > 390 {
		t.Errorf("destinations: the page is %v px wide (%v); want at most 390", w, err)
	}
	b.do("event", chromedp.Navigate(base+"/events/"+last), chromedp.WaitVisible(chromedp.CSS("#summary")))
	if got := b.text(`section[data-status="paused"] p.muted`); !strings.Contains(got, "paused by its breaker") || !consecutive.MatchString(got) {
		t.Errorf("the waiting delivery says %q; want why it waits", got)
	}

	b.do("resume down", chromedp.Navigate(base+"/destinations"), chromedp.WaitVisible(chromedp.CSS("table#destinations")),
		chromedp.Click(chromedp.CSS(`form[action="/destinations/down/resume"] button`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-destination="down"]`)))
	waitAPI(t, base, "/api/destinations", func(m map[string]any) bool {
		for _, d := range m["items"].([]any) {
			if d := d.(map[string]any); d["name"] == "down" {
				return d["paused"] == false && d["breaker"] == nil
			}
		}
		return false
	})
	if got := b.text(`tr[data-destination="down"]`); strings.Contains(got, "paused") {
		t.Errorf("down's row after Resume %q; want it no longer paused", got)
	}
}
