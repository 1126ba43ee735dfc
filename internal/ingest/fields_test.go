package ingest_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/ingest"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/rejectlog"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/postgres"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
)

// fieldStore is what the tests of this file need of a store.
type fieldStore interface {
	store.Store
	store.RejectionLog
}

// openBackend opens a fresh store of backend, "sqlite" or "postgres",
// closed when t ends.
func openBackend(t testing.TB, backend string) fieldStore {
	t.Helper()
	var st fieldStore
	var err error
	if backend == "postgres" {
		st, err = postgres.Open(t.Context(), pgtest.DSN(t), postgres.Options{MaxConns: 4})
	} else {
		st, err = sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlite.Options{})
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// headerSource is a generic unsigned source keyed on a header, ordered
// by the body: any sender chooses every field.
func headerSource(t testing.TB, name string) ingest.Source {
	t.Helper()
	p, err := provider.New(provider.Settings{Provider: "generic", Signature: &provider.Signature{None: true},
		ID: "header:X-Request-Id", Ordering: &provider.Ordering{Object: "json:obj", Version: "json:ver"}})
	if err != nil {
		t.Fatal(err)
	}
	return ingest.Source{Name: name, Provider: p, MaxBody: 1 << 20, Destinations: []string{"d"}}
}

// TestUnstorableFieldsRefused sends, over real HTTP to a real handler on
// each store, the five requests PostgreSQL used to answer 503 for ever
// (SQLite 200): a NUL byte in the ordering object, one in the version,
// an id header that is not UTF-8, a 3,000-byte id and a 900 KB one. Both
// stores answer each 400 with the same reason, record it in the rejection
// log as invalid and store nothing; a genuine event and one whose query
// string is not UTF-8 (stored percent-encoded) are accepted on both.
func TestUnstorableFieldsRefused(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			st := openBackend(t, backend)
			minute := time.Now().Truncate(time.Minute)
			rl := rejectlog.New(st, rejectlog.Options{Now: func() time.Time { return minute }})
			rl.Start(t.Context())
			h := ingest.New(ingest.Options{Sources: []ingest.Source{headerSource(t, "gen")}, Recorder: st, Rejections: rl})
			mux := http.NewServeMux()
			mux.Handle("POST /webhooks/{source}", h)
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			post := func(query, id, body string) (int, string) {
				t.Helper()
				req, err := http.NewRequest("POST", srv.URL+"/webhooks/gen"+query, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("X-Request-Id", id)
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				var ans struct{ Error, ID string }
				json.NewDecoder(resp.Body).Decode(&ans)
				return resp.StatusCode, ans.Error + ans.ID
			}

			refused := []struct{ id, body, want string }{
				{"r1", `{"obj":"a\u0000b","ver":1}`, "the ordering object holds a NUL byte"},
				{"r2", `{"obj":"ok","ver":"1\u0000"}`, "the ordering version holds a NUL byte"},
				{"\xff\xfe", `{"obj":"ok","ver":1}`, "the event id is not valid UTF-8"},
				{strings.Repeat("i", 3000), `{"obj":"ok","ver":1}`, "the event id is 3000 bytes, at most 1024"},
				{strings.Repeat("k", 900<<10), `{"obj":"ok","ver":1}`, "the event id is 921600 bytes, at most 1024"},
				// Control characters, which would forge log lines and
				// drive terminals: raw in a header, escaped in JSON.
				{"a\tb", `{"obj":"ok","ver":1}`, "the event id holds a control character (U+0009)"},
				{"r3", `{"obj":"a\nb","ver":1}`, "the ordering object holds a control character (U+000A)"},
				{"r4", `{"obj":"ok","ver":"1\u001b[2J"}`, "the ordering version holds a control character (U+001B)"},
				{"r5", `{"obj":"\u202eok","ver":1}`, "the ordering object holds a control character (U+202E)"},
				{"r6", `{"obj":"a\u2028b","ver":1}`, "the ordering object holds a control character (U+2028)"},
			}
			for i, r := range refused {
				if code, msg := post("", r.id, r.body); code != http.StatusBadRequest || msg != r.want {
					t.Errorf("request %d: %d %q, want 400 %q", i+1, code, msg, r.want)
				}
			}
			code, id := post("", "ok-1", `{"obj":"ok","ver":2}`)
			if code != http.StatusOK {
				t.Fatalf("genuine event: %d %s", code, id)
			}
			code, qid := post("?a=\xff\xfe&b=é", "ok-2", `{"obj":"ok","ver":3}`)
			if code != http.StatusOK {
				t.Fatalf("query not UTF-8: %d %s", code, qid)
			}
			if ev, err := st.Event(t.Context(), qid); err != nil || ev.Path != "/webhooks/gen?a=%FF%FE&b=é" {
				t.Fatalf("stored path %q, %v; want the bytes that are not UTF-8 percent-encoded", ev.Path, err)
			}

			rl.Stop() // writes what is queued
			rs, _, err := st.ListRejections(t.Context(), store.RejectionFilter{Limit: 100})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, r := range rs {
				if r.Reason != anyhook.RejectInvalid || r.Status != 400 || r.Source != "gen" || !r.KnownSource {
					t.Errorf("rejection %+v, want invalid, 400, of gen", r)
				}
				got[r.Message] = true
			}
			for _, r := range refused {
				if !got[r.want] {
					t.Errorf("no rejection recorded with %q (recorded: %v)", r.want, got)
				}
			}
			evs, _, err := st.ListEvents(t.Context(), store.EventFilter{})
			if err != nil || len(evs) != 2 {
				t.Fatalf("events = %d, %v; want the two accepted ones only", len(evs), err)
			}
		})
	}
}

