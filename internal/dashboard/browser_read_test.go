package dashboard_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
)

// browserReadToken is a token with scope read in TestBrowserReadToken's
// config.
const browserReadToken = "browser-read-token-0123"

// TestBrowserReadToken: in a real chromium, a person logged in with a
// read token sees the event, the dead queue and the destinations, marked
// read only, and no button that would act (each would fail with 403).
func TestBrowserReadToken(t *testing.T) {
	needChromium(t)
	down := newRecorder(t, 500)
	base, _ := gatewaytest.Start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:%s
admin_token: %s
tokens:
  - {name: grafana, token: %s, scopes: [read]}
delivery: {poll_interval: 50ms, grace: 1s}
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  down: {url: %s/hooks, sources: [stripe], max_attempts: 1}
`, filepath.Join(t.TempDir(), "anyhook.db"), browserToken, browserReadToken, browserSecret, down.URL), gateway.Options{})
	id := sendStripe(t, base, []byte(`{"id":"evt_read_1","object":"event","type":"invoice.paid","created":1700000000}`))
	waitAPI(t, base, "/api/deliveries?status=dead", func(items []map[string]any) bool { return len(items) == 1 })

	bctx := startChromium(t)
	b := browser{t, bctx}
	b.do("log in with the read token", chromedp.Navigate(base+"/login"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), browserReadToken), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#read-only")))
	for _, p := range []struct{ name, path, wait string }{
		{"event", "/events/" + id, `section[data-status="dead"]`},
		{"dead queue", "/deliveries?status=dead", "table#deliveries tr[data-delivery]"},
		{"destinations", "/destinations", "table#destinations"},
		{"sources", "/sources", "main"},
	} {
		b.do(p.name, chromedp.Navigate(base+p.path), chromedp.WaitVisible(chromedp.CSS(p.wait)))
		// Every button on the page but Log out and the filters' Show/Filter
		// (GET forms) and the raw/pretty toggle.
		buttons, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll("button"))
			.filter(b => !b.closest("form.logout") && !(b.form && b.form.method === "get") && b.type !== "button")
			.map(b => b.textContent.trim())`))
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		if len(buttons) > 0 {
			t.Errorf("%s offers a read session the actions %q", p.name, buttons)
		}
		if got := b.text("#read-only"); !strings.Contains(got, "read only") {
			t.Errorf("%s: header says %q, want read only", p.name, got)
		}
	}
}
