package admin_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/admin"
	"github.com/anyhook/anyhook/internal/store"
)

// deadEvent seeds a Stripe event whose billing delivery is dead and whose
// audit delivery is delivered; it returns the event and the dead
// delivery's ids.
func (f *fixture) deadEvent(key string) (string, string) {
	f.t.Helper()
	id := f.seed("stripe", key, []byte(`{}`), 0)
	cs := f.claim("billing", time.Minute)
	f.finish(cs, anyhook.StatusDead, 500, nil)
	f.finish(f.claim("audit", time.Minute), anyhook.StatusDelivered, 200, nil)
	return id, cs[0].Delivery.ID
}

func actionsOf(t *testing.T, ev map[string]any) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, a := range ev["actions"].([]any) {
		out = append(out, a.(map[string]any))
	}
	return out
}

func deliveryOf(ev map[string]any, id string) map[string]any {
	for _, d := range ev["deliveries"].([]any) {
		if d := d.(map[string]any); d["id"] == id {
			return d
		}
	}
	return nil
}

// TestReplayEmptiesTheDeadQueue: a replay takes the dead delivery it
// supersedes out of the dead queue (resolved, replayed by the new one),
// records who, when and why on the event, and a bulk replay of the dead
// deliveries run twice replays each once.
func TestReplayEmptiesTheDeadQueue(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ev1, dead1 := f.deadEvent("evt_1")
	_, dead2 := f.deadEvent("evt_2")
	if got := items(t, f.mustStatus(f.do("GET", "/api/deliveries?status=dead", ""), http.StatusOK)); len(got) != 2 {
		t.Fatalf("dead queue %v", got)
	}

	r := f.mustStatus(f.do("POST", "/api/events/"+ev1+"/replay", `{"destination":"billing","reason":"billing fixed its TLS certificate"}`), http.StatusAccepted).json(t)
	replay := r["deliveries"].([]any)[0].(map[string]any)["id"].(string)
	ev := f.mustStatus(f.do("GET", "/api/events/"+ev1, ""), http.StatusOK).json(t)
	d := deliveryOf(ev, dead1)
	res, _ := d["resolution"].(map[string]any)
	if d["status"] != "resolved" || res == nil || res["kind"] != "replayed" || res["by"] != "admin" ||
		res["reason"] != "billing fixed its TLS certificate" || res["replay_delivery_id"] != replay || res["at"] == "" {
		t.Errorf("the dead delivery after a replay: %v", d)
	}
	if deliveryOf(ev, replay)["resolution"] != nil {
		t.Errorf("the replay delivery has a resolution: %v", deliveryOf(ev, replay))
	}
	acts := actionsOf(t, ev)
	if len(acts) != 1 || acts[0]["action"] != "replay" || acts[0]["delivery_id"] != replay || acts[0]["destination"] != "billing" ||
		acts[0]["actor"] != "admin" || acts[0]["reason"] != "billing fixed its TLS certificate" || acts[0]["at"] == "" ||
		len(acts[0]["resolved"].([]any)) != 1 || acts[0]["resolved"].([]any)[0] != dead1 {
		t.Errorf("actions %v", acts)
	}
	if got := items(t, f.mustStatus(f.do("GET", "/api/deliveries?status=resolved", ""), http.StatusOK)); len(got) != 1 || got[0]["id"] != dead1 {
		t.Errorf("?status=resolved = %v", got)
	}

	// Bulk: the other dead delivery, once however often it is asked.
	if n := f.mustStatus(f.do("POST", "/api/replay", `{"status":"dead","dry_run":true}`), http.StatusOK).json(t)["count"]; n != 1.0 {
		t.Errorf("dry run counts %v, want 1 (the replayed one left the dead queue)", n)
	}
	if n := f.mustStatus(f.do("POST", "/api/replay", `{"status":"dead","reason":"after the outage","force":true}`), http.StatusAccepted).json(t)["count"]; n != 1.0 {
		t.Errorf("bulk replay count %v, want 1", n)
	}
	if n := f.mustStatus(f.do("POST", "/api/replay", `{"status":"dead"}`), http.StatusAccepted).json(t)["count"]; n != 0.0 {
		t.Errorf("bulk replay again: count %v, want 0", n)
	}
	if got := items(t, f.mustStatus(f.do("GET", "/api/deliveries?status=dead", ""), http.StatusOK)); len(got) != 0 {
		t.Errorf("dead queue after the replays: %v", got)
	}
	dests := f.mustStatus(f.do("GET", "/api/destinations", ""), http.StatusOK).json(t)
	if c := dests["counts"].(map[string]any); c["dead"] != nil || c["resolved"] != 2.0 {
		t.Errorf("counts %v, want 2 resolved and no dead", c)
	}
	ev2 := f.mustStatus(f.do("GET", "/api/deliveries?status=resolved", ""), http.StatusOK)
	for _, it := range items(t, ev2) {
		if it["id"] == dead2 && it["resolution"].(map[string]any)["reason"] != "after the outage" {
			t.Errorf("bulk-replayed delivery %v", it)
		}
	}
}

