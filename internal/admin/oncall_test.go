package admin_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/admin"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/store"
)

// since and until take a duration ago, as the command line does, on
// every list and the bulk replay; a bad one says what is taken.
func TestSinceTakesDurations(t *testing.T) {
	t.Parallel()
	f := setupWith(t, admin.Options{Token: token, Now: func() time.Time { return clock.Add(30 * time.Minute) }})
	old := f.seed("stripe", "evt_old", []byte(`{}`), -2*time.Hour)
	recent := f.seed("stripe", "evt_recent", []byte(`{}`), 0)
	ids := func(path string) string {
		var got []string
		for _, it := range items(t, f.mustStatus(f.do("GET", path, ""), http.StatusOK)) {
			got = append(got, it["id"].(string))
		}
		return strings.Join(got, ",")
	}
	if got := ids("/api/events?since=1h"); got != recent {
		t.Errorf("events since 1h = %s, want only %s (not %s)", got, recent, old)
	}
	if got := ids("/api/events?until=90m"); got != old {
		t.Errorf("events until 90m ago = %s, want only %s", got, old)
	}
	// Deliveries are created by the store's clock: now.
	g := setup(t)
	g.seed("stripe", "evt_now", []byte(`{}`), 0)
	for _, d := range sources["stripe"] { // delivered: a replay never takes one still to send
		g.finish(g.claim(d, time.Minute), anyhook.StatusDelivered, 200, nil)
	}
	if n := len(items(t, g.mustStatus(g.do("GET", "/api/deliveries?since=1h", ""), http.StatusOK))); n != 2 {
		t.Errorf("deliveries since 1h = %d, want 2", n)
	}
	if n := len(items(t, g.mustStatus(g.do("GET", "/api/deliveries?until=1h", ""), http.StatusOK))); n != 0 {
		t.Errorf("deliveries until 1h ago = %d, want 0", n)
	}
	for body, want := range map[string]float64{`{"source":"stripe","since":"1h","dry_run":true}`: 2, `{"source":"stripe","until":"1h","dry_run":true}`: 0} {
		if n := g.mustStatus(g.do("POST", "/api/replay", body), http.StatusOK).json(t)["count"]; n != want {
			t.Errorf("bulk replay %s counts %v, want %v", body, n, want)
		}
	}
	for path, want := range map[string]string{
		"/api/events?since=7d":       `since: \"7d\" is neither an RFC 3339 time such as 2026-01-02T15:04:05Z nor a duration ago such as 24h (days are written in hours: 168h)`,
		"/api/deliveries?until=-1h":  `until: \"-1h\" is a negative duration`,
		"/api/rejections?since=soon": `since: \"soon\" is neither`,
	} {
		if r := f.do("GET", path, ""); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), want) {
			t.Errorf("GET %s: %d %s; want 400 with %s", path, r.status, r.body, want)
		}
	}
}

// A destination filter that names no destination is a 400 naming the
// configured ones, not an empty list; one the config no longer names
// whose deliveries remain is listed.
func TestDeliveriesUnknownDestination(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed("stripe", "evt_1", []byte(`{}`), 0)
	r := f.do("GET", "/api/deliveries?destination=nope", "")
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `destination: unknown destination \"nope\" (configured: audit, billing, ci)`) {
		t.Errorf("destination=nope: %d %s", r.status, r.body)
	}
	if _, err := f.store.Ingest(t.Context(), []store.NewEvent{{Event: anyhook.Event{ID: store.NewID(), Source: "stripe", DedupKey: "evt_legacy",
		ReceivedAt: clock, Method: "POST", Path: "/webhooks/stripe", Body: []byte(`{}`)}, Destinations: []string{"legacy"}}}); err != nil {
		t.Fatal(err)
	}
	if got := items(t, f.mustStatus(f.do("GET", "/api/deliveries?destination=legacy", ""), http.StatusOK)); len(got) != 1 {
		t.Errorf("an orphaned destination's deliveries: %v", got)
	}
	if got := items(t, f.mustStatus(f.do("GET", "/api/deliveries?destination=ci", ""), http.StatusOK)); len(got) != 0 {
		t.Errorf("a configured destination without deliveries: %v", got)
	}
}

