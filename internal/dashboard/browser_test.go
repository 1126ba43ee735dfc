package dashboard_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "write the browser test's screenshot of the event list to docs/dashboard.png")

const chromiumPath = "/usr/bin/chromium"

// needChromium makes sure Debian's chromium is installed, installing it
// with scripts/chromium.sh if need be. Locally a machine that cannot
// install it skips the test; under CI=true it fails instead.
func needChromium(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(chromiumPath); err == nil {
		return
	}
	out, err := exec.Command("../../scripts/chromium.sh").CombinedOutput()
	if _, serr := os.Stat(chromiumPath); err == nil && serr == nil {
		return
	}
	msg := fmt.Sprintf("the browser test needs %s and scripts/chromium.sh could not install it: %v\n%s", chromiumPath, err, out)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// recorder is a destination (sinktest.Sink) that answers with code.
type recorder struct{ *sinktest.Sink }

func newRecorder(t *testing.T, code int) *recorder {
	return &recorder{sinktest.Start(t, sinktest.Options{
		Answer: func(*http.Request, []byte) int { return code },
		Reply:  func(code int) string { return fmt.Sprintf(`{"ok":%v}`, code < 300) },
	})}
}

// replays counts the replays the recorder received.
func (rc *recorder) replays() int {
	n := 0
	for _, r := range rc.Requests() {
		if r.Header.Get("X-AnyHook-Replay") == "true" {
			n++
		}
	}
	return n
}

const (
	browserToken  = "browser-test-token"
	browserSecret = "whsec_browser"
)

// TestBrowser drives the dashboard in a real headless chromium: log in,
// find an event by its provider id, open it, replay it, resolve a held
// delivery, and check each result through the JSON API.
func TestBrowser(t *testing.T) {
	needChromium(t)
	ctx := context.Background()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "anyhook.db")

	// A delivery held after a crash (SPEC §6), made before the gateway
	// starts: claimed, lease expired, and the destination says hold.
	st, err := sqlite.Open(ctx, dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	heldEvent := store.NewID()
	body := []byte(`{"id":"evt_charge_held","object":"event","type":"charge.captured","created":1700000000,"data":{"object":{"id":"ch_1","amount":2500}}}`)
	if _, err := st.Ingest(ctx, []store.NewEvent{{Event: anyhook.Event{ID: heldEvent, Source: "stripe", DedupKey: "evt_charge_held",
		ReceivedAt: time.Now().Add(-20 * time.Minute), Method: "POST", Path: "/webhooks/stripe",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: body}, Destinations: []string{"vault"}}}); err != nil {
		t.Fatal(err)
	}
	cs, err := st.Claim(ctx, "vault", 1, -time.Second)
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim: %v %d", err, len(cs))
	}
	if _, err := st.Rescue(ctx, func(string) (store.StaleRule, bool) { return store.StaleRule{Policy: anyhook.Hold}, true }); err != nil {
		t.Fatal(err)
	}
	heldDelivery := cs[0].Delivery.ID
	st.Close()

	billing, flaky, vault := newRecorder(t, 200), newRecorder(t, 503), newRecorder(t, 200)
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:%s
admin_token: %s
delivery: {poll_interval: 50ms, grace: 1s}
sources:
  stripe:
    provider: stripe
    secrets: [%s]
destinations:
  billing:
    url: %s/hooks
    sources: [stripe]
    timeout: 5s
  ledger-sync:
    url: %s/hooks
    sources: [stripe]
    timeout: 5s
    max_attempts: 1
  vault:
    url: %s/hooks
    sources: [stripe]
    timeout: 5s
    on_stale_claim: hold
`, dbPath, browserToken, browserSecret, billing.URL, flaky.URL, vault.URL)
	base, _ := gatewaytest.Start(t, yaml, gateway.Options{})

	// Traffic: a dozen events, and one sent twice.
	types := []string{"payment_intent.succeeded", "invoice.paid", "customer.created", "charge.refunded", "invoice.payment_failed", "checkout.session.completed"}
	var target string
	for i := range 12 {
		id := fmt.Sprintf("evt_1Q%04dBrowser", i)
		ev := fmt.Sprintf(`{"id":%q,"object":"event","type":%q,"created":%d,"data":{"object":{"id":"pi_%d","amount":%d,"currency":"eur"}}}`,
			id, types[i%len(types)], 1700000000+i, i, 1000+i*250)
		res := sendStripe(t, base, []byte(ev))
		if i == 7 {
			target = res
			sendStripe(t, base, []byte(ev)) // a provider retry: absorbed as a duplicate
		}
	}
	waitAPI(t, base, "/api/deliveries?status=dead&destination=ledger-sync", func(items []map[string]any) bool { return len(items) == 12 })

	bctx := startChromium(t)
	b := browser{t, bctx}
	do, text := b.do, b.text

	// Log in: the events page sends us to the login form and back.
	do("open the events page", chromedp.Navigate(base+"/events"), chromedp.WaitVisible(chromedp.CSS("#token")))
	do("log in",
		chromedp.SendKeys(chromedp.CSS("#token"), browserToken),
		chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("table#events")))
	loc, _ := chromedp.Run(bctx, chromedp.Location())
	if !strings.HasSuffix(loc, "/events") {
		t.Fatalf("after login at %s, want /events", loc)
	}

	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Fatal("screenshot is not a PNG")
	}
	shot := filepath.Join(t.TempDir(), "dashboard.png")
	if *updateScreenshot {
		shot = "../../docs/dashboard.png"
	}
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot of the event list: %s (%d bytes)", shot, len(png))

	// Find the event by its provider id: the one match opens its page.
	do("search", chromedp.SendKeys(chromedp.CSS(`input[name="q"]`), "evt_1Q0007Browser"),
		chromedp.Submit(chromedp.CSS(`input[name="q"]`)))
	// The list page has no #event-id: wait for the event page.
	do("the search opens the event", chromedp.WaitVisible(chromedp.CSS("#event-id")))
	if loc, _ := chromedp.Run(bctx, chromedp.Location()); !strings.HasSuffix(loc, "/events/"+target) {
		t.Fatalf("the search landed at %s, want /events/%s", loc, target)
	}
	if got := text("#event-id"); got != target {
		t.Fatalf("event page shows %q, want %s", got, target)
	}
	if facts := text("dl.facts"); !strings.Contains(facts, "evt_1Q0007Browser") || !strings.Contains(facts, "sent this event 1 more time") {
		t.Fatalf("event facts: %s", facts)
	}
	if typ := text("#event-type"); typ != "invoice.paid" {
		t.Fatalf("event type shown %q, want invoice.paid", typ)
	}
	if body := text("#body-pretty"); !strings.Contains(body, `"amount": 2750`) {
		t.Fatalf("pretty body: %s", body)
	}
	do("toggle raw", chromedp.Click(chromedp.CSS("#toggle-raw")), chromedp.WaitVisible(chromedp.CSS("#body-raw")))

	// Replay it to every destination (confirming the dialog).
	if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`(window.confirm = function () { return true; }, true)`)); err != nil {
		t.Fatal(err)
	}
	do("replay", chromedp.Click(chromedp.CSS("#replay-all")), chromedp.WaitVisible(chromedp.CSS(".flash-ok")))
	if msg := text(".flash-ok"); !strings.Contains(msg, "Replay queued to billing, ledger-sync, vault") {
		t.Fatalf("after replay: %q", msg)
	}
	ev := waitAPI(t, base, "/api/events/"+target, func(ev map[string]any) bool {
		for _, d := range ev["deliveries"].([]any) {
			d := d.(map[string]any)
			if d["replay"] == true && d["destination"] == "billing" && d["status"] == "delivered" {
				return true
			}
		}
		return false
	})
	replays := 0
	for _, d := range ev["deliveries"].([]any) {
		if d.(map[string]any)["replay"] == true {
			replays++
		}
	}
	if replays != 3 || billing.replays() != 1 {
		t.Fatalf("replay deliveries %d (want 3), billing saw %d replays (want 1)", replays, billing.replays())
	}

	// Resolve the held delivery from the held queue.
	do("held queue", chromedp.Click(chromedp.CSS(`nav a[href="/deliveries?status=held"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-delivery="`+heldDelivery+`"]`)))
	do("mark delivered", chromedp.Click(chromedp.CSS(`tr[data-delivery="`+heldDelivery+`"] button[data-row-action="mark_delivered"]`)),
		chromedp.WaitVisible(chromedp.CSS(".flash-ok")))
	if msg := text(".flash-ok"); !strings.Contains(msg, "marked delivered") {
		t.Fatalf("after resolve: %q", msg)
	}
	held := waitAPI(t, base, "/api/events/"+heldEvent, func(ev map[string]any) bool { return true })
	d := held["deliveries"].([]any)[0].(map[string]any)
	if d["status"] != "delivered" || !strings.Contains(fmt.Sprint(d["note"]), "marked delivered by admin (dashboard session ") {
		t.Fatalf("held delivery after resolve: %v", d)
	}
	if vault.replays() != 1 {
		t.Fatalf("vault saw %d replays; marking delivered must not send", vault.replays())
	}

	// The overview shows the failing destination.
	do("overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("table#destinations")))
	if dir := os.Getenv("ANYHOOK_SHOTS_DIR"); dir != "" { // more pictures, for people reviewing the pages
		for name, path := range map[string]string{"overview": "/", "event": "/events/" + target, "dead": "/deliveries?status=dead", "destinations": "/destinations"} {
			do("open "+path, chromedp.Navigate(base+path), chromedp.WaitVisible(chromedp.CSS("main")))
			png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
		}
		do("overview", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("table#destinations")))
	}
	if dests := text("table#destinations"); !strings.Contains(dests, "failing") || !strings.Contains(dests, "HTTP 503") {
		t.Fatalf("overview destinations: %s", dests)
	}

	// The login's next never leads off-site, however the browser reads it
	// (logged in, the login page redirects at once).
	for _, next := range []string{`/./\evil.example/phish`, `/\evil.example`, "//evil.example", "/%5Cevil.example"} {
		do("login with next="+next, chromedp.Navigate(base+"/login?next="+url.QueryEscape(next)), chromedp.WaitVisible(chromedp.CSS("main")))
		if loc, err := chromedp.Run(bctx, chromedp.Location()); err != nil || loc != base+"/" {
			t.Errorf("login with next=%s took the browser to %q (%v), want %s/", next, loc, err, base)
		}
	}
}

// TestBrowserRebinding drives a DNS rebinding attack on a gateway without
// an admin token: chromium resolves rebind.attacker.example to 127.0.0.1,
// as the attacker's DNS would after the victim loaded the attacker's page,
// so the page is same-origin with the gateway. It may neither read the API
// nor act, while localhost and 127.0.0.1 keep working.
func TestBrowserRebinding(t *testing.T) {
	needChromium(t)
	ctx := context.Background()
	dir := t.TempDir()
	cfg, err := config.Parse(filepath.Join(dir, "anyhook.yaml"), []byte(fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:%s
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  billing: {url: http://127.0.0.1:9/hooks, sources: [stripe]}
`, filepath.Join(dir, "anyhook.db"), browserSecret)), nil)
	if err != nil {
		t.Fatal(err)
	}
	g, err := gateway.New(ctx, gateway.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g.Start(ctx, ln)
	t.Cleanup(func() { g.Stop(context.Background()) })
	_, port, _ := net.SplitHostPort(ln.Addr().String())

	bctx := startChromium(t, chromedp.Flag("host-resolver-rules", "MAP rebind.attacker.example 127.0.0.1"))
	// fetch runs in the page's origin and reports the status and body.
	fetch := func(method, path string) string {
		t.Helper()
		js := fmt.Sprintf(`fetch(%q, {method: %q}).then(r => r.text().then(b => r.status + " " + b))`, path, method)
		got, err := chromedp.Run(bctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return got
	}
	for _, origin := range []string{"http://rebind.attacker.example:" + port, "http://localhost:" + port, "http://127.0.0.1:" + port} {
		rebinding := strings.Contains(origin, "attacker")
		if err := chromedp.Do(bctx, chromedp.Navigate(origin+"/")); err != nil {
			t.Fatalf("open %s: %v", origin, err)
		}
		page, _ := chromedp.Run(bctx, chromedp.Evaluate[string]("document.body.innerText"))
		if rebinding != strings.Contains(page, "no admin_token") {
			t.Errorf("%s/: page %q", origin, page)
		}
		for _, rq := range [][2]string{{"GET", "/api/events"}, {"POST", "/api/destinations/billing/pause"}, {"GET", "/metrics"}} {
			got := fetch(rq[0], rq[1])
			if rebinding && !strings.HasPrefix(got, "421 ") || !rebinding && !strings.HasPrefix(got, "200 ") {
				t.Errorf("from %s: %s %s answered %.200q", origin, rq[0], rq[1], got)
			}
		}
		if rebinding {
			if paused, _ := g.Store().Paused(ctx); paused["billing"] {
				t.Fatalf("the rebinding page paused billing")
			}
		}
	}
}

// browser is a chromium context of a test with the steps the browser
// tests take in it.
type browser struct {
	t   *testing.T
	ctx context.Context
}

// do runs steps, failing the test with what on an error.
func (b browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// text is the text of the element sel.
func (b browser) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("text of %s: %v", sel, err)
	}
	return s
}

