package admin_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/admin"
	"github.com/anyhook/anyhook/internal/store"
)

func TestListDeliveries(t *testing.T) {
	t.Parallel()
	f := setup(t)
	s1 := f.seed("stripe", "evt_1", []byte(`{}`), 0)
	g1 := f.seed("github", "gh_1", []byte(`{}`), 0)
	f.finish(f.claim("billing", time.Minute), anyhook.StatusDead, 500, []byte("boom"))

	ids := func(query string) []string {
		t.Helper()
		var out []string
		for _, it := range items(t, f.mustStatus(f.do("GET", "/api/deliveries?"+query, ""), http.StatusOK)) {
			out = append(out, it["destination"].(string)+"/"+it["status"].(string))
			if it["event_id"] != s1 && it["event_id"] != g1 {
				t.Errorf("event_id %v", it["event_id"])
			}
			if _, ok := it["attempts"]; ok {
				t.Errorf("list item carries attempts")
			}
		}
		return out
	}
	for _, tc := range []struct{ query, want string }{
		{"", "ci/pending,audit/pending,billing/dead"},
		{"status=dead", "billing/dead"},
		{"destination=ci", "ci/pending"},
		{"source=stripe", "audit/pending,billing/dead"},
		{"source=stripe&status=pending", "audit/pending"},
		{"since=" + url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339)), ""},
	} {
		if got := strings.Join(ids(tc.query), ","); got != tc.want {
			t.Errorf("%q: got %s, want %s", tc.query, got, tc.want)
		}
	}

	// Paging.
	var seen []string
	cursor := ""
	for range 10 {
		r := f.mustStatus(f.do("GET", "/api/deliveries?limit=1&cursor="+url.QueryEscape(cursor), ""), http.StatusOK)
		for _, it := range items(t, r) {
			seen = append(seen, it["id"].(string))
		}
		if cursor = nextCursor(t, r); cursor == "" {
			break
		}
	}
	if len(seen) != 3 || seen[0] == seen[1] || seen[1] == seen[2] {
		t.Errorf("paged ids %v", seen)
	}

	// A dead delivery shows no next attempt.
	it := items(t, f.mustStatus(f.do("GET", "/api/deliveries?status=dead", ""), http.StatusOK))[0]
	if it["next_attempt_at"] != nil || it["attempt_count"] != 1.0 {
		t.Errorf("dead delivery %v", it)
	}
}

// hold makes every delivery of destination held: claim with an expired
// lease, then rescue under a hold rule.
func (f *fixture) hold(destination string) []anyhook.Delivery {
	f.t.Helper()
	if cs := f.claim(destination, -time.Second); len(cs) == 0 {
		f.t.Fatalf("nothing to claim for %s", destination)
	}
	ds, err := f.store.Rescue(f.t.Context(), func(string) (store.StaleRule, bool) {
		return store.StaleRule{Policy: anyhook.Hold, MaxAttempts: 5}, true
	})
	if err != nil {
		f.t.Fatal(err)
	}
	for _, d := range ds {
		if d.Status != anyhook.StatusHeld {
			f.t.Fatalf("rescued to %s", d.Status)
		}
	}
	return ds
}