// POST /api/events/{id}/replay takes whichever id the command line takes:
// the provider's (with "source" when two sources have it: 409 listing the
// candidates otherwise) and a delivery's (that delivery's destination).
func TestReplayByAnyID(t *testing.T) {
	t.Parallel()
	f := setupWith(t, admin.Options{Token: token, Sources: map[string][]string{"stripe": {"billing", "audit"}, "stripe_eu": {"billing"}}})
	us := f.seed("stripe", "evt_unique", []byte(`{}`), 0)
	shared := f.seed("stripe", "evt_shared", []byte(`{}`), 0)
	id := store.NewID()
	if _, err := f.store.Ingest(t.Context(), []store.NewEvent{{Event: anyhook.Event{ID: id, Source: "stripe_eu", DedupKey: "evt_shared",
		ReceivedAt: clock, Method: "POST", Path: "/webhooks/stripe_eu", Body: []byte(`{}`)}, Destinations: []string{"billing"}}}); err != nil {
		t.Fatal(err)
	}
	replay := func(path, body string, want int) map[string]any {
		t.Helper()
		return f.mustStatus(f.do("POST", path, body), want).json(t)
	}
	m := replay("/api/events/evt_unique/replay", `{"destination":"audit"}`, http.StatusAccepted)
	if m["event_id"] != us || m["matched"] != "provider_event_id" {
		t.Errorf("replay by provider id: %v", m)
	}
	e := replay("/api/events/evt_shared/replay", ``, http.StatusConflict)["error"].(map[string]any)
	cands, _ := e["details"].(map[string]any)["candidates"].([]any)
	if e["code"] != "ambiguous_id" || len(cands) != 2 || !strings.Contains(e["message"].(string), `name one with "source" (`) {
		t.Errorf("an ambiguous provider id: %v", e)
	}
	got := map[string]string{}
	for _, c := range cands {
		c := c.(map[string]any)
		got[c["source"].(string)] = c["event_id"].(string)
	}
	if got["stripe"] != shared || got["stripe_eu"] != id {
		t.Errorf("candidates %v, want %s in stripe and %s in stripe_eu", got, shared, id)
	}
	if m := replay("/api/events/evt_shared/replay", `{"source":"stripe_eu"}`, http.StatusAccepted); m["event_id"] != id {
		t.Errorf("with source: %v", m)
	}
	if e := replay("/api/events/"+us+"/replay", `{"source":"stripe_eu"}`, http.StatusBadRequest)["error"].(map[string]any); !strings.Contains(e["message"].(string), `is of an event from source "stripe", not "stripe_eu"`) {
		t.Errorf("an event id with another source: %v", e)
	}
	replay("/api/events/evt_nowhere/replay", ``, http.StatusNotFound)

	// A delivery id: only that delivery's destination.
	var ev struct {
		Deliveries []struct{ ID, Destination string }
	}
	json.Unmarshal(f.mustStatus(f.do("GET", "/api/events/"+us, ""), http.StatusOK).body, &ev)
	var auditDelivery string
	for _, d := range ev.Deliveries {
		if d.Destination == "audit" {
			auditDelivery = d.ID
		}
	}
	m = replay("/api/events/"+auditDelivery+"/replay", ``, http.StatusAccepted)
	ds := m["deliveries"].([]any)
	if m["matched"] != "delivery_id" || len(ds) != 1 || ds[0].(map[string]any)["destination"] != "audit" {
		t.Errorf("replay by delivery id: %v; want one delivery, to audit", m)
	}
}