// TestStoreRefusalAnswers400: an item the store refuses as invalid for
// a reason ingest's own check does not cover (here an index row over
// PostgreSQL's btree maximum, through a source name the configuration
// would not allow) is answered 400 and recorded in the rejection log,
// never 503: a retry would be refused the same way for ever.
func TestStoreRefusalAnswers400(t *testing.T) {
	t.Parallel()
	st := openBackend(t, "postgres")
	rl := rejectlog.New(st, rejectlog.Options{})
	rl.Start(t.Context())
	var long strings.Builder
	for long.Len() < 3000 {
		long.WriteString(rand.Text()) // random: no compression brings it under the limit
	}
	h := ingest.New(ingest.Options{Sources: []ingest.Source{headerSource(t, long.String())}, Recorder: st, Rejections: rl})
	req := httptest.NewRequest("POST", "/webhooks/x", strings.NewReader(`{"obj":"o","ver":1}`))
	req.SetPathValue("source", long.String())
	req.Header.Set("X-Request-Id", "evt_1")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "the event store refuses a field of the event") {
		t.Fatalf("answer %d %s, want 400 with a generic reason", w.Code, w.Body)
	}
	rl.Stop()
	rs, _, err := st.ListRejections(t.Context(), store.RejectionFilter{})
	if err != nil || len(rs) != 1 || rs[0].Reason != anyhook.RejectInvalid || rs[0].Status != 400 {
		t.Fatalf("rejections = %+v, %v; want the request, invalid", rs, err)
	}
}

// jsonString writes s as a JSON string that keeps every byte: those that
// JSON must escape as \u00XX, the rest raw (bytes that are not UTF-8
// included; a decoder reads them as U+FFFD).
func jsonString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteString(strconv.FormatUint(uint64(c)>>4, 16))
			b.WriteString(strconv.FormatUint(uint64(c)&15, 16))
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// isShownControl is a character no field shown as it is may hold: C0,
// DEL and C1 controls, line and paragraph separators, bidi controls.
func isShownControl(r rune) bool {
	return r < 0x20 || (r >= 0x7f && r <= 0x9f) || r == 0x2028 || r == 0x2029 ||
		r == 0x061c || r == 0x200e || r == 0x200f || (r >= 0x202a && r <= 0x202e) || (r >= 0x2066 && r <= 0x2069)
}

