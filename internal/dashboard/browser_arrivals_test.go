package dashboard_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// arrivalsGateway runs a gateway for the arrivals browser test: a stripe
// source whose second secret signs (a rotation), an unsigned generic
// source, and a destination that takes everything.
func arrivalsGateway(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	billing := newRecorder(t, 200)
	base, _ := gatewaytest.Start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:%s
admin_token: %s
delivery: {poll_interval: 50ms}
sources:
  stripe:
    provider: stripe
    secrets: [whsec_retired, %s]
  hooks:
    provider: generic
    signature: none
  orders:
    provider: generic
    signature: none
    id: json:id
destinations:
  billing:
    url: %s/hooks
    sources: [stripe, hooks, orders]
`, filepath.Join(dir, "anyhook.db"), browserToken, browserSecret, billing.URL), gateway.Options{})
	return base
}

// sendStripeWith signs body with the browser test's secret and sends it
// with the extra headers; it returns the answer's event id.
func sendStripeWith(t *testing.T, base string, body []byte, extra http.Header) string {
	t.Helper()
	pr := &provider.Request{Method: "POST", URL: base + "/webhooks/stripe", Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
	for k, v := range extra {
		pr.Header[k] = v
	}
	if err := provider.Sign("stripe", browserSecret, pr, time.Now()); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", pr.URL, bytes.NewReader(body))
	req.Header = pr.Header
	return answerID(t, req, http.StatusOK)
}

// TestBrowserArrivals opens, in a real chromium, an event that arrived
// three times: the page says how it was verified (the second secret, by
// index), where it came from, and lists each arrival with the headers
// that differed. An unsigned source's event says it is unsigned instead of
// "verified". Refused requests are on their own page, reached from the
// navigation and from a source on the overview.
func TestBrowserArrivals(t *testing.T) {
	needChromium(t)
	base := arrivalsGateway(t)
	body := []byte(`{"id":"evt_arrivals","object":"event","type":"invoice.paid","created":1700000000,"data":{"object":{"id":"in_1"}}}`)
	id := sendStripeWith(t, base, body, http.Header{"X-Delivery-Attempt": {"1"}})
	for _, n := range []string{"2", "3"} { // the provider's retries
		if again := sendStripeWith(t, base, body, http.Header{"X-Delivery-Attempt": {n}}); again != id {
			t.Fatalf("retry answered %s, want %s", again, id)
		}
	}
	req, _ := http.NewRequest("POST", base+"/webhooks/hooks", strings.NewReader(`{"order":1}`))
	unsigned := answerID(t, req, http.StatusOK)

	bctx := startChromium(t)
	login(t, bctx, base)
	text := browser{t, bctx}.text
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/events/"+id), chromedp.WaitVisible(chromedp.CSS("#arrivals"))); err != nil {
		t.Fatal(err)
	}
	shot(t, bctx, "event-arrivals")
	if v := text("#verification"); !strings.Contains(v, "verified") || !strings.Contains(v, "stripe v1 signature with secrets[1]") || !strings.Contains(v, "rotation") {
		t.Errorf("verification: %q", v)
	}
	if from := text("#remote-addr"); !strings.HasPrefix(from, "127.0.0.1:") {
		t.Errorf("from: %q", from)
	}
	if s := text("#arrivals-summary"); !strings.Contains(s, "arrived 3 times") || !strings.Contains(s, "2 duplicates") {
		t.Errorf("arrivals summary: %q", s)
	}
	rows, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#arrivals tbody tr")].map(r => r.innerText)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 3 || !strings.Contains(rows[0], "the original request") ||
		!strings.Contains(rows[1], "X-Delivery-Attempt: 1 → 2") || !strings.Contains(rows[2], "X-Delivery-Attempt: 1 → 3") ||
		!strings.Contains(rows[1], "127.0.0.1:") {
		t.Errorf("arrival rows: %q", rows)
	}

	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/events/"+unsigned), chromedp.WaitVisible(chromedp.CSS("#verification"))); err != nil {
		t.Fatal(err)
	}
	if v := text("#verification"); !strings.Contains(v, "unsigned (signature: none)") || strings.Contains(v, "verified") {
		t.Errorf("unsigned verification: %q", v)
	}
	if s := text("#arrivals-summary"); !strings.Contains(s, "arrived once") {
		t.Errorf("unsigned arrivals summary: %q", s)
	}

	// A known id with another body is a duplicate, answered as one, but
	// the page says the payload differed and which it was.
	post := func(body string) *http.Request {
		req, _ := http.NewRequest("POST", base+"/webhooks/orders", strings.NewReader(body))
		return req
	}
	order := answerID(t, post(`{"id":"ord_7","total":10}`), http.StatusOK)
	if again := answerID(t, post(`{"id":"ord_7","total":99}`), http.StatusOK); again != order {
		t.Fatalf("a known id with another body answered %s, want the duplicate of %s", again, order)
	}
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/events/"+order), chromedp.WaitVisible(chromedp.CSS("#arrivals"))); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(`{"id":"ord_7","total":99}`))
	if row := text(`tr[data-arrival="2"]`); !strings.Contains(row, "this arrival's body differed: sha256 "+hex.EncodeToString(sum[:])) {
		t.Errorf("the differing arrival: %q", row)
	}
	if s := text("#arrivals-summary"); !strings.Contains(s, "1 duplicate carried a different body") {
		t.Errorf("arrivals summary of a conflict: %q", s)
	}

	// Refused requests: a forged Stripe request and a typo in the URL.
	forged, _ := http.NewRequest("POST", base+"/webhooks/stripe", strings.NewReader(`{"id":"evt_forged"}`))
	forged.Header.Set("Stripe-Signature", "t=1,v1=00")
	answerID(t, forged, http.StatusBadRequest)
	typo, _ := http.NewRequest("POST", base+"/webhooks/strpe", strings.NewReader(`{}`))
	answerID(t, typo, http.StatusNotFound)
	waitRejections(t, base, 2)

	// From the overview, the source leads to its refused requests.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("table#destinations")),
		chromedp.Click(chromedp.CSS(`table#destinations a[href="/rejections?source=stripe"]`)),
		chromedp.WaitVisible(chromedp.CSS("table#rejections"))); err != nil {
		t.Fatal(err)
	}
	shot(t, bctx, "rejections-stripe")
	rows, err = chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#rejections tbody tr")].map(r => r.innerText)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || !strings.Contains(rows[0], "rejected_signature") || !strings.Contains(rows[0], "400 no signature matched") ||
		!strings.Contains(rows[0], "sha256 ") {
		t.Errorf("stripe's refused requests: %q", rows)
	}
	// The navigation lists them all.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`nav a[href="/rejections"]`)), chromedp.WaitVisible(chromedp.CSS(`tr[data-reason="unknown_source"]`))); err != nil {
		t.Fatal(err)
	}
	if row := text(`tr[data-reason="unknown_source"]`); !strings.Contains(row, "strpe") || !strings.Contains(row, "unknown") || !strings.Contains(row, "not read") ||
		!strings.Contains(row, "did you mean stripe?") {
		t.Errorf("unknown source row: %q", row)
	}

	// "Why didn't evt_forged arrive?": the event search finds nothing and
	// points at the refused request, which keeps the body's id and the
	// signature's timestamp, never the signature.
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/events?q=evt_forged"), chromedp.WaitVisible(chromedp.CSS("#refused-hint"))); err != nil {
		t.Fatal(err)
	}
	if hint := text("#refused-hint"); !strings.Contains(hint, "1 refused request matches evt_forged") {
		t.Errorf("hint: %q", hint)
	}
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#refused-hint")), chromedp.WaitVisible(chromedp.CSS("table#rejections"))); err != nil {
		t.Fatal(err)
	}
	rows, err = chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#rejections tbody tr")].map(r => r.innerText)`))
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || !strings.Contains(rows[0], "body id evt_forged") || !strings.Contains(rows[0], "Stripe-Signature t 1") || strings.Contains(rows[0], "v1") {
		t.Errorf("refused requests matching evt_forged: %q", rows)
	}
}

