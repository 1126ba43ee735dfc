package admin_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/admin"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

const token = "test-admin-token"

var sources = map[string][]string{
	"stripe": {"billing", "audit"},
	"github": {"ci"},
}

type fixture struct {
	t     testing.TB
	store *sqlite.Store
	srv   *httptest.Server
}

func setup(t testing.TB) *fixture {
	t.Helper()
	return setupWith(t, admin.Options{Token: token})
}

func setupWith(t testing.TB, opt admin.Options) *fixture {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	opt.Store = st
	if opt.Sources == nil {
		opt.Sources = sources
	}
	if opt.Destinations == nil {
		opt.Destinations = []string{"billing", "audit", "ci"}
	}
	opt.Logger = slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := httptest.NewServer(admin.New(opt).Handler())
	t.Cleanup(srv.Close)
	return &fixture{t: t, store: st, srv: srv}
}

var clock = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// seed ingests one event of source with body, received at clock+offset,
// delivered to the source's destinations, and returns its id.
func (f *fixture) seed(source, key string, body []byte, offset time.Duration) string {
	f.t.Helper()
	id := store.NewID()
	res, err := f.store.Ingest(f.t.Context(), []store.NewEvent{{
		Event: anyhook.Event{
			ID: id, Source: source, DedupKey: key, ReceivedAt: clock.Add(offset),
			Method: "POST", Path: "/webhooks/" + source,
			Header: http.Header{"Content-Type": {"application/json"}, "X-Test": {"a", "b"}},
			Body:   body,
		},
		Destinations: sources[source],
	}})
	if err != nil || res[0].Err != nil {
		f.t.Fatalf("ingest: %v %v", err, res)
	}
	return id
}

// claim claims every due delivery of destination with lease.
func (f *fixture) claim(destination string, lease time.Duration) []store.Claim {
	f.t.Helper()
	cs, err := f.store.Claim(f.t.Context(), destination, 100, lease)
	if err != nil {
		f.t.Fatal(err)
	}
	return cs
}

// finish records one attempt of each claim with status and response body.
// deliverAll records every due delivery of the fixture's destinations as
// delivered: a bulk replay takes only pairs with nothing still to send.
func (f *fixture) deliverAll() {
	f.t.Helper()
	for _, d := range []string{"billing", "audit", "ci"} {
		for cs := f.claim(d, time.Minute); len(cs) > 0; cs = f.claim(d, time.Minute) {
			f.finish(cs, anyhook.StatusDelivered, 200, nil)
		}
	}
}

func (f *fixture) finish(cs []store.Claim, status anyhook.DeliveryStatus, code int, resp []byte) {
	f.t.Helper()
	var outs []store.Outcome
	for _, c := range cs {
		errText := ""
		if code/100 != 2 {
			errText = "HTTP " + http.StatusText(code)
		}
		outs = append(outs, store.Outcome{
			DeliveryID: c.Delivery.ID, Attempt: c.Delivery.AttemptCount, Status: status,
			Result: anyhook.Attempt{Number: c.Delivery.AttemptCount, StartedAt: clock, Duration: 12500 * time.Microsecond,
				StatusCode: code, Error: errText, ResponseBody: resp},
		})
	}
	if lost, err := f.store.Finish(f.t.Context(), outs); err != nil || len(lost) > 0 {
		f.t.Fatalf("finish: %v, lost %v", err, lost)
	}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("status %d, body %q: %v", r.status, r.body, err)
	}
	return m
}

func (r response) errCode(t *testing.T) string {
	t.Helper()
	e, _ := r.json(t)["error"].(map[string]any)
	if e == nil {
		t.Fatalf("no error object in %s", r.body)
	}
	return e["code"].(string)
}

// do sends a request with the admin token.
func (f *fixture) do(method, path, body string) response {
	f.t.Helper()
	return f.doAuth(method, path, body, "Bearer "+token)
}

func (f *fixture) doAuth(method, path, body, auth string) response {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(f.t.Context(), method, f.srv.URL+path, rd)
	if err != nil {
		f.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	res, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		f.t.Fatal(err)
	}
	return response{res.StatusCode, res.Header, b}
}

func (f *fixture) mustStatus(r response, want int) response {
	f.t.Helper()
	if r.status != want {
		f.t.Fatalf("status %d, want %d; body %s", r.status, want, r.body)
	}
	return r
}

func items(t *testing.T, r response) []map[string]any {
	t.Helper()
	var l struct {
		Items      []map[string]any `json:"items"`
		NextCursor string           `json:"next_cursor"`
	}
	if err := json.Unmarshal(r.body, &l); err != nil {
		t.Fatalf("%s: %v", r.body, err)
	}
	if l.Items == nil {
		t.Fatalf("items is not an array: %s", r.body)
	}
	return l.Items
}

func nextCursor(t *testing.T, r response) string {
	t.Helper()
	c, _ := r.json(t)["next_cursor"].(string)
	return c
}

