package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

// TestBrowserSearchPrefix: the search box takes the start of an id, as
// GET /api/events?q= does, over the last hour (store.PrefixWindow) first;
// it says how far back it looked and links to the hour before, until the
// event turns up. At 1280 px and on a 390 px phone.
func TestBrowserSearchPrefix(t *testing.T) {
	needChromium(t)
	ctx := context.Background()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "anyhook.db")
	st, err := sqlite.Open(ctx, dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ev := func(key string, ago time.Duration) store.NewEvent {
		return store.NewEvent{Event: anyhook.Event{ID: store.NewID(), Source: "stripe", DedupKey: key, ReceivedAt: now.Add(-ago),
			Method: "POST", Path: "/webhooks/stripe", Header: http.Header{"Content-Type": {"application/json"}},
			Body: []byte(`{"id":"` + key + `"}`)}}
	}
	// Made oldest first: the lists are in id order (time-ordered ids).
	old := ev("evt_prefix_older", 90*time.Minute) // in the hour before the first one searched
	recent2 := ev("evt_prefix_recent_2", 30*time.Minute)
	recent1 := ev("evt_prefix_recent_1", 20*time.Minute)
	// Older still, matching nothing: with no event before the hour
	// searched further, that search would be complete (no notice).
	ancient := ev("evt_zz_ancient", 5*time.Hour)
	if _, err := st.Ingest(ctx, []store.NewEvent{ancient, old, recent2, recent1}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	base, bctx, do, rows := searchPage(t, dbPath)
	search := func(q string) {
		t.Helper()
		do("search "+q, chromedp.Navigate(base+"/events"), chromedp.WaitVisible(chromedp.CSS(`input[name="q"]`)),
			chromedp.SendKeys(chromedp.CSS(`input[name="q"]`), q), chromedp.Submit(chromedp.CSS(`input[name="q"]`)),
			chromedp.WaitVisible(chromedp.CSS("#searched")))
	}
	notice := func() string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#searched")))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, width := range []int{1280, 390} {
		do(fmt.Sprint(width, " px"), chromedp.EmulateViewport(int64(width), 900))

		// Two events start so: both listed (no event opened), and the
		// notice says the search looked at the last hour only.
		search("evt_prefix_rec")
		if got := rows(); len(got) != 2 || got[0] != recent1.Event.ID || got[1] != recent2.Event.ID {
			t.Errorf("%d px: evt_prefix_rec lists %q, want the two recent events newest first", width, got)
		}
		if n := notice(); !strings.Contains(n, "Searched back to") || !strings.Contains(n, "search further") {
			t.Errorf("%d px: notice %q", width, n)
		}

		// The older event is not in the last hour: nothing, then "search
		// further" looks at the hour before and finds it.
		search("evt_prefix_old")
		if got := rows(); len(got) != 0 {
			t.Errorf("%d px: evt_prefix_old in the last hour lists %q, want none", width, got)
		}
		// The empty list says how far it looked, not that nothing matches.
		if s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#event-rows"))); err != nil || !strings.Contains(s, "older events were not searched") || strings.Contains(s, "No events match") {
			t.Errorf("%d px: the empty list says %q (%v)", width, s, err)
		}
		do("search further", chromedp.Click(chromedp.CSS("#search-further")), chromedp.WaitVisible(chromedp.CSS("#searched")))
		if got := rows(); len(got) != 1 || got[0] != old.Event.ID {
			t.Errorf("%d px: searched further, evt_prefix_old lists %q, want %s", width, got, old.Event.ID)
		}
		if n := notice(); !strings.Contains(n, "Searched back to") {
			t.Errorf("%d px: after searching further, notice %q", width, n)
		}
		if q, err := chromedp.Run(bctx, chromedp.Value(chromedp.CSS(`input[name="q"]`))); err != nil || q != "evt_prefix_old" {
			t.Errorf("%d px: the search box holds %q (%v)", width, q, err)
		}
		if w, err := chromedp.Run(bctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`)); err != nil || w[0] > w[1] {
			t.Errorf("%d px: the page is %v wide (%v); want no sideways scroll", width, w, err)
		}

		// A whole provider event id still opens its event.
		do("exact id", chromedp.Navigate(base+"/events?q=evt_prefix_older"), chromedp.WaitVisible(chromedp.CSS("#event-id")))
	}
}

// TestBrowserSearchBodies: the search box takes body:TEXT and
// filter:<CEL>, searching inside the bodies over the last day first, as
// GET /api/events?body=&filter= does: it lists the matches (never opening
// one), says how far back it looked and links further; a bad expression
// is shown, naming its column. At 1280 px and on a 390 px phone.
func TestBrowserSearchBodies(t *testing.T) {
	needChromium(t)
	ctx := context.Background()
	dir := t.TempDir()
	dbPath := filepath.Join(dir, "anyhook.db")
	st, err := sqlite.Open(ctx, dbPath, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ev := func(key, body string, ago time.Duration) store.NewEvent {
		return store.NewEvent{Event: anyhook.Event{ID: store.NewID(), Source: "stripe", DedupKey: key, ReceivedAt: now.Add(-ago),
			Method: "POST", Path: "/webhooks/stripe", Header: http.Header{"Content-Type": {"application/json"}},
			Body: []byte(body)}}
	}
	old := ev("evt_b_old", `{"customer":"cus_123","amount":100}`, 25*time.Hour)
	big := ev("evt_b_big", `{"customer":"cus_777","amount":9000}`, 30*time.Minute)
	small := ev("evt_b_small", `{"customer":"cus_123","amount":50}`, 20*time.Minute)
	// Older still, matching nothing: with no event before the second day,
	// searched further, that search would be complete (no notice).
	ancient := ev("evt_b_ancient", `{"amount":0}`, 50*time.Hour)
	if _, err := st.Ingest(ctx, []store.NewEvent{ancient, old, big, small}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	base, bctx, do, rows := searchPage(t, dbPath)
	search := func(q, waitFor string) {
		t.Helper()
		do("search "+q, chromedp.Navigate(base+"/events"), chromedp.WaitVisible(chromedp.CSS(`input[name="q"]`)),
			chromedp.SendKeys(chromedp.CSS(`input[name="q"]`), q), chromedp.Submit(chromedp.CSS(`input[name="q"]`)),
			chromedp.WaitVisible(chromedp.CSS(waitFor)))
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, width := range []int{1280, 390} {
		do(fmt.Sprint(width, " px"), chromedp.EmulateViewport(int64(width), 900))

		search("body:cus_123", "#searched")
		if got := rows(); len(got) != 1 || got[0] != small.Event.ID {
			t.Errorf("%d px: body:cus_123 lists %q, want [%s] (the other is older than a day)", width, got, small.Event.ID)
		}
		if n := text("#searched"); !strings.Contains(n, "Searched back to") {
			t.Errorf("%d px: notice %q", width, n)
		}
		do("search further", chromedp.Click(chromedp.CSS("#search-further")), chromedp.WaitVisible(chromedp.CSS("#searched")))
		if got := rows(); len(got) != 1 || got[0] != old.Event.ID {
			t.Errorf("%d px: searched further, body:cus_123 lists %q, want [%s]", width, got, old.Event.ID)
		}

		search("filter:body.amount > 1000 && source == \"stripe\"", "#searched")
		if got := rows(); len(got) != 1 || got[0] != big.Event.ID {
			t.Errorf("%d px: filter lists %q, want [%s]", width, got, big.Event.ID)
		}

		// Its replay's dry run counts the events the filter matches in the
		// window searched, and comes back to the search.
		do("dry run", chromedp.Click(chromedp.CSS("#filter-replay-dry")), chromedp.WaitVisible(chromedp.CSS(".flash")))
		if f := text(".flash"); !strings.Contains(f, "Dry run: the filter matches 1 event") {
			t.Errorf("%d px: the dry run says %q", width, f)
		}
		if got := rows(); len(got) != 1 || got[0] != big.Event.ID {
			t.Errorf("%d px: back from the dry run, the page lists %q", width, got)
		}

		// A search that reached past the first event is complete and
		// offers its replay too, over the day it searched.
		until := ancient.Event.ReceivedAt.Add(time.Minute).UTC()
		do("a complete filter search", chromedp.Navigate(base+"/events?until="+url.QueryEscape(until.Format(time.RFC3339Nano))+"&q="+url.QueryEscape("filter:body.amount >= 0")),
			chromedp.WaitVisible(chromedp.CSS("#filter-replay")))
		if got := rows(); len(got) != 1 || got[0] != ancient.Event.ID {
			t.Errorf("%d px: before the first event, the filter lists %q, want [%s]", width, got, ancient.Event.ID)
		}
		if v, err := chromedp.Run(bctx, chromedp.Value(chromedp.CSS(`#filter-replay input[name="since"]`))); err != nil || v != until.Add(-store.BodyWindow).Format(time.RFC3339Nano) {
			t.Errorf("%d px: a complete search's replay is since %q (%v); want %s", width, v, err, until.Add(-store.BodyWindow).Format(time.RFC3339Nano))
		}

		search("filter:body.amount >", "#search-error")
		if e := text("#search-error"); !strings.Contains(e, "column") {
			t.Errorf("%d px: a bad filter says %q; want it to name the column", width, e)
		}
		if w, err := chromedp.Run(bctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`)); err != nil || w[0] > w[1] {
			t.Errorf("%d px: the page is %v wide (%v); want no sideways scroll", width, w, err)
		}

		// Save the filter search under a name: it is listed on the events
		// page and runs again from there; then delete it.
		name := fmt.Sprint("big ", width)
		search("filter:body.amount > 1000", "#searched")
		do("save "+name, chromedp.SendKeys(chromedp.CSS(`#save-search input[name="name"]`), name),
			chromedp.Submit(chromedp.CSS(`#save-search input[name="name"]`)), chromedp.WaitVisible(chromedp.CSS(".flash")))
		if f := text(".flash"); !strings.Contains(f, "saved") {
			t.Errorf("%d px: saving says %q", width, f)
		}
		do("open /events", chromedp.Navigate(base+"/events"), chromedp.WaitVisible(chromedp.CSS("#saved-searches")))
		links, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#saved-searches .saved-search a")].map(a => a.innerText)`))
		if err != nil || len(links) != 1 || links[0] != name {
			t.Errorf("%d px: saved searches listed %q (%v); want [%s]", width, links, err, name)
		}
		if w, err := chromedp.Run(bctx, chromedp.Evaluate[[]int](`[document.documentElement.scrollWidth, window.innerWidth]`)); err != nil || w[0] > w[1] {
			t.Errorf("%d px: with a saved search the page is %v wide (%v); want no sideways scroll", width, w, err)
		}
		do("run "+name, chromedp.Click(chromedp.CSS("#saved-searches .saved-search a")), chromedp.WaitVisible(chromedp.CSS("#searched")))
		if got := rows(); len(got) != 1 || got[0] != big.Event.ID {
			t.Errorf("%d px: the saved search lists %q, want [%s]", width, got, big.Event.ID)
		}
		do("delete "+name, chromedp.Click(chromedp.CSS("#saved-searches .saved-search button")), chromedp.WaitVisible(chromedp.CSS(".flash")))
		if n, err := chromedp.Run(bctx, chromedp.Evaluate[int](`document.querySelectorAll("#saved-searches .saved-search").length`)); err != nil || n != 0 {
			t.Errorf("%d px: after the delete %d saved searches are listed (%v)", width, n, err)
		}
	}
}

// searchPage serves the SQLite store at dbPath, logs a browser in, and
// returns the gateway's URL, the browser, its step runner and a reader of
// the event ids the events list shows.
func searchPage(t *testing.T, dbPath string) (string, context.Context, func(string, ...chromedp.Action[chromedp.Void]), func() []string) {
	t.Helper()
	base, _ := gatewaytest.Start(t, fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:%s
admin_token: %s
sources:
  stripe: {provider: stripe, secrets: [%s]}
`, dbPath, browserToken, browserSecret), gateway.Options{})
	bctx := startChromium(t)
	do := browser{t, bctx}.do
	do("log in", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), browserToken), chromedp.Click(chromedp.CSS("#login")),
		chromedp.WaitVisible(chromedp.CSS("nav")))
	rows := func() []string {
		t.Helper()
		ids, err := chromedp.Run(bctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("#event-rows a.mono")].map(a => a.innerText)`))
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	return base, bctx, do, rows
}