// A bulk replay into a paused or failing destination is refused (409)
// naming them and why, unless forced; a dry run lists them; a failing
// destination is what this process's delivery engine saw, or, where it
// attempted none, what the store holds. Pending deliveries are refused
// (400): they would be sent twice.
func TestBulkReplayIntoTroubledDestination(t *testing.T) {
	t.Parallel()
	since := clock.Add(-time.Hour)
	health := map[string]delivery.Health{
		"billing": {Destination: "billing", Streak: 7, Failing: true, Since: since, LastError: "dial tcp 10.0.0.9:443: connect: connection refused"},
		"audit":   {Destination: "audit", LastSuccess: clock},
	}
	f := setupWith(t, admin.Options{Token: token, Health: func() map[string]delivery.Health { return health }})
	for i := range 2 {
		f.seed("stripe", fmt.Sprintf("evt_%d", i), []byte(`{}`), 0)
		f.seed("github", fmt.Sprintf("gh_%d", i), []byte(`{}`), 0)
	}
	for _, d := range []string{"billing", "audit", "ci"} {
		f.finish(f.claim(d, time.Minute), anyhook.StatusDead, 503, nil)
	}

	r := f.do("POST", "/api/replay", `{"status":"dead"}`)
	e := r.json(t)["error"].(map[string]any)
	troubled, _ := e["details"].(map[string]any)["destinations"].([]any)
	if r.status != http.StatusConflict || e["code"] != "destination_troubled" || len(troubled) != 2 {
		t.Fatalf("bulk replay into failing destinations: %d %s; want 409 naming billing and ci", r.status, r.body)
	}
	want := map[string]string{
		// The engine's view.
		"billing": "billing is failing: its last 7 attempts failed, since 2026-03-01T11:00:00Z (last error: dial tcp 10.0.0.9:443: connect: connection refused), and none has succeeded since",
		// Not attempted by this process: the store's.
		"ci": "ci is failing: its latest attempt, at 2026-03-01T12:00:00Z, failed (HTTP Service Unavailable), and none has succeeded since",
	}
	for _, x := range troubled {
		x := x.(map[string]any)
		name := x["destination"].(string)
		if x["reason"] != "failing" || x["detail"] != want[name] || !strings.Contains(e["message"].(string), want[name]) {
			t.Errorf("troubled %v; want %q in the details and the message", x, want[name])
		}
	}
	if n := len(items(t, f.mustStatus(f.do("GET", "/api/deliveries?status=dead", ""), http.StatusOK))); n != 6 {
		t.Fatalf("%d dead after the refused replay, want 6: nothing replayed", n)
	}

	// audit's engine saw a success last: a replay to it alone goes.
	if m := f.mustStatus(f.do("POST", "/api/replay", `{"status":"dead","destination":"audit"}`), http.StatusAccepted).json(t); m["count"] != 2.0 || m["troubled"] != nil {
		t.Errorf("replay to a destination that recovered: %v", m)
	}

	// Paused: refused, naming it, and listed by a dry run.
	f.mustStatus(f.do("POST", "/api/destinations/ci/pause", ""), http.StatusOK)
	r = f.do("POST", "/api/replay", `{"status":"dead","destination":"ci"}`)
	if r.status != http.StatusConflict || !strings.Contains(string(r.body), `"reason":"paused"`) || !strings.Contains(string(r.body), "ci is paused: the replays wait until it is resumed") {
		t.Errorf("into a paused destination: %d %s", r.status, r.body)
	}
	m := f.mustStatus(f.do("POST", "/api/replay", `{"status":"dead","dry_run":true}`), http.StatusOK).json(t)
	if ts, _ := m["troubled"].([]any); m["count"] != 4.0 || len(ts) != 2 {
		t.Errorf("dry run: %v; want 4 and the two troubled destinations", m)
	}

	// force: replayed, and the answer says where it went.
	m = f.mustStatus(f.do("POST", "/api/replay", `{"status":"dead","force":true,"reason":"billing says it is back"}`), http.StatusAccepted).json(t)
	if ts, _ := m["troubled"].([]any); m["count"] != 4.0 || len(ts) != 2 {
		t.Errorf("forced: %v; want 4 replayed and the two troubled destinations named", m)
	}

	// Pending deliveries are still to be sent: refused, and why.
	r = f.do("POST", "/api/replay", `{"status":"pending"}`)
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "a replay would send its event twice") {
		t.Errorf("bulk replay of pending deliveries: %d %s; want 400 saying they would be sent twice", r.status, r.body)
	}
	r = f.do("POST", "/api/replay", `{"status":"bogus"}`)
	if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), `unknown status \"bogus\" (a bulk replay takes dead, held, delivered or skipped)`) {
		t.Errorf("bulk replay of an unknown status: %d %s", r.status, r.body)
	}
}

// A bulk replay into a destination paused by its breaker (auto_pause) is
// refused as paused, saying it was the breaker and why, unless forced.
func TestBulkReplayIntoTrippedDestination(t *testing.T) {
	t.Parallel()
	f := setupWith(t, admin.Options{Token: token, Health: func() map[string]delivery.Health {
		return map[string]delivery.Health{"audit": {Destination: "audit", LastSuccess: clock}}
	}})
	f.seed("stripe", "evt_1", []byte(`{}`), 0)
	f.finish(f.claim("audit", time.Minute), anyhook.StatusDead, 503, nil)
	if _, err := f.store.TripBreaker(t.Context(), "audit", clock, "20 consecutive failed attempts", clock); err != nil {
		t.Fatal(err)
	}
	r := f.do("POST", "/api/replay", `{"status":"dead","destination":"audit"}`)
	if r.status != http.StatusConflict || !strings.Contains(string(r.body), `"reason":"paused"`) ||
		!strings.Contains(string(r.body), "audit is paused by its breaker (auto_pause: 20 consecutive failed attempts)") {
		t.Errorf("into a tripped destination: %d %s", r.status, r.body)
	}
	if m := f.mustStatus(f.do("POST", "/api/replay", `{"status":"dead","destination":"audit","force":true}`), http.StatusAccepted).json(t); m["count"] != 1.0 {
		t.Errorf("forced replay into a tripped destination: %v", m)
	}
}
