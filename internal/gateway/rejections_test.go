package gateway_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

type apiRejection struct {
	Source      string
	KnownSource bool `json:"known_source"`
	Reason      string
	Status      int
	Message     string
	RemoteAddr  string `json:"remote_addr"`
	UserAgent   string `json:"user_agent"`
	BodySize    int64  `json:"body_size"`
	BodySHA256  string `json:"body_sha256"`
	HeaderCount int    `json:"header_count"`
}

// TestRejectionsThroughAPI: each way ingest refuses a request — a forged
// signature, a made-up source, a body over max_body, a source's rate
// limit — leaves a record that GET /api/rejections lists, filtered, with
// the answer the sender got and no body; the drop counter is exposed from
// the start.
func TestRejectionsThroughAPI(t *testing.T) {
	t.Parallel()
	sk := sinktest.New(t)
	base, _ := gatewaytest.Start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:anyhook.db
admin_token: test-token
sources:
  stripe:
    provider: stripe
    secrets: [%s]
    max_body: 1KiB
  limited:
    provider: generic
    signature: none
    rate_limit: {rps: 1, burst: 1}
destinations:
  billing:
    url: %s/hooks
    sources: [stripe, limited]
`, stripeSecret, sk.URL), gateway.Options{})

	forged := []byte(`{"id":"evt_forged","object":"event"}`)
	if a := do(t, stripeRequest(t, base+"/webhooks/stripe", "whsec_wrong", forged, time.Now())); a.Code != 400 {
		t.Fatalf("forged: %+v", a)
	}
	req, _ := http.NewRequest("POST", base+"/webhooks/strpe", strings.NewReader("typo"))
	if a := do(t, req); a.Code != 404 {
		t.Fatalf("unknown: %+v", a)
	}
	if a := do(t, stripeRequest(t, base+"/webhooks/stripe", stripeSecret, bytes.Repeat([]byte("x"), 2048), time.Now())); a.Code != 413 {
		t.Fatalf("too large: %+v", a)
	}
	for i, want := range []int{200, 429} { // a burst of one, then the limit
		req, _ := http.NewRequest("POST", base+"/webhooks/limited", strings.NewReader(fmt.Sprintf(`{"n":%d}`, i)))
		if a := do(t, req); a.Code != want {
			t.Fatalf("limited request %d: %+v, want %d", i, a, want)
		}
	}

	// The log is written behind ingest's back: wait for it.
	var list struct{ Items []apiRejection }
	testwait.Value(t, "4 rejections listed", func() (struct{}, error) {
		list.Items = nil
		gatewaytest.AdminJSON(t, base+"/api/rejections", &list)
		if len(list.Items) != 4 {
			return struct{}{}, fmt.Errorf("rejections = %+v", list.Items)
		}
		return struct{}{}, nil
	})
	by := map[string]apiRejection{}
	for _, r := range list.Items {
		by[r.Reason] = r
		if !strings.HasPrefix(r.RemoteAddr, "127.0.0.1:") || r.UserAgent != "Go-http-client/1.1" || r.HeaderCount == 0 {
			t.Errorf("record %+v", r)
		}
	}
	sum := sha256.Sum256(forged)
	if r := by["rejected_signature"]; r.Source != "stripe" || !r.KnownSource || r.Status != 400 || r.Message != "no signature matched" ||
		r.BodySize != int64(len(forged)) || r.BodySHA256 != hex.EncodeToString(sum[:]) {
		t.Errorf("forged: %+v", r)
	}
	if r := by["unknown_source"]; r.Source != "strpe" || r.KnownSource || r.Status != 404 || r.Message != `unknown source "strpe"` ||
		r.BodySize != 4 || r.BodySHA256 != "" {
		t.Errorf("unknown source: %+v", r)
	}
	if r := by["too_large"]; r.Source != "stripe" || r.Status != 413 || r.BodySize != 2048 || r.BodySHA256 != "" {
		t.Errorf("too large: %+v", r)
	}
	if r := by["rate_limited"]; r.Source != "limited" || !r.KnownSource || r.Status != 429 || r.BodySHA256 != "" {
		t.Errorf("rate limited: %+v", r)
	}
	gatewaytest.AdminJSON(t, base+"/api/rejections?source=stripe&reason=too_large", &list)
	if len(list.Items) != 1 || list.Items[0].Reason != "too_large" {
		t.Errorf("filtered: %+v", list.Items)
	}

	_, metrics := gatewaytest.Admin(t, "GET", base+"/metrics", "")
	for _, reason := range []string{"rate", "queue", "error"} {
		if line := `anyhook_rejections_dropped_total{reason="` + reason + `"} 0`; !strings.Contains(string(metrics), line) {
			t.Errorf("/metrics lacks %s", line)
		}
	}
}

// TestRejectionsFoundByID: "why didn't evt_badsig arrive?" An event
// search by the provider's id that finds nothing points at the refused
// requests, which GET /api/rejections?q= finds by that id; each record
// keeps the ids its provider allows (Stripe's t= and the body's id, never
// the v1 signature; GitHub's delivery headers), a stale timestamp's
// reason says by how much, and an unknown source's record names the
// closest configured one.
func TestRejectionsFoundByID(t *testing.T) {
	t.Parallel()
	e := setup(t, sinktest.New(t), "")
	stale := time.Now().Add(-7*time.Minute - 12*time.Second)
	badsig := []byte(`{"id":"evt_badsig","object":"event"}`)
	if a := do(t, stripeRequest(t, e.url+"/webhooks/stripe", "whsec_wrong", badsig, time.Now())); a.Code != 400 {
		t.Fatalf("forged: %+v", a)
	}
	old := []byte(`{"id":"evt_old","object":"event"}`)
	// The gateway's clock is the real one: the excess is 7m12s and the
	// time the request took.
	staleReason := regexp.MustCompile(`^timestamp outside tolerance: 7m1[23]s old, 5m0s allowed$`)
	if a := do(t, stripeRequest(t, e.url+"/webhooks/stripe", stripeSecret, old, stale)); a.Code != 400 || !staleReason.MatchString(a.Error) {
		t.Fatalf("stale: %+v", a)
	}
	typo, _ := http.NewRequest("POST", e.url+"/webhooks/strpe", strings.NewReader(`{"id":"evt_typo"}`))
	if a := do(t, typo); a.Code != 404 || a.Error != `unknown source "strpe"` {
		t.Fatalf("typo: %+v", a)
	}
	var list struct {
		Items []struct {
			apiRejection
			IDs        map[string]string
			DidYouMean string `json:"did_you_mean"`
		}
	}
	testwait.Value(t, "3 rejections listed", func() (struct{}, error) {
		list.Items = nil
		gatewaytest.AdminJSON(t, e.url+"/api/rejections", &list)
		if len(list.Items) != 3 {
			return struct{}{}, fmt.Errorf("rejections = %+v", list.Items)
		}
		return struct{}{}, nil
	})
	// Each answer decoded afresh: json would merge into the maps of the last.
	list.Items = nil
	gatewaytest.AdminJSON(t, e.url+"/api/rejections?q=evt_badsig", &list)
	if len(list.Items) != 1 {
		t.Fatalf("q=evt_badsig: %+v", list.Items)
	}
	r := list.Items[0]
	if r.Reason != "rejected_signature" || r.IDs["body id"] != "evt_badsig" || r.IDs["Stripe-Signature t"] == "" || len(r.IDs) != 2 {
		t.Errorf("the forged request's record: %+v", r)
	}
	for _, v := range r.IDs {
		if strings.Contains(v, "v1=") {
			t.Errorf("a signature kept: %q", v)
		}
	}
	list.Items = nil
	gatewaytest.AdminJSON(t, e.url+"/api/rejections?q=evt_old", &list)
	if len(list.Items) != 1 || !staleReason.MatchString(list.Items[0].Message) {
		t.Errorf("q=evt_old: %+v", list.Items)
	}
	list.Items = nil
	gatewaytest.AdminJSON(t, e.url+"/api/rejections?q=strpe", &list)
	if len(list.Items) != 1 || list.Items[0].DidYouMean != "stripe" || len(list.Items[0].IDs) != 0 {
		t.Errorf("q=strpe: %+v", list.Items)
	}

	// The event search that finds nothing says where to look.
	var events struct {
		Items      []any
		Rejections int
	}
	gatewaytest.AdminJSON(t, e.url+"/api/events?q=evt_badsig", &events)
	if len(events.Items) != 0 || events.Rejections != 1 {
		t.Errorf("events?q=evt_badsig: %+v, want no event and 1 refused request", events)
	}
	events.Rejections = 0
	gatewaytest.AdminJSON(t, e.url+"/api/events?q=evt_never", &events)
	if events.Rejections != 0 {
		t.Errorf("events?q=evt_never: %+v", events)
	}
	// An id that reached an event is found there, with no hint.
	if a := e.sendStripe(t, "evt_fine"); a.Code != 200 {
		t.Fatalf("genuine: %+v", a)
	}
	_, body := gatewaytest.Admin(t, "GET", e.url+"/api/events?q=evt_fine", "")
	if strings.Contains(string(body), `"rejections"`) {
		t.Errorf("a search that found its event carries a hint: %s", body)
	}
}