// TestResolveRecordsWhoAndWhy: a resolve records its actor and reason on
// the delivery and in the event's actions; the dashboard's in-process
// calls name its session; a reason that is not one short line is refused.
func TestResolveRecordsWhoAndWhy(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ev1, dead1 := f.deadEvent("evt_1")
	d := f.mustStatus(f.do("POST", "/api/deliveries/"+dead1+"/resolve", `{"action":"discard","reason":"test event, never mind"}`), http.StatusOK).json(t)
	res := d["resolution"].(map[string]any)
	if d["status"] != "resolved" || res["kind"] != "discarded" || res["by"] != "admin" || res["reason"] != "test event, never mind" ||
		!strings.Contains(d["note"].(string), "discarded by admin") {
		t.Errorf("discard %v", d)
	}

	// In-process, on behalf of a dashboard session.
	ev2, dead2 := f.deadEvent("evt_2")
	api := admin.New(admin.Options{Store: f.store, Token: token, Sources: sources})
	req := httptest.NewRequestWithContext(admin.WithActor(t.Context(), "dashboard session 0a1b2c3d"), "POST",
		"/api/deliveries/"+dead2+"/resolve", strings.NewReader(`{"action":"mark_delivered","reason":"the charge went through"}`))
	req.Header.Set("Authorization", "Bearer "+token)
	rec := httptest.NewRecorder()
	api.Handler().ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		t.Fatalf("in-process resolve: %d %s", rec.Code, rec.Body)
	}
	ev := f.mustStatus(f.do("GET", "/api/events/"+ev2, ""), http.StatusOK).json(t)
	got := deliveryOf(ev, dead2)
	if got["status"] != "delivered" || got["resolution"].(map[string]any)["kind"] != "marked_delivered" ||
		got["resolution"].(map[string]any)["by"] != "dashboard session 0a1b2c3d" {
		t.Errorf("marked delivery %v", got)
	}
	acts := actionsOf(t, ev)
	if len(acts) != 1 || acts[0]["action"] != "mark_delivered" || acts[0]["actor"] != "dashboard session 0a1b2c3d" ||
		acts[0]["reason"] != "the charge went through" || acts[0]["delivery_id"] != dead2 {
		t.Errorf("actions %v", acts)
	}
	// A header cannot claim to be someone else: only the context can. The
	// admin token acts as the token named admin.
	_, dead3 := f.deadEvent("evt_3")
	r := f.doAuth("POST", "/api/deliveries/"+dead3+"/resolve", `{"action":"resend"}`, "Bearer "+token)
	if r.status != http.StatusOK || !strings.Contains(r.json(t)["note"].(string), "resent by admin") {
		t.Errorf("resend %d %s", r.status, r.body)
	}

	for _, body := range []string{
		`{"action":"discard","reason":"` + strings.Repeat("x", 1001) + `"}`,
		`{"action":"discard","reason":"two\nlines"}`,
	} {
		if r := f.do("POST", "/api/deliveries/"+dead1+"/resolve", body); r.status != 400 || r.errCode(t) != "invalid_parameter" ||
			!strings.HasPrefix(r.json(t)["error"].(map[string]any)["message"].(string), "reason: ") {
			t.Errorf("%.40s…: %d %s", body, r.status, r.body)
		}
	}
	if r := f.do("POST", "/api/events/"+ev1+"/replay", `{"reason":"`+strings.Repeat("x", 1001)+`"}`); r.status != 400 {
		t.Errorf("replay with a long reason: %d", r.status)
	}
	if r := f.do("POST", "/api/replay", `{"status":"dead","reason":"a\u0000b"}`); r.status != 400 {
		t.Errorf("bulk replay with a control character: %d", r.status)
	}
}

