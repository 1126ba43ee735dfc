package admin_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/ledger"
	"github.com/anyhook/anyhook/internal/store"
)

func TestListEventsPaging(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var ids []string
	for i := range 5 {
		ids = append(ids, f.seed("stripe", "evt_"+string(rune('a'+i)), []byte(`{"n":1}`), time.Duration(i)*time.Minute))
	}
	var got []string
	cursor, pages := "", 0
	for {
		r := f.mustStatus(f.do("GET", "/api/events?limit=2&cursor="+url.QueryEscape(cursor), ""), http.StatusOK)
		for _, it := range items(t, r) {
			got = append(got, it["id"].(string))
			req := it["request"].(map[string]any)
			if _, ok := req["body"]; ok {
				t.Errorf("list item carries the body: %v", req)
			}
			if req["body_size"].(float64) != 7 {
				t.Errorf("body_size %v", req["body_size"])
			}
			if _, ok := it["deliveries"]; ok {
				t.Errorf("list item carries deliveries")
			}
		}
		pages++
		if cursor = nextCursor(t, r); cursor == "" {
			break
		}
	}
	if pages != 3 {
		t.Errorf("%d pages, want 3", pages)
	}
	want := []string{ids[4], ids[3], ids[2], ids[1], ids[0]} // newest first
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("got %v\nwant %v", got, want)
	}
}

func TestListEventsFilters(t *testing.T) {
	t.Parallel()
	f := setup(t)
	s1 := f.seed("stripe", "evt_1", []byte(`{}`), 0)
	s2 := f.seed("stripe", "evt_2", []byte(`{}`), time.Hour)
	g1 := f.seed("github", "gh_1", []byte(`{}`), 2*time.Hour)
	f.finish(f.claim("ci", time.Minute), anyhook.StatusDead, 500, nil)

	for _, tc := range []struct {
		query string
		want  []string
	}{
		{"", []string{g1, s2, s1}},
		{"source=stripe", []string{s2, s1}},
		{"q=evt_1", []string{s1}},
		{"status=dead", []string{g1}},
		{"status=pending", []string{s2, s1}},
		{"since=" + clock.Add(time.Hour).Format(time.RFC3339), []string{g1, s2}},
		{"until=" + clock.Add(time.Hour).Format(time.RFC3339), []string{s1}},
		{"since=" + clock.Format(time.RFC3339) + "&until=" + clock.Add(90*time.Minute).Format(time.RFC3339Nano), []string{s2, s1}},
		{"source=nosuch", nil},
	} {
		r := f.mustStatus(f.do("GET", "/api/events?"+tc.query, ""), http.StatusOK)
		var got []string
		for _, it := range items(t, r) {
			got = append(got, it["id"].(string))
		}
		if strings.Join(got, ",") != strings.Join(tc.want, ",") {
			t.Errorf("%s: got %v, want %v", tc.query, got, tc.want)
		}
	}
}

func TestBadQuery(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for _, tc := range []struct{ path, param string }{
		{"/api/events?limit=abc", "limit"},
		{"/api/events?limit=0", "limit"},
		{"/api/events?limit=501", "limit"},
		{"/api/events?since=yesterday", "since"},
		{"/api/events?until=2026-01-02", "until"},
		{"/api/events?status=bogus", "status"},
		{"/api/events?statu=dead", "statu"},
		{"/api/events?since=2026-01-02T00:00:00Z&until=2026-01-01T00:00:00Z", "until"},
		{"/api/deliveries?limit=-1", "limit"},
		{"/api/deliveries?status=lost", "status"},
		{"/api/deliveries?since=now", "since"},
		{"/api/deliveries?dest=billing", "dest"},
		// Given twice, only the first would filter (docs/operations.md: "as
		// in the API, a list refuses ... one given twice").
		{"/api/events?status=dead&status=held", "status"},
		{"/api/deliveries?source=github&source=github", "source"},
		{"/api/events?limit=5&limit=500", "limit"},
	} {
		r := f.mustStatus(f.do("GET", tc.path, ""), http.StatusBadRequest)
		if code := r.errCode(t); code != "invalid_parameter" {
			t.Errorf("%s: code %q", tc.path, code)
		}
		msg := r.json(t)["error"].(map[string]any)["message"].(string)
		if !strings.HasPrefix(msg, tc.param+":") {
			t.Errorf("%s: message %q does not name %s", tc.path, msg, tc.param)
		}
	}
}