// waitRejections polls the admin API until it lists n refused requests
// (the rejection log is written behind ingest's back).
func waitRejections(t *testing.T, base string, n int) {
	t.Helper()
	testwait.Value(t, fmt.Sprintf("%d refused requests listed", n), func() (struct{}, error) {
		req, _ := http.NewRequest("GET", base+"/api/rejections", nil)
		req.Header.Set("Authorization", "Bearer "+browserToken)
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		var list struct{ Items []any }
		json.NewDecoder(resp.Body).Decode(&list)
		resp.Body.Close()
		if len(list.Items) < n {
			return struct{}{}, fmt.Errorf("the API lists %d", len(list.Items))
		}
		return struct{}{}, nil
	})
}

// shot saves a screenshot of the page as NAME.png in $ANYHOOK_SHOTS_DIR,
// when set (pictures for people reviewing the pages).
func shot(t *testing.T, bctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("ANYHOOK_SHOTS_DIR")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
}

// login logs the browser in with the browser test's token.
func login(t *testing.T, bctx context.Context, base string) {
	t.Helper()
	if err := chromedp.Do(bctx, chromedp.Navigate(base+"/login"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), browserToken), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("nav"))); err != nil {
		t.Fatalf("log in: %v", err)
	}
}

// answerID sends req and returns the id of its JSON answer, which must
// have status want.
func answerID(t *testing.T, req *http.Request, want int) string {
	t.Helper()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, raw)
	}
	var a struct{ ID string }
	json.Unmarshal(raw, &a)
	return a.ID
}
