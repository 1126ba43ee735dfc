package inbox_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook/inbox"
	"github.com/anyhook/anyhook/inbox/inboxtest"
)

func TestOutcomeHTTPStatus(t *testing.T) {
	t.Parallel()
	want := map[inbox.Outcome]int{
		0: 503, inbox.Processed: 200, inbox.Duplicate: 200, inbox.Failed: 200,
		inbox.InFlight: 503, inbox.Held: 503, inbox.Released: 503, inbox.Uncertain: 503,
		inbox.Conflict: 422,
	}
	for o, code := range want {
		if got := o.HTTPStatus(); got != code {
			t.Errorf("%v.HTTPStatus() = %d; want %d", o, got, code)
		}
	}
}

// testLogger sends log records to t.Log.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, nil))
}

type tWriter struct{ t *testing.T }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (suite[TTx]) Handler(t *testing.T, e *env[TTx]) {
	ib := e.inbox(inbox.Config{InFlightWait: time.Millisecond})
	v, err := inbox.NewStandardWebhooks(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	h, err := inbox.NewHandler(inbox.HandlerConfig{
		Verifier: v,
		MaxBody:  1024,
		Logger:   testLogger(t),
		Handle: func(ctx context.Context, d inbox.Delivery) (inbox.Outcome, error) {
			calls.Add(1)
			return ib.Apply(ctx, "orders", d.Event, func(ctx context.Context, tx TTx) error {
				return e.write(ctx, tx, d.Event.ID, string(d.Event.Body))
			})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	post := func(body string, hdr http.Header) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
		req.Header = hdr
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	now := time.Now()
	body := `{"id":"evt_1"}`

	// Bad signature: 400, nothing written, handler not called.
	bad := signed(t, testSecret, "evt_1", now, []byte(body))
	bad.Set("webhook-signature", "v1,"+strings.Repeat("A", 44))
	if resp := post(body, bad); resp.StatusCode != 400 {
		t.Fatalf("bad signature: %d; want 400", resp.StatusCode)
	}
	unsigned := http.Header{"X-Anyhook-Delivery": {"evt_1"}}
	if resp := post(body, unsigned); resp.StatusCode != 400 {
		t.Fatalf("unsigned: %d; want 400", resp.StatusCode)
	}
	if calls.Load() != 0 || e.countRows("inbox_events") != 0 || e.countRows("effects") != 0 {
		t.Fatalf("rejected requests reached the handler (%d calls) or wrote rows", calls.Load())
	}

	good := signed(t, testSecret, "evt_1", now, []byte(body))
	for i, want := range []int{200, 200} { // processed, then duplicate
		if resp := post(body, good); resp.StatusCode != want {
			t.Fatalf("delivery %d: %d; want %d", i+1, resp.StatusCode, want)
		}
	}
	if n := e.effects("evt_1"); n != 1 {
		t.Fatalf("%d effects; want 1", n)
	}
	// A captured request resent within the tolerance with other unsigned
	// headers is still the same event: never a second effect.
	for _, tamper := range []http.Header{
		{"X-Anyhook-Delivery": {"evt_other"}},
		{"X-Anyhook-Source": {"elsewhere"}},
	} {
		replayed := good.Clone()
		for k, v := range tamper {
			replayed[k] = v
		}
		if resp := post(body, replayed); resp.StatusCode != 200 && resp.StatusCode != 400 {
			t.Fatalf("replay with %v: %d", tamper, resp.StatusCode)
		}
	}
	if n := e.effects("evt_1"); n != 1 || e.countRows("effects") != 1 {
		t.Fatalf("replays with changed headers made %d effects for evt_1, %d in all; want 1", n, e.countRows("effects"))
	}
	// Same id, different body, validly signed (a sender reusing ids): 422.
	other := `{"id":"evt_1","changed":true}`
	if resp := post(other, signed(t, testSecret, "evt_1", now, []byte(other))); resp.StatusCode != 422 {
		t.Fatalf("conflict: %d; want 422", resp.StatusCode)
	}
	// In flight: Do holds a claim on evt_2 (its owner died after claiming);
	// a delivery of evt_2 meanwhile is answered 503 with Retry-After.
	var crash inboxtest.Faults
	crash.FailAt(inbox.AfterClaim, nil)
	_, err = e.inbox(inbox.Config{Hook: crash.Hook}).Do(context.Background(), "orders", inbox.Event{Source: "anyhook", ID: "evt_2"},
		inbox.Effect[TTx]{Policy: inbox.Hold(time.Hour), Run: func(context.Context, inbox.Claim) error { return nil }})
	if !errors.Is(err, inboxtest.ErrInjected) {
		t.Fatal(err)
	}
	body2 := `{"id":"evt_2"}`
	resp := post(body2, signed(t, testSecret, "evt_2", now, []byte(body2)))
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("in flight: %d Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	// Too large: 413, nothing written.
	big := strings.Repeat("x", 2048)
	if resp := post(big, signed(t, testSecret, "evt_3", now, []byte(big))); resp.StatusCode != 413 {
		t.Fatalf("large body: %d; want 413", resp.StatusCode)
	}
	if resp, err := srv.Client().Get(srv.URL); err != nil || resp.StatusCode != 405 {
		t.Fatalf("GET: %v %v; want 405", resp, err)
	}
	if n := e.effects("evt_3"); n != 0 {
		t.Fatalf("rejected large body wrote %d effects", n)
	}
}

func TestHandlerStoreErrorIs503(t *testing.T) {
	t.Parallel()
	h, err := inbox.NewHandler(inbox.HandlerConfig{
		Verifier: inbox.VerifierFunc(func([]byte, http.Header) error { return nil }),
		EventID:  inbox.WebhookID,
		Handle: func(context.Context, inbox.Delivery) (inbox.Outcome, error) {
			return 0, io.ErrUnexpectedEOF
		},
		RetryAfter: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader([]byte("{}")))
	req.Header.Set("webhook-id", "msg_1")
	h.ServeHTTP(rec, req)
	if rec.Code != 503 || rec.Header().Get("Retry-After") != "30" || rec.Body.String() != "unavailable\n" {
		t.Fatalf("store error: %d Retry-After %q body %q; want 503, 30, unavailable", rec.Code, rec.Header().Get("Retry-After"), rec.Body)
	}
	if _, err := inbox.NewHandler(inbox.HandlerConfig{}); err == nil {
		t.Fatal("NewHandler without Verifier and Handle: no error")
	}
}

// A provider's own signature scheme (here an HMAC of the body in
// X-Provider-Signature) covers the body but not X-AnyHook-Delivery. One
// signed request replayed with three different X-AnyHook-Delivery values is
// one event: the handler takes the id from the verified body. A custom
// Verifier without an EventID is refused at NewHandler.
func TestHandlerCustomVerifierDedupsOnVerifiedID(t *testing.T) {
	t.Parallel()
	e := setup(t, sqliteBackend)
	key := []byte("provider secret")
	sign := func(body []byte) string {
		m := hmac.New(sha256.New, key)
		m.Write(body)
		return hex.EncodeToString(m.Sum(nil))
	}
	verify := inbox.VerifierFunc(func(body []byte, h http.Header) error {
		got, err := hex.DecodeString(h.Get("X-Provider-Signature"))
		if err != nil || !hmac.Equal(got, must(hex.DecodeString(sign(body)))) {
			return &inbox.SignatureError{Reason: "signature mismatch"}
		}
		return nil
	})
	handle := func(ctx context.Context, d inbox.Delivery) (inbox.Outcome, error) {
		return e.ib.Apply(ctx, "orders", d.Event, func(ctx context.Context, tx *sql.Tx) error {
			return e.write(ctx, tx, d.Event.ID, "")
		})
	}
	if _, err := inbox.NewHandler(inbox.HandlerConfig{Verifier: verify, Handle: handle}); !errors.Is(err, inbox.ErrInvalid) {
		t.Fatalf("custom Verifier without EventID: %v; want ErrInvalid", err)
	}
	h, err := inbox.NewHandler(inbox.HandlerConfig{
		Verifier: verify,
		EventID: func(body []byte, _ http.Header) (string, error) {
			var ev struct{ ID string }
			if err := json.Unmarshal(body, &ev); err != nil {
				return "", err
			}
			return ev.ID, nil
		},
		Handle: handle,
		Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"id":"evt_provider_1","type":"order.paid"}`)
	for _, delivery := range []string{"dlv_1", "dlv_2", "dlv_3"} {
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header.Set("X-Provider-Signature", sign(body))
		req.Header.Set("X-AnyHook-Delivery", delivery)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			t.Fatalf("delivery %s: %d %s; want 200", delivery, rec.Code, rec.Body)
		}
	}
	if n, m := e.countRows("effects"), e.countRows("inbox_events"); n != 1 || m != 1 {
		t.Fatalf("%d business rows, %d inbox rows; want 1, 1", n, m)
	}
	if n := e.effects("evt_provider_1"); n != 1 {
		t.Fatalf("%d effects under the provider's id; want 1", n)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// The 400 answer names the safe reason of a rejection, and the default
// logger (slog.Default) gets it at warn with the cause.
func TestHandlerRejectionReasons(t *testing.T) {
	// Not parallel: it replaces slog's default logger.
	var logs bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logs, nil)))
	defer slog.SetDefault(old)

	now := time.Unix(1_750_000_000, 0)
	v, err := inbox.NewStandardWebhooks(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	v.Now = func() time.Time { return now }
	h, err := inbox.NewHandler(inbox.HandlerConfig{
		Verifier: v,
		Handle: func(context.Context, inbox.Delivery) (inbox.Outcome, error) {
			t.Error("Handle called for a rejected request")
			return 0, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{}`)
	for _, c := range []struct {
		name   string
		header http.Header
		want   string
	}{
		{"old timestamp", signed(t, testSecret, "evt_1", now.Add(-time.Hour), body), "invalid signature: timestamp outside tolerance (5m0s)"},
		{"wrong secret", signed(t, "whsec_"+base64.StdEncoding.EncodeToString([]byte("another secret, 32 bytes long!!!")), "evt_1", now, body),
			"invalid signature: signature mismatch (no matching v1 signature)"},
		{"no signature", http.Header{"X-Anyhook-Delivery": {"evt_1"}}, "invalid signature: missing webhook-id, webhook-timestamp or webhook-signature"},
		{"delivery header differs from the signed id", func() http.Header {
			h := signed(t, testSecret, "evt_1", now, body)
			h.Set("X-AnyHook-Delivery", "evt_2")
			return h
		}(), "invalid event id: X-AnyHook-Delivery does not match the signed webhook-id"},
	} {
		logs.Reset()
		req := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(body))
		req.Header = c.header
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := strings.TrimSpace(rec.Body.String()); rec.Code != 400 || got != c.want {
			t.Errorf("%s: %d %q; want 400 %q", c.name, rec.Code, got, c.want)
		}
		if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), c.want) {
			t.Errorf("%s: default log %q; want a warning with the reason", c.name, logs.String())
		}
	}
}

// The Retry-After of a 503 says when a retry can find something changed:
// after an uncertain effect, the policy's stale duration; while the claim
// is live, the time left until it goes stale; for a held claim, nothing
// (the sender's own backoff spreads its remaining attempts).
func TestHandlerRetryAfter(t *testing.T) {
	t.Parallel()
	e := setup(t, sqliteBackend)
	const stale = 10 * time.Minute
	runs := 0
	h, err := inbox.NewHandler(inbox.HandlerConfig{
		Verifier: inbox.VerifierFunc(func([]byte, http.Header) error { return nil }),
		EventID:  inbox.WebhookID,
		Logger:   testLogger(t),
		Handle: func(ctx context.Context, d inbox.Delivery) (inbox.Outcome, error) {
			return e.ib.Do(ctx, "capture", d.Event, inbox.Effect[*sql.Tx]{
				Policy: inbox.Hold(stale),
				Run: func(context.Context, inbox.Claim) error {
					runs++
					return errors.New("payments API: timeout") // uncertain
				},
			})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	post := func() (int, string, string) {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
		req.Header.Set("webhook-id", "evt_1")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code, strings.TrimSpace(rec.Body.String()), rec.Header().Get("Retry-After")
	}
	if code, body, ra := post(); code != 503 || body != "uncertain" || ra != "600" {
		t.Fatalf("uncertain: %d %q Retry-After %q; want 503 uncertain 600", code, body, ra)
	}
	code, body, ra := post()
	secs, _ := strconv.Atoi(ra)
	if code != 503 || body != "in-flight" || secs <= 5 || secs > 600 {
		t.Fatalf("claim live: %d %q Retry-After %q; want 503 in-flight, the time left until stale (5 < s <= 600)", code, body, ra)
	}
	if err := inboxtest.AgeClaim(context.Background(), e.drv, inbox.DefaultSource, "capture", "evt_1", time.Hour); err != nil {
		t.Fatal(err)
	}
	if code, body, ra := post(); code != 503 || body != "held" || ra != "" {
		t.Fatalf("held: %d %q Retry-After %q; want 503 held without Retry-After", code, body, ra)
	}
	if runs != 1 {
		t.Fatalf("effect ran %d times; want 1", runs)
	}
}

// HandlerUnstorableID: a validly signed delivery whose event id no
// database keeps alike (bytes that are not UTF-8 in webhook-id) is
// answered 400 saying why, before Handle: a 503 would have the sender
// retry for ever on PostgreSQL what SQLite accepts.
func (suite[TTx]) HandlerUnstorableID(t *testing.T, e *env[TTx]) {
	v, err := inbox.NewStandardWebhooks(testSecret)
	if err != nil {
		t.Fatal(err)
	}
	h, err := inbox.NewHandler(inbox.HandlerConfig{Verifier: v, MaxBody: 1024, Logger: testLogger(t),
		Handle: func(ctx context.Context, d inbox.Delivery) (inbox.Outcome, error) {
			t.Errorf("Handle called with id %q", d.Event.ID)
			return 0, nil
		}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	body := `{"id":"x"}`
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
	req.Header = signed(t, testSecret, "evt_\xff\xfe", time.Now(), []byte(body))
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(msg), "event id not valid UTF-8") {
		t.Fatalf("answer %d %q; want 400 naming the event id", resp.StatusCode, msg)
	}
}