func TestGetEvent(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.seed("stripe", "evt_1", []byte(`{"id":"evt_1"}`), 0)
	f.finish(f.claim("billing", time.Minute), anyhook.StatusDelivered, 200, []byte("ok"))

	r := f.mustStatus(f.do("GET", "/api/events/"+id, ""), http.StatusOK)
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q", ct)
	}
	ev := r.json(t)
	for k, want := range map[string]any{
		"id": id, "source": "stripe", "dedup_key": "evt_1", "received_at": "2026-03-01T12:00:00Z",
		"duplicates": 0.0, "stale": false, "object": "", "version": "",
	} {
		if ev[k] != want {
			t.Errorf("%s = %#v, want %#v", k, ev[k], want)
		}
	}
	req := ev["request"].(map[string]any)
	if req["method"] != "POST" || req["path"] != "/webhooks/stripe" || req["body"] != `{"id":"evt_1"}` || req["body_encoding"] != "utf-8" {
		t.Errorf("request %v", req)
	}
	if h := req["headers"].(map[string]any); len(h["X-Test"].([]any)) != 2 {
		t.Errorf("headers %v", h)
	}
	ds := ev["deliveries"].([]any)
	if len(ds) != 2 {
		t.Fatalf("%d deliveries", len(ds))
	}
	byDest := map[string]map[string]any{}
	for _, d := range ds {
		d := d.(map[string]any)
		byDest[d["destination"].(string)] = d
	}
	billing, audit := byDest["billing"], byDest["audit"]
	if billing["status"] != "delivered" || billing["event_id"] != id || billing["replay"] != false ||
		billing["attempt_count"] != 1.0 || billing["next_attempt_at"] != nil {
		t.Errorf("billing %v", billing)
	}
	for _, k := range []string{"id", "created_at", "updated_at", "note", "stale"} {
		if _, ok := billing[k]; !ok {
			t.Errorf("delivery lacks %s", k)
		}
	}
	atts := billing["attempts"].([]any)
	if len(atts) != 1 {
		t.Fatalf("attempts %v", atts)
	}
	a := atts[0].(map[string]any)
	if a["number"] != 1.0 || a["started_at"] != "2026-03-01T12:00:00Z" || a["duration_ms"] != 12.5 ||
		a["status_code"] != 200.0 || a["error"] != "" || a["response_body"] != "ok" || a["response_body_encoding"] != "utf-8" {
		t.Errorf("attempt %v", a)
	}
	if audit["status"] != "pending" || audit["next_attempt_at"] == nil {
		t.Errorf("audit %v", audit)
	}
	if _, err := time.Parse(time.RFC3339Nano, audit["next_attempt_at"].(string)); err != nil {
		t.Errorf("next_attempt_at: %v", err)
	}
	if atts := audit["attempts"].([]any); len(atts) != 0 {
		t.Errorf("audit attempts %v", atts)
	}

	r = f.mustStatus(f.do("GET", "/api/events/nosuch", ""), http.StatusNotFound)
	if code := r.errCode(t); code != "not_found" {
		t.Errorf("code %q", code)
	}
}

func TestBinaryBodyIsBase64(t *testing.T) {
	t.Parallel()
	f := setup(t)
	body := []byte{0xff, 0xfe, 0x00, 'h', 'i'}
	id := f.seed("github", "", body, 0)
	resp := []byte{0x80, 0x81}
	f.finish(f.claim("ci", time.Minute), anyhook.StatusDead, 502, resp)

	ev := f.mustStatus(f.do("GET", "/api/events/"+id, ""), http.StatusOK).json(t)
	req := ev["request"].(map[string]any)
	if req["body_encoding"] != "base64" || req["body"] != base64.StdEncoding.EncodeToString(body) {
		t.Errorf("request %v", req)
	}
	a := ev["deliveries"].([]any)[0].(map[string]any)["attempts"].([]any)[0].(map[string]any)
	if a["response_body_encoding"] != "base64" || a["response_body"] != base64.StdEncoding.EncodeToString(resp) {
		t.Errorf("attempt %v", a)
	}
	if a["status_code"] != 502.0 || a["error"] == "" {
		t.Errorf("attempt %v", a)
	}
}

