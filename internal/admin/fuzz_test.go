package admin_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
)

// FuzzEndpoints posts garbage bodies and query strings to every endpoint
// that reads them: never a panic, never a 5xx.
func FuzzEndpoints(f *testing.F) {
	fx := setup(f)
	id := fx.seed("stripe", "evt_1", []byte(`{}`), 0)
	cs := fx.claim("billing", time.Minute)
	fx.finish(cs, anyhook.StatusDead, 500, nil)
	did := cs[0].Delivery.ID
	for _, s := range []string{
		``, `{}`, `{"destination":"billing"}`, `{"destination":"ci"}`, `{"action":"discard"}`,
		`{"source":"stripe","dry_run":true}`, `{"status":"dead","since":"2026-01-01T00:00:00Z","dry_run":true}`,
		`{"x":1}`, `{} {}`, `[`, `null`, `"str"`, `{"dry_run":"yes"}`, "\xff\xfe", `{"action":null}`,
		`limit=5&cursor=zz`, `since=2026-01-01T00:00:00Z&until=x`, `status=%ff`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fx := &fixture{t: t, store: fx.store, srv: fx.srv}
		for _, req := range []struct{ method, path, body string }{
			{"POST", "/api/events/" + id + "/replay", s},
			{"POST", "/api/replay", s},
			{"POST", "/api/deliveries/" + did + "/resolve", s},
			{"POST", "/api/events/" + url.PathEscape(s) + "/replay", ""},
			{"GET", "/api/events?" + url.PathEscape(s), ""},
			{"GET", "/api/deliveries?" + url.PathEscape(s), ""},
			{"GET", "/api/events/" + url.PathEscape(s), ""},
		} {
			if _, err := url.Parse(fx.srv.URL + req.path); err != nil {
				continue // not a request a client could send
			}
			r := fx.do(req.method, req.path, req.body)
			if r.status >= 500 {
				t.Fatalf("%s %s %q: %d %s", req.method, req.path, req.body, r.status, r.body)
			}
			if r.status != http.StatusOK && r.status != http.StatusAccepted {
				r.errCode(t)
			}
		}
	})
}
