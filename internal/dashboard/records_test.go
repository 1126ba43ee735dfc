package dashboard_test

import (
	"context"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// TestEventPageSaysWhatHappened: per destination, how often the event was
// sent (attempts of its delivery, of replays, lost in a crash) and
// answered 2xx, and a person's mark; each delivery's resolution; the
// actions with the dashboard session, time and reason; and a lost
// attempt's duration as unknown.
func TestEventPageSaysWhatHappened(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.login()
	ctx := context.Background()
	id := f.seed("stripe", "evt_1", []byte(`{}`))
	held := f.park("billing", anyhook.StatusHeld) // a crash: lost attempt 1
	dead := f.park("audit", anyhook.StatusDead)   // 500, once

	f.post("/deliveries/"+held[0]+"/resolve", url.Values{"action": {"mark_delivered"}, "reason": {"the charge went through"}})
	f.post("/events/"+id+"/replay", url.Values{"destination": {"audit"}, "reason": {"audit is back"}, "back": {"/events/" + id}})
	cs, err := f.store.Claim(ctx, "audit", 1, time.Minute)
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim the replay: %v %d", err, len(cs))
	}
	if _, err := f.store.Finish(ctx, []store.Outcome{{DeliveryID: cs[0].Delivery.ID, Attempt: 1, Status: anyhook.StatusDelivered,
		Result: anyhook.Attempt{Number: 1, StartedAt: time.Now(), Duration: time.Millisecond, StatusCode: 204}}}); err != nil {
		t.Fatal(err)
	}

	page := f.get("/events/" + id)
	mustContain(t, page,
		"<strong>audit</strong>: tried 2 times (1 attempt of its delivery, 1 attempt of 1 replay); <span class=\"may-have-run\">the handler may have run 2 times (2 outcome unknown: lost in a crash, or recorded before outcomes were kept)</span>, answered 2xx 1 time.",
		"<strong>billing</strong>: tried 1 time (1 attempt of its delivery); <span class=\"may-have-run\">the handler may have run 1 time (1 outcome unknown: lost in a crash, or recorded before outcomes were kept)</span>, answered 2xx 0 times; marked delivered by a person 1 time.",
		`data-resolution="replayed">Resolved: replayed by <strong>admin (dashboard session `,
		`audit is back`, `carries the work`,
		`data-resolution="marked_delivered">Marked delivered (the gateway saw no 2xx for it) by <strong>admin (dashboard session `,
		`>unknown</span></td>`,
	)
	if strings.Contains(page.body, "once per destination") {
		t.Error("the event page claims delivery once per destination")
	}
	rows := regexp.MustCompile(`<tr data-action="([a-z_]+)"><td[^>]*>[^<]*</td><td>(admin \(dashboard session [0-9a-f]{8}\))</td><td>([^<]*)</td><td><a class="mono" href="#d-([^"]+)">[^<]*</a></td><td>([^<]*)</td></tr>`).
		FindAllStringSubmatch(page.body, -1)
	if len(rows) != 2 || rows[0][1] != "mark_delivered" || rows[0][4] != held[0] || rows[0][5] != "the charge went through" ||
		rows[1][1] != "replay" || rows[1][3] != "replayed to audit" || rows[1][4] != cs[0].Delivery.ID || rows[1][5] != "audit is back" ||
		rows[0][2] != rows[1][2] {
		t.Errorf("actions rows %q", rows)
	}
	ev, _ := f.store.Event(ctx, id)
	for _, d := range ev.Deliveries {
		if d.ID == dead[0] && (d.Status != anyhook.StatusResolved || d.Resolution.ReplayedBy != cs[0].Delivery.ID) {
			t.Errorf("the dead audit delivery after the replay: %+v", d)
		}
	}

	// Another login is another session in the audit trail.
	g := setupSharing(t, f)
	g.login()
	other := f.seed("github", "h:1", []byte(`{}`))
	d := f.park("ci", anyhook.StatusDead)
	g.post("/deliveries/"+d[0]+"/resolve", url.Values{"action": {"discard"}})
	ev, _ = f.store.Event(ctx, other)
	if len(ev.Actions) != 1 || ev.Actions[0].Actor == rows[0][2] || !strings.HasPrefix(ev.Actions[0].Actor, "admin (dashboard session ") {
		t.Errorf("discard by another session recorded as %+v (the first session is %s)", ev.Actions, rows[0][2])
	}
	mustContain(t, f.get("/deliveries?status=resolved"), d[0])
}

// setupSharing is another browser on f's dashboard: its own cookies.
func setupSharing(t *testing.T, f *fixture) *fixture {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := *f.client
	c.Jar = jar
	return &fixture{t: t, store: f.store, srv: f.srv, client: &c}
}

// TestOverviewCountsStale: the overview counts the stale events of the
// last hour and how many were skipped, so a skip is never silent.
func TestOverviewCountsStale(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.login()
	for _, e := range []struct {
		key, version string
		skip         bool
	}{{"v2", "2", false}, {"v1", "1", true}, {"v1b", "1", false}} {
		ne := store.NewEvent{Event: anyhook.Event{ID: store.NewID(), Source: "stripe", DedupKey: e.key, ReceivedAt: time.Now(), Method: "POST",
			Path: "/webhooks/stripe", Header: map[string][]string{}, Body: []byte(`{}`), Object: "pi_1", Version: e.version},
			Destinations: []string{"billing"}, StaleSkip: e.skip}
		if _, err := f.store.Ingest(context.Background(), []store.NewEvent{ne}); err != nil {
			t.Fatal(err)
		}
	}
	page := f.get("/")
	card := regexp.MustCompile(`(?s)<div class="card" id="stale"><div class="num[^"]*">(\d+)</div><div class="lbl">([^<]*)`).FindStringSubmatch(page.body)
	if card == nil || card[1] != "1" || !strings.Contains(card[2], "of 2 stale") {
		t.Fatalf("stale card %q", card)
	}
}

// TestEventPageNoAnswer: an attempt that got no HTTP answer (connection
// refused) is counted as tried, never as if the destination had it.
func TestEventPageNoAnswer(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.login()
	ctx := context.Background()
	id := f.seed("stripe", "evt_refused", []byte(`{}`))
	cs, err := f.store.Claim(ctx, "audit", 1, time.Minute)
	if err != nil || len(cs) != 1 || cs[0].Event.ID != id {
		t.Fatalf("claim: %v %d", err, len(cs))
	}
	if _, err := f.store.Finish(ctx, []store.Outcome{{DeliveryID: cs[0].Delivery.ID, Attempt: 1, Status: anyhook.StatusPending, RetryIn: time.Hour,
		Result: anyhook.Attempt{Number: 1, StartedAt: time.Now(), Duration: time.Millisecond, Error: "dial tcp 127.0.0.1:9: connect: connection refused",
			Outcome: anyhook.OutcomeNotSent}}}); err != nil {
		t.Fatal(err)
	}
	mustContain(t, f.get("/events/"+id),
		"<strong>audit</strong>: tried 1 time (1 attempt of its delivery); <span class=\"may-have-run\">the handler may have run 0 times; 1 not sent (refused, DNS or TLS: the handler did not run)</span>, answered 2xx 0 times.",
		`<td class="outcome" data-label="Outcome">not sent: did not run</td>`)
}