func TestReplayEvent(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.seed("stripe", "evt_1", []byte(`{}`), 0)

	countReplays := func() map[string]int {
		n := map[string]int{}
		ev := f.mustStatus(f.do("GET", "/api/events/"+id, ""), http.StatusOK).json(t)
		for _, d := range ev["deliveries"].([]any) {
			d := d.(map[string]any)
			if d["replay"] == true {
				if d["status"] != "pending" || d["attempt_count"] != 0.0 {
					t.Errorf("replay delivery %v", d)
				}
				n[d["destination"].(string)]++
			}
		}
		return n
	}

	// Omitted body, {} and an empty destination all mean every destination of the source.
	for i, body := range []string{"", "{}", `{"destination":""}`} {
		r := f.mustStatus(f.do("POST", "/api/events/"+id+"/replay", body), http.StatusAccepted)
		m := r.json(t)
		if m["event_id"] != id {
			t.Errorf("event_id %v", m["event_id"])
		}
		ds := m["deliveries"].([]any)
		if len(ds) != 2 {
			t.Fatalf("body %q: %d deliveries", body, len(ds))
		}
		for _, d := range ds {
			if d := d.(map[string]any); d["replay"] != true || d["event_id"] != id || d["status"] != "pending" {
				t.Errorf("delivery %v", d)
			}
		}
		if n := countReplays(); n["billing"] != i+1 || n["audit"] != i+1 {
			t.Errorf("after %d replays: %v", i+1, n)
		}
	}

	r := f.mustStatus(f.do("POST", "/api/events/"+id+"/replay", `{"destination":"billing"}`), http.StatusAccepted)
	if ds := r.json(t)["deliveries"].([]any); len(ds) != 1 || ds[0].(map[string]any)["destination"] != "billing" {
		t.Errorf("deliveries %v", ds)
	}
	if n := countReplays(); n["billing"] != 4 || n["audit"] != 3 {
		t.Errorf("replays %v", n)
	}
	// The replayed delivery is claimable like any other.
	if cs := f.claim("billing", time.Minute); len(cs) != 5 {
		t.Errorf("claimed %d billing deliveries, want 5", len(cs))
	}

	for _, tc := range []struct {
		path, body string
		status     int
		code       string
	}{
		{"/api/events/" + id + "/replay", `{"destination":"nosuch"}`, 400, "invalid_parameter"},
		{"/api/events/" + id + "/replay", `{"destination":"ci"}`, 400, "invalid_parameter"}, // not a destination of stripe
		{"/api/events/" + id + "/replay", `{"dest":"billing"}`, 400, "invalid_json"},
		{"/api/events/" + id + "/replay", `{"destination":1}`, 400, "invalid_json"},
		{"/api/events/" + id + "/replay", `{} {}`, 400, "invalid_json"},
		{"/api/events/" + id + "/replay", `[`, 400, "invalid_json"},
		{"/api/events/nosuch/replay", ``, 404, "not_found"},
	} {
		r := f.do("POST", tc.path, tc.body)
		if r.status != tc.status || r.errCode(t) != tc.code {
			t.Errorf("%s %s: %d %s", tc.path, tc.body, r.status, r.body)
		}
	}
}

func TestRequestBodyTooLarge(t *testing.T) {
	t.Parallel()
	f := setup(t)
	id := f.seed("stripe", "evt_1", []byte(`{}`), 0)
	big := `{"destination":"` + strings.Repeat("a", 2<<20) + `"}`
	r := f.mustStatus(f.do("POST", "/api/events/"+id+"/replay", big), http.StatusRequestEntityTooLarge)
	if code := r.errCode(t); code != "too_large" {
		t.Errorf("code %q", code)
	}
}

func TestBulkReplay(t *testing.T) {
	t.Parallel()
	f := setup(t)
	for i := range 3 {
		f.seed("stripe", "evt_"+string(rune('a'+i)), []byte(`{}`), 0)
	}
	f.seed("github", "gh_1", []byte(`{}`), 0)
	f.finish(f.claim("billing", time.Minute), anyhook.StatusDead, 500, nil) // 3 dead
	f.finish(f.claim("ci", time.Minute), anyhook.StatusDead, 500, nil)      // 1 dead, other source

	total := func() int {
		n := 0
		r := f.mustStatus(f.do("GET", "/api/deliveries?limit=500", ""), http.StatusOK)
		n += len(items(t, r))
		return n
	}
	before := total()

	r := f.mustStatus(f.do("POST", "/api/replay", `{"source":"stripe","status":"dead","dry_run":true}`), http.StatusOK)
	if m := r.json(t); m["count"] != 3.0 || m["dry_run"] != true {
		t.Errorf("dry run %v", m)
	}
	if after := total(); after != before {
		t.Errorf("dry run created deliveries: %d -> %d", before, after)
	}

	// billing's latest attempt failed: the replay is refused unless
	// forced (TestBulkReplayIntoTroubledDestination).
	r = f.mustStatus(f.do("POST", "/api/replay", `{"source":"stripe","status":"dead","force":true}`), http.StatusAccepted)
	if m := r.json(t); m["count"] != 3.0 {
		t.Errorf("replay %v", m)
	}
	if after := total(); after != before+3 {
		t.Errorf("%d deliveries after replay, want %d", after, before+3)
	}
	cs := f.claim("billing", time.Minute)
	if len(cs) != 3 {
		t.Fatalf("claimed %d", len(cs))
	}
	for _, c := range cs {
		if !c.Delivery.Replay {
			t.Errorf("claimed a non-replay delivery %+v", c.Delivery)
		}
	}

	// Time bounds and destination filter.
	since := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	r = f.mustStatus(f.do("POST", "/api/replay", `{"destination":"ci","since":"`+since+`","dry_run":true}`), http.StatusOK)
	if m := r.json(t); m["count"] != 1.0 {
		t.Errorf("ci dry run %v", m)
	}

	for _, body := range []string{
		``, `{}`, `{"dry_run":true}`, `{"status":"nope"}`, `{"since":"yesterday","source":"stripe"}`,
		`{"destination":"nosuch"}`, `{"source":"stripe","limit":3}`, `{"source":5}`,
		`{"source":"stripe","since":"2026-01-02T00:00:00Z","until":"2026-01-01T00:00:00Z"}`,
	} {
		r := f.do("POST", "/api/replay", body)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s", body, r.status, r.body)
		}
	}
}

