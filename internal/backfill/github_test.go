package backfill_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v75/github"

	"github.com/anyhook/anyhook/internal/backfill"
	"github.com/anyhook/anyhook/internal/backfill/backfilltest"
)

const token = "ghp_fake_token_0123456789"

// TestGitHubFakeWithGoGithub lists the fake's hook deliveries through
// go-github's own client (cursor paging from the Link header, its
// HookDelivery type) and redelivers one, so the fake's shapes are
// GitHub's.
func TestGitHubFakeWithGoGithub(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		if r.Header.Get("X-Hub-Signature-256") == backfilltest.Sign("hooksecret", body) {
			got = append(got, r.Header.Get("X-GitHub-Delivery"))
		}
	}))
	t.Cleanup(target.Close)
	fake := backfilltest.NewGitHub(t, token, "/repos/acme/shop", 77)
	fake.Target, fake.Secret = target.URL, "hooksecret"
	base := time.Now().Add(-5 * time.Hour).Truncate(time.Second)
	for i := range 130 {
		fake.Deliver(fmt.Sprintf("guid-%03d", i), "push", []byte(`{"ref":"x"}`), base.Add(time.Duration(i)*time.Minute), 200)
	}
	c := github.NewClient(nil).WithAuthToken(token)
	c.BaseURL, _ = url.Parse(fake.URL + "/")
	ctx := t.Context()
	var ids []string
	opt := &github.ListCursorOptions{PerPage: 100}
	pages := 0
	for {
		ds, resp, err := c.Repositories.ListHookDeliveries(ctx, "acme", "shop", 77, opt)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, d := range ds {
			if d.GetID() == 0 || d.GetStatusCode() != 200 || d.DeliveredAt == nil || d.GetEvent() != "push" {
				t.Fatalf("go-github decoded %v", d)
			}
			ids = append(ids, d.GetGUID())
		}
		if resp.Cursor == "" {
			break
		}
		opt.Cursor = resp.Cursor
	}
	if len(ids) != 130 || pages != 2 || ids[0] != "guid-129" || ids[129] != "guid-000" {
		t.Fatalf("go-github listed %d deliveries in %d pages (first %s)", len(ids), pages, ids[0])
	}
	_, _, err := c.Repositories.RedeliverHookDelivery(ctx, "acme", "shop", 77, 1000)
	var accepted *github.AcceptedError
	if err != nil && !errors.As(err, &accepted) {
		t.Fatal(err)
	}
	mu.Lock()
	if !slices.Equal(got, []string{"guid-000"}) {
		t.Fatalf("redelivery reached the hook as %v", got)
	}
	mu.Unlock()
	bad := github.NewClient(nil).WithAuthToken("ghp_wrong")
	bad.BaseURL = c.BaseURL
	_, _, err = bad.Repositories.ListHookDeliveries(ctx, "acme", "shop", 77, nil)
	var ge *github.ErrorResponse
	if !errors.As(err, &ge) || ge.Response.StatusCode != 401 || ge.Message != "Bad credentials" {
		t.Fatalf("bad token: %v", err)
	}
	fake.RateLimit(1)
	_, _, err = c.Repositories.ListHookDeliveries(ctx, "acme", "shop", 77, nil)
	var rl *github.RateLimitError
	if !errors.As(err, &rl) {
		t.Fatalf("rate limit: %v", err)
	}
}

// TestGitHubRedeliver: backfill.Run over a GitHub hook redelivers, once,
// the latest attempt of each event the gateway does not have (whatever
// GitHub says about it), counts the others as already had, stays inside
// the window, and waits out a rate limit.
func TestGitHubRedeliver(t *testing.T) {
	t.Parallel()
	fake := backfilltest.NewGitHub(t, token, "/orgs/acme", 9)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(target.Close)
	fake.Target = target.URL
	base := time.Now().Add(-10 * time.Hour).Truncate(time.Second)
	fake.Deliver("old", "push", nil, base, 500) // outside the window
	have := map[string]bool{"9:ok-1": true, "9:ok-2": true}
	fake.Deliver("ok-1", "push", nil, base.Add(2*time.Hour), 200)
	fake.Deliver("failed-1", "push", nil, base.Add(3*time.Hour), 502)
	fake.Deliver("failed-1", "push", nil, base.Add(3*time.Hour+time.Minute), 502) // GitHub's own retry: one event
	fake.Deliver("ok-2", "issues", nil, base.Add(4*time.Hour), 200)
	for i := range 120 {
		fake.Deliver(fmt.Sprintf("failed-%d", i+2), "push", nil, base.Add(5*time.Hour+time.Duration(i)*time.Second), 0)
	}
	fake.RateLimit(2)
	var sl fakeSleep
	g := &backfill.GitHub{Client: backfill.Client{Base: fake.URL, Key: token, Sleep: sl.sleep}, Org: "acme", HookID: 9}
	p, err := backfill.Run(t.Context(), backfill.Request{
		Source: "github", From: base.Add(time.Hour), Redeliverer: g,
		Lookup: func(_ context.Context, source, key string) (bool, error) { return have[key], nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	if p.Found != 123 || p.AlreadyHad != 2 || p.Redelivered != 121 || p.New != 0 || p.RateLimited != 1 || len(sl.waits) != 1 {
		t.Fatalf("progress %+v, waits %v", p, sl.waits)
	}
	re := fake.Redeliveries()
	if len(re) != 121 || re[0] != "failed-1" || slices.Contains(re, "old") || slices.Contains(re, "ok-1") {
		t.Fatalf("redelivered %d: %v…", len(re), re[:min(3, len(re))])
	}
	bad := &backfill.GitHub{Client: backfill.Client{Base: fake.URL, Key: "ghp_nope", Sleep: sl.sleep}, Org: "acme", HookID: 9}
	_, err = backfill.Run(t.Context(), backfill.Request{Source: "github", From: base, Redeliverer: bad,
		Lookup: func(context.Context, string, string) (bool, error) { return false, nil }})
	if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "api_key") {
		t.Fatalf("bad token: %v", err)
	}
}