func TestAuth(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tc := range []struct{ name, auth string }{
		{"missing", ""},
		{"wrong token", "Bearer nope"},
		{"wrong scheme", "Basic " + base64.StdEncoding.EncodeToString([]byte("admin:"+token))},
		{"token as scheme", token},
		{"empty bearer", "Bearer "},
		{"token prefix", "Bearer " + token[:len(token)-1]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, ep := range []struct{ method, path string }{
				{"GET", "/api/events"}, {"GET", "/api/events/x"}, {"POST", "/api/events/x/replay"},
				{"POST", "/api/replay"}, {"GET", "/api/deliveries"}, {"POST", "/api/deliveries/x/resolve"},
				{"GET", "/api/destinations"}, {"POST", "/api/destinations/billing/pause"},
				{"POST", "/api/destinations/billing/resume"}, {"GET", "/api/openapi.json"}, {"GET", "/api/nope"},
			} {
				r := f.doAuth(ep.method, ep.path, "", tc.auth)
				if r.status != http.StatusUnauthorized {
					t.Fatalf("%s %s: status %d, want 401", ep.method, ep.path, r.status)
				}
				if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
					t.Errorf("%s %s: WWW-Authenticate %q", ep.method, ep.path, r.header.Get("WWW-Authenticate"))
				}
				if code := r.errCode(t); code != "unauthorized" {
					t.Errorf("code %q", code)
				}
			}
		})
	}
	// Scheme is case-insensitive (RFC 7235).
	f.mustStatus(f.doAuth("GET", "/api/events", "", "bearer "+token), http.StatusOK)
	// The probes are public.
	f.mustStatus(f.doAuth("GET", "/healthz", "", ""), http.StatusOK)
	f.mustStatus(f.doAuth("GET", "/readyz", "", ""), http.StatusOK)
}

func TestEmptyTokenDisablesAuth(t *testing.T) {
	t.Parallel()
	f := setupWith(t, admin.Options{})
	f.mustStatus(f.doAuth("GET", "/api/events", "", ""), http.StatusOK)
}

// A page on another site cannot drive the API from the operator's
// browser: with no token (loopback), or with one the browser would send.
func TestCrossOriginPostsRefused(t *testing.T) {
	t.Parallel()
	for name, opt := range map[string]admin.Options{"no token": {}, "token": {Token: token}} {
		f := setupWith(t, opt)
		for _, h := range []http.Header{
			{"Origin": {"https://evil.example"}},
			{"Sec-Fetch-Site": {"cross-site"}},
		} {
			req, _ := http.NewRequestWithContext(t.Context(), "POST", f.srv.URL+"/api/replay", strings.NewReader(`{"source":"stripe"}`))
			req.Header = h
			req.Header.Set("Content-Type", "text/plain")
			req.Header.Set("Authorization", "Bearer "+token)
			res, err := f.srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusForbidden {
				t.Errorf("%s, %v: %d, want 403", name, h, res.StatusCode)
			}
		}
		// Same-origin browsers and non-browser clients still work.
		req, _ := http.NewRequestWithContext(t.Context(), "POST", f.srv.URL+"/api/replay", strings.NewReader(`{"source":"stripe","dry_run":true}`))
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := f.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Errorf("%s, same-origin dry run: %d, want 200", name, res.StatusCode)
		}
		f.mustStatus(f.do("POST", "/api/replay", `{"source":"stripe","dry_run":true}`), http.StatusOK)
	}
}

func TestHealthAndReady(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := f.mustStatus(f.doAuth("GET", "/healthz", "", ""), http.StatusOK)
	if string(r.body) != "ok\n" {
		t.Errorf("healthz body %q", r.body)
	}
	f.mustStatus(f.doAuth("GET", "/readyz", "", ""), http.StatusOK)
	f.store.Close()
	r = f.mustStatus(f.doAuth("GET", "/readyz", "", ""), http.StatusServiceUnavailable)
	if !strings.Contains(string(r.body), "store unavailable") {
		t.Errorf("readyz body %q", r.body)
	}
	// Liveness does not depend on the store.
	f.mustStatus(f.doAuth("GET", "/healthz", "", ""), http.StatusOK)
	// An API call on a closed store is a 503 with a generic message.
	r = f.mustStatus(f.do("GET", "/api/events", ""), http.StatusServiceUnavailable)
	if code := r.errCode(t); code != "unavailable" {
		t.Errorf("code %q", code)
	}
	if strings.Contains(string(r.body), "sql") {
		t.Errorf("detail leaked: %s", r.body)
	}
}

func TestReadyUsesOption(t *testing.T) {
	t.Parallel()
	var ready atomic.Bool
	f := setupWith(t, admin.Options{Token: token, Ready: func(context.Context) error {
		if ready.Load() {
			return nil
		}
		return errors.New("ingest not listening yet")
	}})
	r := f.mustStatus(f.doAuth("GET", "/readyz", "", ""), http.StatusServiceUnavailable)
	if string(r.body) != "not ready\n" {
		t.Errorf("body %q", r.body)
	}
	ready.Store(true)
	f.mustStatus(f.doAuth("GET", "/readyz", "", ""), http.StatusOK)
}