// Dry run pages through more than one page of the store.
func TestBulkReplayDryRunPages(t *testing.T) {
	t.Parallel()
	f := setup(t)
	var evs []store.NewEvent
	for range 260 { // two deliveries each: 520 > one page of 500
		evs = append(evs, store.NewEvent{
			Event:        anyhook.Event{ID: store.NewID(), Source: "stripe", ReceivedAt: clock, Method: "POST", Path: "/webhooks/stripe"},
			Destinations: sources["stripe"],
		})
	}
	if _, err := f.store.Ingest(t.Context(), evs); err != nil {
		t.Fatal(err)
	}
	f.deliverAll()
	r := f.mustStatus(f.do("POST", "/api/replay", `{"source":"stripe","dry_run":true}`), http.StatusOK)
	if m := r.json(t); m["count"] != 520.0 {
		t.Errorf("dry run %v", m)
	}
}

// TestPrunedEventRefused: once retention emptied an event's body, replay
// and bulk replay answer 409 body_pruned, create nothing, and the event
// shows body_pruned; an event that keeps its body replays as usual. (Only
// a discarded delivery lets its body go, and a discarded one is resolved:
// nothing to resend.)
func TestPrunedEventRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	gone := f.seed("stripe", "evt_gone", []byte(`{"id":"evt_gone"}`), 0)
	f.finish(f.claim("billing", time.Minute), anyhook.StatusDead, 500, nil)
	f.finish(f.claim("audit", time.Minute), anyhook.StatusDelivered, 200, nil)
	ev, err := f.store.Event(t.Context(), gone)
	if err != nil {
		t.Fatal(err)
	}
	var deadID string
	for _, d := range ev.Deliveries {
		if d.Status == anyhook.StatusDead {
			deadID = d.ID
		}
	}
	// The dead delivery keeps the body from retention until it is discarded.
	if _, err := ledger.NewSequencer(f.store, ledger.SequencerOptions{}).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, err := ledger.Prune(t.Context(), f.store, clock.Add(time.Hour)); err != nil || n != 0 {
		t.Fatalf("Prune with a dead delivery = %d, %v; want 0", n, err)
	}
	f.mustStatus(f.do("POST", "/api/deliveries/"+deadID+"/resolve", `{"action":"discard"}`), http.StatusOK)
	if n, err := ledger.Prune(t.Context(), f.store, clock.Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want 1", n, err)
	}
	kept := f.seed("stripe", "evt_kept", []byte(`{"id":"evt_kept"}`), time.Hour)
	f.deliverAll()

	for _, tc := range []struct{ path, body string }{
		{"/api/events/" + gone + "/replay", ``},
		{"/api/events/" + gone + "/replay", `{"destination":"billing"}`},
	} {
		r := f.do("POST", tc.path, tc.body)
		if r.status != http.StatusConflict || r.errCode(t) != "body_pruned" {
			t.Errorf("POST %s %s: %d %s; want 409 body_pruned", tc.path, tc.body, r.status, r.body)
			continue
		}
		if msg := r.json(t)["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "pruned by retention (log.retention)") || !strings.Contains(msg, gone) {
			t.Errorf("POST %s: message %q does not say why", tc.path, msg)
		}
	}
	// A bulk replay skips the pruned event and says so (its discarded
	// delivery is not even selected: resolved), and replays the rest;
	// its dry run says the same.
	for _, body := range []string{`{"source":"stripe","dry_run":true}`, `{"source":"stripe","force":true}`} {
		r := f.do("POST", "/api/replay", body)
		var out struct {
			Count   int
			Skipped []struct {
				EventID string `json:"event_id"`
				Reason  string
			}
		}
		if err := json.Unmarshal(r.body, &out); err != nil || (r.status != http.StatusAccepted && r.status != http.StatusOK) ||
			out.Count != 2 || len(out.Skipped) != 1 || out.Skipped[0].EventID != gone || out.Skipped[0].Reason != "pruned" {
			t.Errorf("POST /api/replay %s: %d %s; want 2 replayed (evt_kept to billing and audit), %s skipped as pruned", body, r.status, r.body, gone)
		}
	}
	if r := f.do("POST", "/api/replay", `{"status":"resolved"}`); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "never selects resolved") {
		t.Errorf("bulk replay of resolved deliveries: %d %s; want 400 saying why", r.status, r.body)
	}
	m := f.mustStatus(f.do("GET", "/api/events/"+gone, ""), http.StatusOK).json(t)
	req := m["request"].(map[string]any)
	if req["body_pruned"] != true || req["body"] != "" || len(m["deliveries"].([]any)) != 2 {
		t.Errorf("pruned event: request %v, deliveries %v", req, m["deliveries"])
	}
	if m := f.mustStatus(f.do("GET", "/api/events/"+kept, ""), http.StatusOK).json(t); m["request"].(map[string]any)["body_pruned"] != nil {
		t.Errorf("an event with its body shows body_pruned: %v", m["request"])
	}
	f.mustStatus(f.do("POST", "/api/events/"+kept+"/replay", `{"destination":"billing"}`), http.StatusAccepted)
	// The discarded delivery is resolved for good.
	for _, action := range []string{"resend", "mark_delivered", "discard"} {
		if r := f.do("POST", "/api/deliveries/"+deadID+"/resolve", `{"action":"`+action+`"}`); r.status != http.StatusBadRequest || r.errCode(t) != "invalid" {
			t.Errorf("%s of a discarded delivery: %d %s; want 400 invalid", action, r.status, r.body)
		}
	}
}