// TestPausedInTheAPI: while a destination is paused its waiting deliveries
// are paused in lists, filters, counts and on the event, with their due
// time; resume makes them pending.
func TestPausedInTheAPI(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ev := f.seed("stripe", "evt_1", []byte(`{}`), 0)
	f.mustStatus(f.do("POST", "/api/destinations/billing/pause", ""), http.StatusOK)
	for query, want := range map[string]string{"status=paused": "billing", "status=pending": "audit"} {
		got := items(t, f.mustStatus(f.do("GET", "/api/deliveries?"+query, ""), http.StatusOK))
		if len(got) != 1 || got[0]["destination"] != want || got[0]["next_attempt_at"] == nil {
			t.Errorf("?%s = %v, want %s's with its due time", query, got, want)
		}
	}
	if got := items(t, f.mustStatus(f.do("GET", "/api/events?status=paused", ""), http.StatusOK)); len(got) != 1 || got[0]["id"] != ev {
		t.Errorf("events ?status=paused = %v", got)
	}
	m := f.mustStatus(f.do("GET", "/api/events/"+ev, ""), http.StatusOK).json(t)
	for _, d := range m["deliveries"].([]any) {
		d := d.(map[string]any)
		if want := map[string]string{"billing": "paused", "audit": "pending"}[d["destination"].(string)]; d["status"] != want {
			t.Errorf("%s is %v, want %s", d["destination"], d["status"], want)
		}
	}
	if c := f.mustStatus(f.do("GET", "/api/destinations", ""), http.StatusOK).json(t)["counts"].(map[string]any); c["paused"] != 1.0 || c["pending"] != 1.0 {
		t.Errorf("counts %v", c)
	}
	f.mustStatus(f.do("POST", "/api/destinations/billing/resume", ""), http.StatusOK)
	if got := items(t, f.mustStatus(f.do("GET", "/api/deliveries?status=paused", ""), http.StatusOK)); len(got) != 0 {
		t.Errorf("paused after resume: %v", got)
	}
}

// TestLostAttemptTime: the attempt a crash lost shows when it was sent
// (its claim), says its outcome is unknown, and has no duration.
func TestLostAttemptTime(t *testing.T) {
	t.Parallel()
	f := setup(t)
	ev := f.seed("stripe", "evt_1", []byte(`{}`), 0)
	cs := f.claim("billing", -time.Second)
	if _, err := f.store.Rescue(t.Context(), func(string) (store.StaleRule, bool) { return store.StaleRule{Policy: anyhook.Hold}, true }); err != nil {
		t.Fatal(err)
	}
	m := f.mustStatus(f.do("GET", "/api/events/"+ev, ""), http.StatusOK).json(t)
	d := deliveryOf(m, cs[0].Delivery.ID)
	a := d["attempts"].([]any)[0].(map[string]any)
	started, _ := time.Parse(time.RFC3339Nano, a["started_at"].(string))
	if !started.Equal(cs[0].Delivery.ClaimedAt) || a["outcome_unknown"] != true || a["duration_ms"] != 0.0 || d["claimed_at"] != a["started_at"] {
		t.Errorf("lost attempt %v (delivery claimed at %v), want started at the claim %v", a, d["claimed_at"], cs[0].Delivery.ClaimedAt)
	}
}
