package dashboard_test

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
)

// TestBrowserIncidents: a destination refuses connections; the landing
// page leads with its open incident, at 1280 px and on a 390 px phone
// (as cards, nothing off to the side). The incident page links the
// events it affected; a person acknowledges it with a note and then
// resolves it, each through the page's form, and the API shows who did.
func TestBrowserIncidents(t *testing.T) {
	needChromium(t)
	hold, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := hold.Addr().String()
	hold.Close()
	base, _ := gatewaytest.Start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:%s/anyhook.db
admin_token: %s
delivery: {poll_interval: 50ms, grace: 1s}
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  billing-with-a-rather-long-destination-name: {url: http://%s/hooks, sources: [stripe], timeout: 5s, max_attempts: 1}
`, t.TempDir(), browserToken, browserSecret, closed), gateway.Options{IncidentInterval: 20 * time.Millisecond})
	var ids []string
	for i := range 2 {
		ids = append(ids, sendStripe(t, base, fmt.Appendf(nil, `{"id":"evt_incident_%d","object":"event","type":"invoice.paid","created":%d,"data":{"object":{"id":"in_%d"}}}`, i, 1700000000+i, i)))
	}
	inc := waitAPI(t, base, "/api/incidents?state=open", func(items []map[string]any) bool { return len(items) == 1 && items[0]["events"] == 2.0 })[0]
	id := inc["id"].(string)

	bctx := startChromium(t)
	do := browser{t, bctx}.do
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Evaluate[string](`document.querySelector(`+fmt.Sprintf("%q", sel)+`).innerText`))
		if err != nil {
			t.Fatalf("%s: %v", sel, err)
		}
		return s
	}
	fits := func(page string, width int) {
		t.Helper()
		w, err := chromedp.Run(bctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`))
		if err != nil {
			t.Fatalf("%s: %v", page, err)
		}
		if w[0] > width {
			t.Errorf("%s at %d px: the page is %d px wide; want no sideways scroll", page, width, w[0])
		}
	}

	do("a 1280 px screen", chromedp.EmulateViewport(1280, 900))
	do("log in", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), browserToken), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("#open-incidents table")))
	if s := text("#open-incidents"); !strings.Contains(s, "1 incident unresolved") || !strings.Contains(s, "refusing connections") {
		t.Errorf("the landing page's top: %q; want the open incident", s)
	}
	fits("overview", 1280)
	do("open the incident", chromedp.Click(chromedp.CSS("#open-incidents a[href='/incidents/"+id+"']")), chromedp.WaitVisible(chromedp.CSS("#summary")))
	if s := text("#summary"); !strings.Contains(s, "2 events affected") || !strings.Contains(s, "2 failed attempts") {
		t.Errorf("summary %q", s)
	}
	links, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#sample a")].map(a => a.getAttribute("href"))`))
	// In the order their attempts failed: the two deliveries run at once,
	// so either may come first.
	if err != nil || len(links) != 2 || !slices.Contains(links, "/events/"+ids[0]) || !slices.Contains(links, "/events/"+ids[1]) {
		t.Fatalf("sample links %v (%v); want the two events %v", links, err, ids)
	}
	do("follow a sample event", chromedp.Click(chromedp.CSS("#sample a")), chromedp.WaitVisible(chromedp.CSS("#event-id")))
	do("back", chromedp.Navigate(base+"/incidents/"+id), chromedp.WaitVisible(chromedp.CSS("#acknowledge")))
	do("acknowledge", chromedp.SendKeys(chromedp.CSS("#acknowledge input[name=note]"), "billing team paged"),
		chromedp.Click(chromedp.CSS("#acknowledge button")), chromedp.WaitVisible(chromedp.CSS(".flash-ok")))
	if s := text("#state"); s != "acknowledged" {
		t.Errorf("state after acknowledge: %q", s)
	}
	if s := text("#note"); s != "billing team paged" {
		t.Errorf("note %q", s)
	}

	// The phone: the list is cards, the incident page fits.
	do("a 390 px phone", chromedp.EmulateViewport(390, 844))
	for _, p := range []struct{ name, path, wait string }{
		{"overview", "/", "#open-incidents table"},
		{"incidents", "/incidents", "#incidents table"},
		{"incident", "/incidents/" + id, "#summary"},
	} {
		do(p.name, chromedp.Navigate(base+p.path), chromedp.WaitVisible(chromedp.CSS(p.wait)))
		fits(p.name, 390)
	}
	do("incidents", chromedp.Navigate(base+"/incidents"), chromedp.WaitVisible(chromedp.CSS("#incidents table")))
	disp, err := chromedp.Run(bctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector("#incidents tbody tr")).display`))
	if err != nil || disp != "flex" {
		t.Errorf("an incident row on the phone: display %q (%v); want a card (flex)", disp, err)
	}
	do("resolve on the phone", chromedp.Navigate(base+"/incidents/"+id), chromedp.WaitVisible(chromedp.CSS("#resolve")),
		chromedp.SendKeys(chromedp.CSS("#resolve input[name=note]"), "firewall rule fixed"),
		chromedp.Click(chromedp.CSS("#resolve button")), chromedp.WaitVisible(chromedp.CSS(".flash-ok")))
	if s := text("#state"); s != "resolved" {
		t.Errorf("state after resolve: %q", s)
	}
	got := waitAPI(t, base, "/api/incidents/"+id, func(m map[string]any) bool { return m["state"] == "resolved" })
	if by, _ := got["resolved_by"].(string); !strings.HasPrefix(by, "admin (dashboard session ") || got["acknowledged_by"] != by || got["note"] != "firewall rule fixed" {
		t.Errorf("resolved: %v; want the token and its dashboard session as the actor of both actions", got)
	}
	// Nothing is open: the landing page no longer leads with incidents.
	do("overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("table#destinations")))
	if n, _ := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#open-incidents").length`)); n != 0 {
		t.Errorf("the overview still shows open incidents")
	}
}
