package gateway_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// dashboardPage logs in to the dashboard at base and returns the page at
// path.
func dashboardPage(t *testing.T, base, path string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar}
	resp, err := client.PostForm(base+"/login", url.Values{"token": {"test-token"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	resp, err = client.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return string(b)
}

// A destination removed from the config while deliveries
// to it are queued loses nothing; the API and dashboard show the
// deliveries as orphaned; configuring the destination again resumes them.
func TestRemovedDestinationOrphansThenResumes(t *testing.T) {
	t.Parallel()
	billing, audit := sinktest.New(t), sinktest.New(t)
	dir := t.TempDir()
	db, key := filepath.Join(dir, "anyhook.db"), filepath.Join(dir, "anyhook-log.key")
	config := func(withBilling bool) string {
		dests := fmt.Sprintf(`  audit:
    url: %s/hooks
    sources: [stripe]
    timeout: 5s
`, audit.URL)
		if withBilling {
			dests += fmt.Sprintf(`  billing:
    url: %s/hooks
    sources: [stripe]
    timeout: 5s
`, billing.URL)
		}
		return fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:%s
log: {key_file: %s}
admin_token: test-token
delivery: {poll_interval: 50ms, grace: 1s}
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
%s`, db, key, stripeSecret, dests)
	}
	run := func(withBilling bool) (*env, func()) {
		base, g := gatewaytest.Start(t, config(withBilling), gateway.Options{})
		return &env{url: base, gw: g, store: g.Store()}, func() { g.Stop(context.Background()) }
	}

	// While billing is down for maintenance (paused), an event arrives.
	e, stop := run(true)
	if err := e.store.SetPaused(t.Context(), "billing", true); err != nil {
		t.Fatal(err)
	}
	a := e.sendStripe(t, "evt_orphan")
	if a.Code != 200 {
		t.Fatalf("send = %+v", a)
	}
	audit.Wait(t, 1)
	stop()

	// billing is removed from the config.
	e, stop = run(false)
	var ev struct {
		Deliveries []struct {
			Destination string `json:"destination"`
			Status      string `json:"status"`
			Orphaned    bool   `json:"orphaned"`
		} `json:"deliveries"`
	}
	gatewaytest.AdminJSON(t, e.url+"/api/events/"+a.ID, &ev)
	found := false
	for _, d := range ev.Deliveries {
		switch d.Destination {
		case "billing":
			found = true
			// Still paused (the pause outlives the config), and orphaned.
			if d.Status != string(anyhook.StatusPaused) || !d.Orphaned {
				t.Errorf("billing delivery = %+v, want paused and orphaned", d)
			}
		case "audit":
			if d.Orphaned {
				t.Errorf("audit delivery shown orphaned: %+v", d)
			}
		}
	}
	if !found {
		t.Fatalf("the billing delivery is gone: %+v", ev.Deliveries)
	}
	var dests struct {
		Items []struct {
			Name       string         `json:"name"`
			Configured bool           `json:"configured"`
			Unfinished map[string]int `json:"unfinished"`
		} `json:"items"`
	}
	gatewaytest.AdminJSON(t, e.url+"/api/destinations", &dests)
	orphan := false
	for _, d := range dests.Items {
		if d.Name == "billing" {
			orphan = !d.Configured && d.Unfinished["paused"] == 1
		}
	}
	if !orphan {
		t.Errorf("destinations = %+v, want billing listed as not configured with 1 paused", dests.Items)
	}
	if page := dashboardPage(t, e.url, "/events/"+a.ID); !strings.Contains(page, "orphaned: destination not in config") {
		t.Errorf("the event page does not show the billing delivery as orphaned")
	}
	if page := dashboardPage(t, e.url, "/destinations"); !strings.Contains(page, "not in config") {
		t.Errorf("the destinations page does not list billing as not in the config")
	}
	// Resumed while no config names it: due, and nobody picks it up.
	if err := e.store.SetPaused(t.Context(), "billing", false); err != nil {
		t.Fatal(err)
	}
	// The queue page counts what it lists: the orphaned delivery too.
	if page := dashboardPage(t, e.url, "/deliveries?status=pending"); !strings.Contains(page, `pending deliveries <span class="muted">(1)</span>`) {
		t.Errorf("the pending deliveries page does not count the orphaned delivery it lists:\n%s", page)
	}
	// And the metrics see it: due, and no process picks it up.
	_, mb := gatewaytest.Admin(t, "GET", e.url+"/metrics", "")
	if m := string(mb); !strings.Contains(m, `anyhook_oldest_due_age_seconds{destination="billing"}`) ||
		!strings.Contains(m, `anyhook_queue_depth{destination="billing",status="pending"} 1`) {
		t.Errorf("/metrics lacks the orphaned destination billing:\n%s", m)
	}
	stop()

	// billing is back in the config: its waiting delivery goes out.
	e, stop = run(true)
	defer stop()
	got := billing.Wait(t, 1)
	if id := got[0].Header.Get("X-AnyHook-Delivery"); id != a.ID {
		t.Fatalf("billing got %s, want %s", id, a.ID)
	}
	testwait.Value(t, "every delivery of "+a.ID+" delivered", func() (anyhook.Event, error) {
		evt, err := e.store.Event(t.Context(), a.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range evt.Deliveries {
			if d.Status != anyhook.StatusDelivered {
				return evt, fmt.Errorf("deliveries = %+v", evt.Deliveries)
			}
		}
		return evt, nil
	})
}
