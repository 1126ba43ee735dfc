package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/anyhook/anyhook/inbox"
	"github.com/anyhook/anyhook/inbox/inboxsql"
	"github.com/anyhook/anyhook/inbox/inboxtest"
)

const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// api is a fake downstream API that dedupes by Idempotency-Key and can be
// told to fail.
type api struct {
	mu     sync.Mutex
	calls  int
	keys   map[string]bool
	status int // answer; 0 means 200
}

func newAPI(t *testing.T) (*api, string) {
	a := &api{keys: map[string]bool{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.calls++
		if a.status != 0 {
			w.WriteHeader(a.status)
			return
		}
		a.keys[r.Header.Get("Idempotency-Key")] = true
	}))
	t.Cleanup(srv.Close)
	return a, srv.URL
}

func (a *api) counts() (calls, effects int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls, len(a.keys)
}

func (a *api) fail(status int) {
	a.mu.Lock()
	a.status = status
	a.mu.Unlock()
}

type harness struct {
	t        *testing.T
	url      string
	dbPath   string
	payments *api
	email    *api
	attempts map[string]int
}

func start(t *testing.T) *harness { return startWith(t, nil) }

// startWith starts a receiver; configure, if not nil, can change its Main
// before it starts.
func startWith(t *testing.T, configure func(*Main)) *harness {
	t.Helper()
	payments, paymentsURL := newAPI(t)
	email, emailURL := newAPI(t)
	dbPath := filepath.Join(t.TempDir(), "receiver.db")
	m := &Main{
		Config: Config{Addr: "127.0.0.1:0", DB: dbPath, Secret: secret, PaymentsURL: paymentsURL, EmailURL: emailURL},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if configure != nil {
		configure(m)
	}
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Error(err)
		}
		if err := m.Stop(); err != nil { // idempotent
			t.Error(err)
		}
	})
	return &harness{t: t, url: "http://" + m.Addr() + "/webhooks", dbPath: dbPath, payments: payments, email: email, attempts: map[string]int{}}
}

// deliver posts body the way AnyHook's delivery worker does: the original
// body, X-AnyHook-* headers and a Standard Webhooks signature whose
// webhook-id is the event id.
func (h *harness) deliver(eventID, body string) int {
	h.t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		h.t.Fatal(err)
	}
	now := time.Now()
	sig, err := wh.Sign(eventID, now, []byte(body))
	if err != nil {
		h.t.Fatal(err)
	}
	h.attempts[eventID]++
	return h.post(body, map[string]string{
		"Content-Type":       "application/json",
		"X-AnyHook-Delivery": eventID,
		"X-AnyHook-Attempt":  strconv.Itoa(h.attempts[eventID]),
		"X-AnyHook-Replay":   "false",
		"X-AnyHook-Source":   "stripe",
		"webhook-id":         eventID,
		"webhook-timestamp":  strconv.FormatInt(now.Unix(), 10),
		"webhook-signature":  sig,
	})
}

func (h *harness) post(body string, headers map[string]string) int {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url, strings.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func (h *harness) db() *sql.DB {
	db, err := sql.Open("sqlite", "file:"+h.dbPath+"?_pragma=busy_timeout(5000)")
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { db.Close() })
	return db
}

func (h *harness) query(q string, args ...any) string {
	h.t.Helper()
	var s string
	if err := h.db().QueryRow(q, args...).Scan(&s); err != nil {
		h.t.Fatalf("%s: %v", q, err)
	}
	return s
}

func capture(pi string) string {
	return fmt.Sprintf(`{"type":"payment_intent.amount_capturable_updated","created":1,"data":{"object":{"id":%q}}}`, pi)
}

func invoicePaid(in string) string {
	return fmt.Sprintf(`{"type":"invoice.paid","created":1,"data":{"object":{"id":%q,"customer_email":"ada@example.com"}}}`, in)
}

func subscription(id, status string, created int64) string {
	return fmt.Sprintf(`{"type":"customer.subscription.updated","created":%d,"data":{"object":{"id":%q,"status":%q}}}`, created, id, status)
}

func TestReceiverRedeliveries(t *testing.T) {
	t.Parallel()
	h := start(t)
	events := []struct{ id, body string }{
		{"evt_capture", capture("pi_1")},
		{"evt_receipt", invoicePaid("in_1")},
		{"evt_sub", subscription("sub_1", "active", 100)},
		{"evt_other", `{"type":"charge.refunded","data":{"object":{"id":"ch_1"}}}`},
	}
	for round := range 3 { // first delivery, then two retries / replays of each
		for _, ev := range events {
			if code := h.deliver(ev.id, ev.body); code != 200 {
				t.Fatalf("round %d %s: %d; want 200", round, ev.id, code)
			}
		}
	}
	if calls, _ := h.payments.counts(); calls != 1 {
		t.Fatalf("payments API called %d times; want 1", calls)
	}
	if calls, _ := h.email.counts(); calls != 1 {
		t.Fatalf("email API called %d times; want 1", calls)
	}
	if got := h.query(`SELECT status FROM subscriptions WHERE id = 'sub_1'`); got != "active" {
		t.Fatalf("subscription %s; want active", got)
	}
	if got := h.query(`SELECT count(*) FROM captures`) + h.query(`SELECT count(*) FROM receipts`); got != "11" {
		t.Fatalf("captures and receipts %s; want one each", got)
	}
}