func TestResolveHeld(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed("stripe", "evt_1", []byte(`{}`), 0)
	f.seed("stripe", "evt_2", []byte(`{}`), 0)
	f.seed("stripe", "evt_3", []byte(`{}`), 0)
	held := f.hold("billing")
	if len(held) != 3 {
		t.Fatalf("held %d", len(held))
	}
	if got := items(t, f.mustStatus(f.do("GET", "/api/deliveries?status=held", ""), http.StatusOK)); len(got) != 3 {
		t.Fatalf("held list %v", got)
	}

	resolve := func(id, action string) map[string]any {
		t.Helper()
		return f.mustStatus(f.do("POST", "/api/deliveries/"+id+"/resolve", `{"action":"`+action+`"}`), http.StatusOK).json(t)
	}
	d := resolve(held[0].ID, "resend")
	if d["status"] != "retrying" || d["id"] != held[0].ID || d["next_attempt_at"] == nil || !strings.Contains(d["note"].(string), "resent") {
		t.Errorf("resend %v", d)
	}
	if d := resolve(held[1].ID, "mark_delivered"); d["status"] != "delivered" || d["next_attempt_at"] != nil {
		t.Errorf("mark_delivered %v", d)
	}
	if d := resolve(held[2].ID, "discard"); d["status"] != "resolved" {
		t.Errorf("discard %v", d)
	}
	// The resent delivery is due again, at its next attempt number.
	cs := f.claim("billing", time.Minute)
	if len(cs) != 1 || cs[0].Delivery.ID != held[0].ID || cs[0].Delivery.AttemptCount != 2 {
		t.Fatalf("claims after resend %+v", cs)
	}
	// The lost attempt is visible on the event.
	ev := f.mustStatus(f.do("GET", "/api/events/"+held[1].EventID, ""), http.StatusOK).json(t)
	for _, d := range ev["deliveries"].([]any) {
		d := d.(map[string]any)
		if d["id"] != held[1].ID {
			continue
		}
		atts := d["attempts"].([]any)
		if len(atts) != 1 || !strings.Contains(atts[0].(map[string]any)["error"].(string), "outcome unknown") {
			t.Errorf("attempts %v", atts)
		}
	}

	// A dead delivery can be resent too; a delivering, delivered or
	// resolved one cannot.
	f.seed("stripe", "evt_4", []byte(`{}`), 0)
	dead := f.claim("billing", time.Minute)
	f.finish(dead, anyhook.StatusDead, 500, nil)
	if d := resolve(dead[0].Delivery.ID, "resend"); d["status"] != "retrying" {
		t.Errorf("resend dead %v", d)
	}
	for _, tc := range []struct {
		id, body string
		status   int
		code     string
	}{
		{cs[0].Delivery.ID, `{"action":"resend"}`, 400, "invalid"}, // delivering
		{held[1].ID, `{"action":"discard"}`, 400, "invalid"},       // delivered
		{held[2].ID, `{"action":"resend"}`, 400, "invalid"},        // resolved (discarded)
		{held[1].ID, `{"action":"retry"}`, 400, "invalid_parameter"},
		{held[1].ID, `{}`, 400, "invalid_parameter"},
		{held[1].ID, ``, 400, "invalid_parameter"},
		{held[1].ID, `{"action":"resend","why":"x"}`, 400, "invalid_json"},
		{"nosuch", `{"action":"resend"}`, 404, "not_found"},
	} {
		r := f.do("POST", "/api/deliveries/"+tc.id+"/resolve", tc.body)
		if r.status != tc.status || r.errCode(t) != tc.code {
			t.Errorf("%s %s: %d %s", tc.id, tc.body, r.status, r.body)
		}
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed("stripe", "evt_1", []byte(`{}`), 0)

	r := f.mustStatus(f.do("POST", "/api/destinations/billing/pause", ""), http.StatusOK)
	if m := r.json(t); m["name"] != "billing" || m["paused"] != true {
		t.Errorf("pause %v", m)
	}
	if cs := f.claim("billing", time.Minute); len(cs) != 0 {
		t.Fatalf("claimed %d from a paused destination", len(cs))
	}
	dests := items(t, f.mustStatus(f.do("GET", "/api/destinations", ""), http.StatusOK))
	got := map[string]bool{}
	for _, d := range dests {
		got[d["name"].(string)] = d["paused"].(bool)
	}
	if len(got) != 3 || !got["billing"] || got["audit"] || got["ci"] {
		t.Errorf("destinations %v", dests)
	}
	// Pausing twice is fine.
	f.mustStatus(f.do("POST", "/api/destinations/billing/pause", ""), http.StatusOK)

	r = f.mustStatus(f.do("POST", "/api/destinations/billing/resume", ""), http.StatusOK)
	if m := r.json(t); m["paused"] != false {
		t.Errorf("resume %v", m)
	}
	if cs := f.claim("billing", time.Minute); len(cs) != 1 {
		t.Fatalf("claimed %d after resume", len(cs))
	}

	for _, p := range []string{"/api/destinations/nosuch/pause", "/api/destinations/nosuch/resume"} {
		r := f.mustStatus(f.do("POST", p, ""), http.StatusNotFound)
		if code := r.errCode(t); code != "not_found" {
			t.Errorf("code %q", code)
		}
	}
}

// TestBreakerInTheAPI: a destination paused by its breaker (auto_pause)
// is listed paused by the breaker, with why and when the next probe is,
// apart from a person's pause; a person's resume clears the breaker, and
// says so, and the wiring is told who did it.
func TestBreakerInTheAPI(t *testing.T) {
	t.Parallel()
	var cleared []string
	f := setupWith(t, admin.Options{Token: token, OnBreakerCleared: func(dest, actor string, at time.Time) {
		cleared = append(cleared, dest+" by "+actor)
	}})
	f.seed("stripe", "evt_1", []byte(`{}`), 0)
	at := time.Now().UTC().Truncate(time.Second)
	if _, err := f.store.TripBreaker(t.Context(), "billing", at, "20 consecutive failed attempts", at.Add(30*time.Second)); err != nil {
		t.Fatal(err)
	}
	f.mustStatus(f.do("POST", "/api/destinations/audit/pause", ""), http.StatusOK)
	byName := map[string]map[string]any{}
	for _, d := range items(t, f.mustStatus(f.do("GET", "/api/destinations", ""), http.StatusOK)) {
		byName[d["name"].(string)] = d
	}
	b := byName["billing"]
	br, _ := b["breaker"].(map[string]any)
	if b["paused"] != true || b["paused_by"] != "breaker" || br == nil || br["reason"] != "20 consecutive failed attempts" ||
		br["next_probe_at"] != at.Add(30*time.Second).Format(time.RFC3339) {
		t.Errorf("billing = %v, want paused by the breaker, with its reason and next probe", b)
	}
	if a := byName["audit"]; a["paused"] != true || a["paused_by"] != "person" || a["breaker"] != nil {
		t.Errorf("audit = %v, want paused by a person, no breaker", a)
	}
	if c := byName["ci"]; c["paused"] != false || c["paused_by"] != nil {
		t.Errorf("ci = %v, want not paused", c)
	}
	m := f.mustStatus(f.do("POST", "/api/destinations/billing/resume", ""), http.StatusOK).json(t)
	if m["paused"] != false || m["breaker_cleared"] != true {
		t.Errorf("resume = %v, want the breaker cleared", m)
	}
	if len(cleared) != 1 || cleared[0] != "billing by "+"admin" {
		t.Errorf("OnBreakerCleared told %v", cleared)
	}
	if cs := f.claim("billing", time.Minute); len(cs) != 1 {
		t.Fatalf("claimed %d after a person's resume, want 1", len(cs))
	}
	if m := f.mustStatus(f.do("POST", "/api/destinations/billing/resume", ""), http.StatusOK).json(t); m["breaker_cleared"] != false {
		t.Errorf("second resume = %v, want breaker_cleared false", m)
	}
}

func TestListDestinations(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed("stripe", "evt_1", []byte(`{}`), 0)
	f.finish(f.claim("billing", time.Minute), anyhook.StatusDead, 500, nil)
	m := f.mustStatus(f.do("GET", "/api/destinations", ""), http.StatusOK).json(t)
	its := m["items"].([]any)
	if len(its) != 3 {
		t.Fatalf("items %v", its)
	}
	first := its[0].(map[string]any) // sorted: audit, billing, ci
	if first["name"] != "audit" || first["sources"].([]any)[0] != "stripe" {
		t.Errorf("first %v", first)
	}
	counts := m["counts"].(map[string]any)
	if counts["dead"] != 1.0 || counts["pending"] != 1.0 {
		t.Errorf("counts %v", counts)
	}
}

func TestUnknownEndpointAndMethod(t *testing.T) {
	t.Parallel()
	f := setup(t)
	r := f.mustStatus(f.do("GET", "/api/nope", ""), http.StatusNotFound)
	if code := r.errCode(t); code != "unknown_endpoint" {
		t.Errorf("code %q", code)
	}
	r = f.mustStatus(f.do("DELETE", "/api/events", ""), http.StatusMethodNotAllowed)
	if code := r.errCode(t); code != "method_not_allowed" || r.header.Get("Allow") != "GET" {
		t.Errorf("code %q, Allow %q", code, r.header.Get("Allow"))
	}
	r = f.mustStatus(f.do("GET", "/api/events/x/replay", ""), http.StatusMethodNotAllowed)
	if r.header.Get("Allow") != "POST" {
		t.Errorf("Allow %q", r.header.Get("Allow"))
	}
}

// TestDiscardOrphanedDestination: POST /api/destinations/{name}/discard
// resolves an orphaned destination's waiting deliveries as discarded,
// recorded with the actor and reason; a configured one is refused.
func TestDiscardOrphanedDestination(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var ids []string
	for i := range 2 {
		id := store.NewID()
		if _, err := f.store.Ingest(t.Context(), []store.NewEvent{{Event: anyhook.Event{ID: id, Source: "stripe", DedupKey: fmt.Sprint("evt_orphan_", i),
			ReceivedAt: clock, Method: "POST", Path: "/webhooks/stripe", Body: []byte(`{}`)}, Destinations: []string{"legacy", "billing"}}}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	r := f.do("POST", "/api/destinations/billing/discard", `{}`)
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "is configured") {
		t.Errorf("discard of a configured destination: %d %s; want 400", r.status, r.body)
	}
	m := f.mustStatus(f.do("POST", "/api/destinations/legacy/discard", `{"reason":"legacy CRM retired"}`), http.StatusOK).json(t)
	if m["destination"] != "legacy" || m["count"] != float64(2) {
		t.Errorf("discard = %v; want 2", m)
	}
	for _, id := range ids {
		ev, err := f.store.Event(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ev.Deliveries {
			orphan := d.Destination == "legacy"
			if orphan != (d.Status == anyhook.StatusResolved) || (orphan && (d.Resolution.Kind != anyhook.ResolvedDiscarded || d.Resolution.By != "admin" || d.Resolution.Reason != "legacy CRM retired")) {
				t.Errorf("delivery to %s after the discard: %s %+v", d.Destination, d.Status, d.Resolution)
			}
		}
		if len(ev.Actions) != 1 || ev.Actions[0].Kind != store.ActionDiscard || ev.Actions[0].Destination != "legacy" || ev.Actions[0].Actor != "admin" {
			t.Errorf("actions: %+v", ev.Actions)
		}
	}
	if m := f.mustStatus(f.do("POST", "/api/destinations/legacy/discard", ``), http.StatusOK).json(t); m["count"] != float64(0) {
		t.Errorf("discard again = %v; want 0", m)
	}
	if r := f.do("POST", "/api/destinations/legacy/discard", `{"reason":"`+strings.Repeat("x", 1001)+`"}`); r.status != http.StatusBadRequest {
		t.Errorf("a too long reason: %d", r.status)
	}
}

// TestBulkReplaySkipsOrphanedDestinations: a bulk replay without a
// destination replays only to destinations of the config; a replay queued
// for one it no longer names would wait for ever, while the original
// would read "resolved: replayed".
func TestBulkReplaySkipsOrphanedDestinations(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := store.NewID()
	if _, err := f.store.Ingest(t.Context(), []store.NewEvent{{Event: anyhook.Event{ID: id, Source: "stripe", DedupKey: "evt_orphan_replay",
		ReceivedAt: clock, Method: "POST", Path: "/webhooks/stripe", Body: []byte(`{}`)}, Destinations: []string{"legacy", "billing"}}}); err != nil {
		t.Fatal(err)
	}
	// billing's is delivered (one still to send is never replayed: it
	// would be sent twice); legacy's waits, no process sending it.
	f.finish(f.claim("billing", time.Minute), anyhook.StatusDelivered, 200, nil)
	for _, dry := range []bool{true, false} {
		m := f.mustStatus(f.do("POST", "/api/replay", fmt.Sprintf(`{"source":"stripe","dry_run":%v}`, dry)), map[bool]int{true: http.StatusOK, false: http.StatusAccepted}[dry]).json(t)
		if m["count"] != float64(1) {
			t.Errorf("bulk replay (dry run %v) = %v; want 1 (billing only)", dry, m)
		}
	}
	ev, err := f.store.Event(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ev.Deliveries {
		if d.Destination == "legacy" && (d.Replay || d.Status != anyhook.StatusPending) {
			t.Errorf("delivery to the orphaned destination after a bulk replay: %s replay=%v %+v", d.Status, d.Replay, d.Resolution)
		}
	}
	if n := len(ev.Deliveries); n != 3 {
		t.Errorf("%d deliveries after the replay, want 3 (two originals, one replay to billing)", n)
	}
}

// TestRetrying: a pending delivery with a failed attempt behind it is
// retrying, with its next attempt time, and the filters select it apart
// from deliveries not yet tried; a bulk replay refuses it (it would go out
// twice).
func TestRetrying(t *testing.T) {
	t.Parallel()
	f := setup(t)
	failed := f.seed("stripe", "evt_failed", []byte(`{}`), 0)
	f.finish(f.claim("billing", time.Minute), anyhook.StatusPending, 503, []byte("busy"))
	fresh := f.seed("stripe", "evt_fresh", []byte(`{}`), time.Second)

	ds := items(t, f.mustStatus(f.do("GET", "/api/deliveries?status=retrying&destination=billing", ""), http.StatusOK))
	if len(ds) != 1 || ds[0]["event_id"] != failed || ds[0]["status"] != "retrying" || ds[0]["next_attempt_at"] == nil || ds[0]["attempt_count"] != 1.0 {
		t.Errorf("retrying deliveries %v; want the one of %s with its next attempt time", ds, failed)
	}
	ds = items(t, f.mustStatus(f.do("GET", "/api/deliveries?status=pending&destination=billing", ""), http.StatusOK))
	if len(ds) != 1 || ds[0]["event_id"] != fresh {
		t.Errorf("pending deliveries %v; want only the one of %s, not yet tried", ds, fresh)
	}
	evs := items(t, f.mustStatus(f.do("GET", "/api/events?status=retrying", ""), http.StatusOK))
	if len(evs) != 1 || evs[0]["id"] != failed {
		t.Errorf("events with a retrying delivery %v; want %s", evs, failed)
	}
	r := f.mustStatus(f.do("POST", "/api/replay", `{"status":"retrying"}`), http.StatusBadRequest)
	if !strings.Contains(string(r.body), "never selects retrying deliveries") {
		t.Errorf("bulk replay of retrying: %s", r.body)
	}
}