// TestEventsSearchAnyID: GET /api/events?q= finds an event by whichever
// id a person pastes: the event id (X-AnyHook-Delivery), a delivery id, or
// the provider's event id; the other filters still apply, and an id that
// is none of them finds nothing.
func TestEventsSearchAnyID(t *testing.T) {
	t.Parallel()
	f := setup(t)
	want := f.seed("stripe", "evt_paste", []byte(`{}`), 0)
	other := f.seed("stripe", "evt_other", []byte(`{}`), time.Minute)
	f.seed("github", "1:guid", []byte(`{}`), 2*time.Minute)
	// An older event: without one, a window reaching past the first
	// event is complete (store.SearchPrefix).
	f.seed("github", "2:older", []byte(`{}`), -3*time.Hour)
	ev, err := f.store.Event(t.Context(), want)
	if err != nil {
		t.Fatal(err)
	}
	ids := func(path string) []string {
		t.Helper()
		var out struct{ Items []struct{ ID string } }
		if err := json.Unmarshal(f.mustStatus(f.do("GET", path, ""), http.StatusOK).body, &out); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, it := range out.Items {
			got = append(got, it.ID)
		}
		return got
	}
	for _, q := range []string{want, ev.Deliveries[0].ID, ev.Deliveries[1].ID, "evt_paste"} {
		if got := ids("/api/events?q=" + url.QueryEscape(q)); len(got) != 1 || got[0] != want {
			t.Errorf("q=%s: %v; want [%s]", q, got, want)
		}
		if got := ids("/api/events?source=stripe&q=" + url.QueryEscape(q)); len(got) != 1 || got[0] != want {
			t.Errorf("source=stripe&q=%s: %v; want [%s]", q, got, want)
		}
		if got := ids("/api/events?source=github&q=" + url.QueryEscape(q)); len(got) != 0 {
			t.Errorf("source=github&q=%s: %v; want none (the event is stripe's)", q, got)
		}
		if got := ids("/api/events?status=dead&q=" + url.QueryEscape(q)); len(got) != 0 {
			t.Errorf("status=dead&q=%s: %v; want none (its deliveries are pending)", q, got)
		}
	}
	if got := ids("/api/events?q=evt_nowhere"); len(got) != 0 {
		t.Errorf("q=evt_nowhere: %v", got)
	}

	// A prefix of an id (the event's, a delivery's, the provider's) is
	// looked for among the events received in the hour before until
	// (before now without one), and the answer says how far back it looked.
	type searched struct {
		Items    []struct{ ID string }
		Searched *struct {
			Complete bool       `json:"complete"`
			BackTo   *time.Time `json:"back_to"`
		}
	}
	search := func(q, until string) searched {
		t.Helper()
		var out searched
		path := "/api/events?q=" + url.QueryEscape(q) + "&until=" + url.QueryEscape(until)
		if err := json.Unmarshal(f.mustStatus(f.do("GET", path, ""), http.StatusOK).body, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	until := clock.Add(time.Hour).Format(time.RFC3339)
	for q, want := range map[string]string{other[:len(other)-1]: other, "evt_pas": want, ev.Deliveries[1].ID[:30]: want} {
		out := search(q, until)
		if len(out.Items) != 1 || out.Items[0].ID != want || out.Searched == nil || out.Searched.Complete ||
			out.Searched.BackTo == nil || !out.Searched.BackTo.Equal(clock) {
			t.Errorf("q=%s (a prefix), until %s: %+v; want [%s], searched back to %v", q, until, out, want, clock)
		}
	}
	// Further back than the window reaches, it finds nothing and says so.
	if out := search("evt_pas", clock.Add(-time.Second).Format(time.RFC3339)); len(out.Items) != 0 || out.Searched == nil || out.Searched.Complete {
		t.Errorf("q=evt_pas before the event arrived: %+v", out)
	}
	// An exact match needs no window.
	if out := search("evt_paste", until); out.Searched != nil {
		t.Errorf("an exact provider id says it searched %+v", out.Searched)
	}
}

// TestEventsSearchBodies: GET /api/events?body= and ?filter= look inside
// the bodies of the events in the bounded window, newest first, and say
// how far back they looked; a bad expression is refused naming its error.
func TestEventsSearchBodies(t *testing.T) {
	t.Parallel()
	f := setup(t)
	a := f.seed("stripe", "evt_a", []byte(`{"customer":"cus_123","amount":500}`), 0)
	b := f.seed("stripe", "evt_b", []byte(`{"customer":"cus_999","amount":700}`), time.Minute)
	c := f.seed("github", "1:c", []byte(`{"note":"for cus_123","amount":900}`), 2*time.Minute)
	// An older event, outside the window: the searches below are not
	// complete (with none, they would be: store.SearchBodies).
	f.seed("github", "2:older", []byte(`{}`), -25*time.Hour)
	type answer struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
		NextCursor string `json:"next_cursor"`
		Searched   *struct {
			Complete bool       `json:"complete"`
			BackTo   *time.Time `json:"back_to"`
		} `json:"searched"`
	}
	until := clock.Add(10 * time.Minute).Format(time.RFC3339)
	search := func(params string) answer {
		t.Helper()
		var out answer
		if err := json.Unmarshal(f.mustStatus(f.do("GET", "/api/events?until="+url.QueryEscape(until)+"&"+params, ""), http.StatusOK).body, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	ids := func(out answer) []string {
		var got []string
		for _, it := range out.Items {
			got = append(got, it.ID)
		}
		return got
	}
	window := clock.Add(10 * time.Minute).Add(-store.BodyWindow)
	for params, want := range map[string][]string{
		"body=cus_123":                                   {c, a},
		"body=cus_123&source=stripe":                     {a},
		"filter=" + url.QueryEscape(`body.amount > 600`): {c, b},
		"filter=" + url.QueryEscape(`source == "stripe" && body.customer.startsWith("cus_")`):   {b, a},
		"body=cus_&filter=" + url.QueryEscape(`headers["x-test"] == "a" && body.amount >= 800`): {c},
		"body=nowhere": nil,
	} {
		out := search(params)
		if got := ids(out); !slices.Equal(got, want) || out.Searched == nil || out.Searched.Complete ||
			out.Searched.BackTo == nil || !out.Searched.BackTo.Equal(window) || out.NextCursor != "" {
			t.Errorf("%s: %v %+v; want %v, searched back to %v", params, got, out.Searched, want, window)
		}
	}
	// A limit stops the search at the last match's receive time.
	out := search("body=cus_123&limit=1")
	if got := ids(out); !slices.Equal(got, []string{c}) || out.Searched == nil || out.Searched.BackTo == nil || !out.Searched.BackTo.Equal(clock.Add(2*time.Minute)) {
		t.Errorf("limit=1: %v %+v; want [%s] back to %v", got, out.Searched, c, clock.Add(2*time.Minute))
	}
	// A window of the caller's, within the bounded one, is complete.
	if out := search("body=cus_123&since=" + url.QueryEscape(clock.Format(time.RFC3339))); out.Searched == nil || !out.Searched.Complete || len(out.Items) != 2 {
		t.Errorf("since in the window: %v %+v; want two, complete", ids(out), out.Searched)
	}
	for params, says := range map[string]string{
		"filter=" + url.QueryEscape(`body.amount >`):   "filter: invalid CEL expression: column",
		"filter=" + url.QueryEscape(`body.amount + 1`): "filter: ",
		"body=x&status=dead":                           "status: ",
		"body=x&q=evt_a":                               "q: ",
		"filter=true&cursor=abc":                       "cursor: ",
		"body=" + strings.Repeat("x", 1025):            "body: longer than 1024 bytes",
		// From q, the error names q (the parameter given) first.
		"q=" + url.QueryEscape(`filter:body.amount >`):            `"message":"q: filter: invalid CEL expression: column`,
		"q=" + url.QueryEscape("body:"+strings.Repeat("x", 1025)): `"message":"q: body: longer than 1024 bytes`,
	} {
		r := f.mustStatus(f.do("GET", "/api/events?"+params, ""), http.StatusBadRequest)
		if !strings.Contains(string(r.body), says) {
			t.Errorf("%s: %s; want it to say %q", params, r.body, says)
		}
	}
}

// TestBulkReplayByFilter: POST /api/replay takes a CEL filter over the
// events received from since to until: a dry run counts what it would
// replay, the replay creates replay deliveries of the matching events
// only; a filter without since, or one that does not compile, is refused.
func TestBulkReplayByFilter(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed("stripe", "evt_small", []byte(`{"amount":100}`), 0)
	big1 := f.seed("stripe", "evt_big1", []byte(`{"amount":5000}`), time.Minute)
	big2 := f.seed("stripe", "evt_big2", []byte(`{"amount":7000}`), 2*time.Minute)
	f.seed("stripe", "evt_late", []byte(`{"amount":9000}`), 3*time.Hour) // after until
	f.finish(f.claim("billing", time.Minute), anyhook.StatusDead, 500, nil)
	window := `"since":"` + clock.Add(-time.Minute).Format(time.RFC3339) + `","until":"` + clock.Add(time.Hour).Format(time.RFC3339) + `"`
	req := `{"filter":"body.amount > 1000","status":"dead","destination":"billing","force":true,` + window

	r := f.mustStatus(f.do("POST", "/api/replay", req+`,"dry_run":true}`), http.StatusOK)
	if m := r.json(t); m["count"] != 2.0 || m["matched_events"] != 2.0 || m["dry_run"] != true {
		t.Errorf("dry run: %v; want count 2, matched_events 2", m)
	}
	if cs := f.claim("billing", time.Minute); len(cs) != 0 {
		t.Fatalf("the dry run queued %d deliveries", len(cs))
	}
	r = f.mustStatus(f.do("POST", "/api/replay", req+`}`), http.StatusAccepted)
	if m := r.json(t); m["count"] != 2.0 {
		t.Errorf("replay: %v; want count 2", m)
	}
	cs := f.claim("billing", time.Minute)
	var got []string
	for _, c := range cs {
		if !c.Delivery.Replay {
			t.Errorf("claimed a delivery that is not a replay: %+v", c.Delivery)
		}
		got = append(got, c.Event.ID)
	}
	slices.Sort(got)
	want := []string{big1, big2}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("replayed events %v, want %v", got, want)
	}
	// A filter nothing matches replays nothing (not everything).
	r = f.mustStatus(f.do("POST", "/api/replay", `{"filter":"body.amount > 100000","status":"dead","dry_run":true,`+window+`}`), http.StatusOK)
	if m := r.json(t); m["count"] != 0.0 || m["matched_events"] != 0.0 {
		t.Errorf("a filter matching nothing: %v", m)
	}
	for body, says := range map[string]string{
		`{"filter":"body.amount > 1000","status":"dead"}`:           "since: a replay by filter needs since",
		`{"filter":"body.amount >","status":"dead",` + window + `}`: "filter: invalid CEL expression: column",
	} {
		r := f.mustStatus(f.do("POST", "/api/replay", body), http.StatusBadRequest)
		if !strings.Contains(string(r.body), says) {
			t.Errorf("%s: %s; want it to say %q", body, r.body, says)
		}
	}
}

// TestBulkReplayBySearch: POST /api/replay takes the name of a saved
// search (q=filter:…, with its source) and replays the deliveries of the
// events it finds, as a filter does; it refuses a search with filter,
// source or status (naming the conflict), an unknown name (404), and a
// saved search that is not a search inside the bodies.
func TestBulkReplayBySearch(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.seed("stripe", "evt_small", []byte(`{"amount":100}`), 0)
	big := f.seed("stripe", "evt_big", []byte(`{"amount":5000}`), time.Minute)
	f.seed("github", "gh_big", []byte(`{"amount":5000}`), time.Minute) // another source
	f.deliverAll()
	for _, s := range []string{
		`{"name":"big invoices","query":"source=stripe&q=filter%3Abody.amount+%3E+1000"}`,
		`{"name":"by id","query":"q=evt_big"}`,
	} {
		f.mustStatus(f.do("POST", "/api/searches", s), http.StatusCreated)
	}
	window := `"since":"` + clock.Add(-time.Minute).Format(time.RFC3339) + `","until":"` + clock.Add(time.Hour).Format(time.RFC3339) + `"`
	req := `{"search":"big invoices","destination":"billing","force":true,` + window
	r := f.mustStatus(f.do("POST", "/api/replay", req+`,"dry_run":true}`), http.StatusOK)
	if m := r.json(t); m["count"] != 1.0 || m["matched_events"] != 1.0 {
		t.Errorf("dry run: %v; want count 1, matched_events 1", m)
	}
	// The originals are pending; a replay is one more delivery of big.
	before := len(f.claim("billing", time.Minute))
	r = f.mustStatus(f.do("POST", "/api/replay", req+`}`), http.StatusAccepted)
	if m := r.json(t); m["count"] != 1.0 {
		t.Errorf("replay: %v; want count 1", m)
	}
	cs := f.claim("billing", time.Minute)
	if len(cs) != 1 || cs[0].Event.ID != big || !cs[0].Delivery.Replay {
		t.Errorf("after the replay claimed %d (%d before): %+v; want one replay of %s", len(cs), before, cs, big)
	}
	for body, want := range map[string]struct {
		status int
		says   string
	}{
		`{"search":"big invoices","filter":"true",` + window + `}`:   {http.StatusBadRequest, "search: a saved search selects the events itself: give search or filter, not both"},
		`{"search":"big invoices","source":"stripe",` + window + `}`: {http.StatusBadRequest, "give search or source, not both"},
		`{"search":"big invoices","status":"dead",` + window + `}`:   {http.StatusBadRequest, "give search or status, not both"},
		`{"search":"big invoices"}`:                                  {http.StatusBadRequest, "since: a replay by search needs since"},
		`{"search":"nope",` + window + `}`:                           {http.StatusNotFound, `search: no saved search is named \"nope\" (saved: big invoices, by id)`},
		`{"search":"by id",` + window + `}`:                          {http.StatusBadRequest, `does not search inside the bodies`},
	} {
		r := f.mustStatus(f.do("POST", "/api/replay", body), want.status)
		if !strings.Contains(string(r.body), want.says) {
			t.Errorf("%s: %s; want it to say %s", body, r.body, want.says)
		}
	}
}

// TestBulkReplayByFilterRefusedWhole: a bulk replay by filter matching
// more than store.MaxFilterReplay events is refused whole, dry run or
// not, and replays nothing. (The budget's other bounds, cost included,
// end the same store.SearchBodies: storetest's SearchBodies*.)
func TestBulkReplayByFilterRefusedWhole(t *testing.T) {
	t.Parallel()
	f := setup(t)
	evs := make([]store.NewEvent, store.MaxFilterReplay+1)
	for i := range evs {
		evs[i] = store.NewEvent{Event: anyhook.Event{ID: store.NewID(), Source: "github", ReceivedAt: clock.Add(time.Duration(i) * time.Millisecond),
			Method: "POST", Path: "/webhooks/github", Header: http.Header{}, Body: []byte(`{"amount":5000}`)}, Destinations: sources["github"]}
	}
	if res, err := f.store.Ingest(t.Context(), evs); err != nil || res[0].Err != nil {
		t.Fatalf("ingest: %v", err)
	}
	window := `"since":"` + clock.Add(-time.Minute).Format(time.RFC3339) + `","until":"` + clock.Add(time.Minute).Format(time.RFC3339) + `"`
	for _, dry := range []string{`"dry_run":true,`, ``} {
		r := f.mustStatus(f.do("POST", "/api/replay", `{`+dry+`"filter":"body.amount > 1000",`+window+`}`), http.StatusBadRequest)
		if says := "filter: it matches more than 5000 events"; !strings.Contains(string(r.body), says) {
			t.Errorf("%s: %s; want it to say %s", dry, r.body, says)
		}
	}
	// One pending delivery (to ci) per event ingested, no replay.
	counts, err := f.store.Counts(t.Context())
	if want := store.MaxFilterReplay + 1; err != nil || counts[anyhook.StatusPending] != want {
		t.Errorf("pending deliveries: %v, %v; want %d: a refused replay created some", counts, err, want)
	}
}