// FuzzIngestFields sends arbitrary ids, types, objects and versions
// through the ingest handler to a real PostgreSQL store, either all in
// headers (any bytes: the handler is called directly, so even those an
// HTTP server would refuse get through) or all in the JSON body (where
// \u0000 makes a NUL). The answer is 200 or 400, never a 5xx; a 400 names
// the field; a 200 stored the fields exactly as the provider read them,
// and none holds a control character.
func FuzzIngestFields(f *testing.F) {
	st := openBackend(f, "postgres")
	ph, err := provider.New(provider.Settings{Provider: "generic", Signature: &provider.Signature{None: true},
		ID: "header:X-Id", Type: "header:X-Type", Ordering: &provider.Ordering{Object: "header:X-Obj", Version: "header:X-Ver"}})
	if err != nil {
		f.Fatal(err)
	}
	pj, err := provider.New(provider.Settings{Provider: "generic", Signature: &provider.Signature{None: true},
		ID: "json:id", Type: "json:type", Ordering: &provider.Ordering{Object: "json:obj", Version: "json:ver"}})
	if err != nil {
		f.Fatal(err)
	}
	srcs := []ingest.Source{{Name: "h", Provider: ph, MaxBody: 2 << 20, Destinations: []string{"d"}},
		{Name: "j", Provider: pj, MaxBody: 2 << 20, Destinations: []string{"d"}}}
	h := ingest.New(ingest.Options{Sources: srcs, Recorder: st})
	f.Add("a", "t", "a\x00b", "1", false)
	f.Add("a", "t", "ok", "1\x00", true)
	f.Add("\xff\xfe", "t", "ok", "1", true)
	f.Add(strings.Repeat("i", 3000), "", "ok", "1", false)
	f.Add(strings.Repeat("k", 2000), "", "ok", "1", true)
	f.Add("evt_1", "invoice.paid", "o", "2026-01-02T03:04:05Z", false)
	f.Add("", "t", "o", "1", true)
	f.Add("", "t", "o", "1", false)
	f.Add("a\nb", "t\x1b[2J", "o\u2028", "\u202e1", true)
	f.Add("a\tb", "t\r", "o\u0085", "1\u200f", false)
	f.Fuzz(func(t *testing.T, id, typ, obj, ver string, inBody bool) {
		name, body := "h", []byte("{}")
		if inBody {
			name = "j"
			body = []byte(`{"id":` + jsonString(id) + `,"type":` + jsonString(typ) + `,"obj":` + jsonString(obj) + `,"ver":` + jsonString(ver) + `}`)
		}
		req := httptest.NewRequest("POST", "/webhooks/"+name, bytes.NewReader(body))
		req.SetPathValue("source", name)
		if !inBody {
			req.Header = http.Header{"X-Id": {id}, "X-Type": {typ}, "X-Obj": {obj}, "X-Ver": {ver}}
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		var ans struct{ Error, ID, Status string }
		json.Unmarshal(w.Body.Bytes(), &ans)
		switch w.Code {
		case http.StatusOK:
		case http.StatusBadRequest:
			if !strings.HasPrefix(ans.Error, "the ") && !strings.HasPrefix(ans.Error, "missing id: ") {
				t.Fatalf("400 %q: want a field named", ans.Error)
			}
			return
		default:
			t.Fatalf("answered %d %s", w.Code, w.Body)
		}
		p := ph
		if inBody {
			p = pj
		}
		ext, err := p.Extract(&provider.Request{Method: "POST", Header: req.Header, Body: body})
		if err != nil || len(ext.Events) != 1 {
			t.Fatalf("extract: %v", err)
		}
		want := ext.Events[0]
		ev, err := st.Event(t.Context(), ans.ID)
		if err != nil {
			t.Fatalf("event %s: %v", ans.ID, err)
		}
		if ev.DedupKey != want.DedupKey {
			// A duplicate answers its original, which has this key too.
			t.Fatalf("stored dedup key %q, the provider read %q", ev.DedupKey, want.DedupKey)
		}
		if ans.Status == "accepted" && (ev.Type != want.Type || ev.Object != want.Object || ev.Version != want.Version) {
			t.Fatalf("stored %q %q %q, the provider read %q %q %q", ev.Type, ev.Object, ev.Version, want.Type, want.Object, want.Version)
		}
		for _, v := range []string{ev.DedupKey, ev.Type, ev.Object, ev.Version} {
			if strings.ContainsFunc(v, isShownControl) {
				t.Fatalf("stored %q, which holds a control character", v)
			}
		}
	})
}

// TestFetchedFieldsChecked: a backfill's event objects pass the same check
// as webhooks: one whose event id holds a NUL byte, or whose object id is
// over its bound, fails its page with the reason, before anything is
// recorded.
func TestFetchedFieldsChecked(t *testing.T) {
	t.Parallel()
	p, err := provider.New(provider.Settings{Provider: "stripe", Secrets: []string{fuzzSecret}})
	if err != nil {
		t.Fatal(err)
	}
	h := ingest.New(ingest.Options{Sources: []ingest.Source{{Name: "stripe", Provider: p, Destinations: []string{"d"}}}})
	good := []byte(`{"id":"evt_1","type":"invoice.paid","created":1700000000,"data":{"object":{"id":"in_1"}}}`)
	for _, c := range []struct{ body, want string }{
		{`{"id":"evt_\u0000","type":"invoice.paid","created":1700000000,"data":{"object":{"id":"in_1"}}}`,
			"event 1 of the page: the event id holds a NUL byte"},
		{`{"id":"evt_2","type":"invoice.paid","created":1700000000,"data":{"object":{"id":"` + strings.Repeat("o", 1025) + `"}}}`,
			"event 1 of the page: the ordering object is 1025 bytes, at most 1024"},
	} {
		evs, err := h.Fetched(t.Context(), "stripe", [][]byte{good, []byte(c.body)})
		if err == nil || err.Error() != c.want || evs != nil {
			t.Errorf("Fetched = %d events, %v; want %q", len(evs), err, c.want)
		}
	}
	if evs, err := h.Fetched(t.Context(), "stripe", [][]byte{good}); err != nil || len(evs) != 1 {
		t.Fatalf("Fetched(good) = %d events, %v", len(evs), err)
	}
}