// startChromium runs a headless chromium for the test, with opts on top
// of the defaults, and returns its context (with a hang guard).
func startChromium(t *testing.T, opts ...chromedp.ExecAllocatorOption) context.Context {
	t.Helper()
	needChromium(t)
	alloc, cancel := chromedp.NewExecAllocator(context.Background(), append([]chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1360, 900),
	}, opts...)...)
	t.Cleanup(cancel)
	bctx, cancel := chromedp.NewContext(alloc)
	t.Cleanup(cancel)
	bctx, cancel = context.WithTimeout(bctx, 2*time.Minute) // a hang guard, not a threshold
	t.Cleanup(cancel)
	return bctx
}

func sendStripe(t *testing.T, base string, body []byte) string {
	t.Helper()
	pr := &provider.Request{Method: "POST", URL: base + "/webhooks/stripe", Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
	if err := provider.Sign("stripe", browserSecret, pr, time.Now()); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", pr.URL, bytes.NewReader(body))
	req.Header = pr.Header
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil || resp.StatusCode != 200 {
		t.Fatalf("send: %d %v", resp.StatusCode, err)
	}
	return a.ID
}

// waitAPI polls an admin API GET until ok accepts its answer (an object,
// or the items of a list).
func waitAPI[T any](t *testing.T, base, path string, ok func(T) bool) T {
	t.Helper()
	return testwait.Value(t, "GET "+path+" to satisfy the condition", func() (T, error) {
		req, _ := http.NewRequest("GET", base+path, nil)
		req.Header.Set("Authorization", "Bearer "+browserToken)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %s", path, resp.StatusCode, raw)
		}
		var v T
		if strings.HasPrefix(path, "/api/deliveries") || strings.HasPrefix(path, "/api/events?") || strings.HasPrefix(path, "/api/incidents?") {
			var list struct{ Items T }
			err = json.Unmarshal(raw, &list)
			v = list.Items
		} else {
			err = json.Unmarshal(raw, &v)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !ok(v) {
			return v, fmt.Errorf("last answer: %s", raw)
		}
		return v, nil
	})
}