func TestReceiverSubscriptionOrder(t *testing.T) {
	t.Parallel()
	h := start(t)
	// Stripe sends these in any order; the newer one must win.
	for _, d := range []struct {
		id, status string
		created    int64
		code       int
	}{
		{"evt_1", "active", 100, 200},
		{"evt_3", "canceled", 300, 200},
		{"evt_2", "past_due", 200, 200}, // late: ignored
		{"evt_4", "active", 400, 200},   // illegal canceled -> active: recorded, acknowledged
	} {
		if code := h.deliver(d.id, subscription("sub_1", d.status, d.created)); code != d.code {
			t.Fatalf("%s: %d; want %d", d.id, code, d.code)
		}
	}
	if got := h.query(`SELECT status FROM subscriptions WHERE id = 'sub_1'`); got != "canceled" {
		t.Fatalf("subscription %s; want canceled", got)
	}
	if got := h.query(`SELECT status FROM inbox_events WHERE event_id = 'evt_4'`); got != "failed" {
		t.Fatalf("illegal transition recorded as %q; want failed", got)
	}
}

func TestReceiverRejectsBadSignature(t *testing.T) {
	t.Parallel()
	h := start(t)
	code := h.post(capture("pi_1"), map[string]string{
		"X-AnyHook-Delivery": "evt_1", "webhook-id": "evt_1",
		"webhook-timestamp": strconv.FormatInt(time.Now().Unix(), 10),
		"webhook-signature": "v1,Zm9yZ2Vk",
	})
	if code != 400 {
		t.Fatalf("bad signature: %d; want 400", code)
	}
	if calls, _ := h.payments.counts(); calls != 0 {
		t.Fatal("payments API called for a forged request")
	}
	if got := h.query(`SELECT count(*) FROM inbox_events`); got != "0" {
		t.Fatalf("%s inbox rows; want 0", got)
	}
}

// The payments API times out (5xx): the capture is uncertain, so the receiver
// answers 503 and AnyHook retries; retries never capture again on their
// own, and once the claim is stale it is held for a person.
func TestReceiverUncertainCaptureIsHeld(t *testing.T) {
	t.Parallel()
	h := start(t)
	h.payments.fail(http.StatusBadGateway)
	if code := h.deliver("evt_1", capture("pi_1")); code != 503 {
		t.Fatalf("uncertain capture: %d; want 503", code)
	}
	h.payments.fail(0)
	if code := h.deliver("evt_1", capture("pi_1")); code != 503 {
		t.Fatalf("retry while claimed: %d; want 503", code)
	}
	db := h.db()
	drv := inboxsql.New(db, inboxsql.SQLite)
	ctx := context.Background()
	if err := inboxtest.AgeClaim(ctx, drv, "stripe", "capture", "evt_1", time.Hour); err != nil {
		t.Fatal(err)
	}
	if code := h.deliver("evt_1", capture("pi_1")); code != 503 {
		t.Fatalf("stale claim: %d; want 503 (held)", code)
	}
	if calls, _ := h.payments.counts(); calls != 1 {
		t.Fatalf("payments API called %d times; want 1", calls)
	}
	ib, err := inbox.New(drv, inbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	held, err := ib.Held(ctx)
	if err != nil || len(held) != 1 || held[0].Handler != "capture" {
		t.Fatalf("held claims %+v, %v", held, err)
	}
	// The operator checks the payments dashboard: not captured. Re-run.
	if err := ib.Resolve(ctx, "stripe", "capture", "evt_1", inbox.Rerun); err != nil {
		t.Fatal(err)
	}
	if code := h.deliver("evt_1", capture("pi_1")); code != 200 {
		t.Fatalf("after Rerun: %d; want 200", code)
	}
	if calls, effects := h.payments.counts(); calls != 2 || effects != 1 {
		t.Fatalf("payments API: %d calls, %d captures; want 2, 1", calls, effects)
	}
}

func TestRunFlags(t *testing.T) {
	t.Parallel()
	err := run(context.Background(), []string{"-db", filepath.Join(t.TempDir(), "x.db")}, func(string) string { return secret }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "required") {
		t.Fatalf("run without API URLs: %v", err)
	}
	err = run(context.Background(), []string{"-payments-url", "http://p", "-email-url", "http://e"}, func(string) string { return "" }, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "RECEIVER_SIGNING_SECRET") {
		t.Fatalf("run without a secret: %v", err)
	}
}
