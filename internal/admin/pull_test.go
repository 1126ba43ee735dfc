package admin_test

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/admin"
	"github.com/anyhook/anyhook/internal/auth"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

const pullSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// pullFixture is the admin API over a real store and a running delivery
// engine with one pull destination, "inbox", signing with pullSecret.
func pullFixture(t *testing.T) (*fixture, *delivery.Engine) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	e := delivery.New(st, delivery.Options{PollInterval: 50 * time.Millisecond, Destinations: []delivery.Destination{{
		Name: "inbox", Pull: true, Timeout: time.Minute, MaxAttempts: 5, Initial: time.Hour, Max: time.Hour,
		StalePolicy: anyhook.Reclaim, SigningSecret: pullSecret, MaxInFlight: 10}}})
	e.Start(t.Context())
	t.Cleanup(func() { e.Stop(time.Second) })
	api := admin.New(admin.Options{Store: st, Tokens: auth.New([]auth.Token{
		{Name: "admin", Secret: token, Scopes: []string{auth.ScopeAdmin}},
		{Name: "grafana", Secret: readToken, Scopes: []string{auth.ScopeRead}},
		{Name: "alice", Secret: aliceToken, Scopes: []string{"pull:inbox"}},
		{Name: "bob", Secret: bobToken, Scopes: []string{"pull:billing"}},
	}), Sources: map[string][]string{"stripe": {"inbox"}},
		Destinations: []string{"inbox", "billing"}, Pull: e, Queued: e.Wake,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))})
	srv := httptest.NewServer(api.Handler())
	t.Cleanup(srv.Close)
	return &fixture{t: t, store: st, srv: srv}, e
}

func (f *fixture) seedPull(key string) string {
	f.t.Helper()
	id := store.NewID()
	_, err := f.store.Ingest(f.t.Context(), []store.NewEvent{{
		Event: anyhook.Event{ID: id, Source: "stripe", DedupKey: key, Type: "invoice.paid", ReceivedAt: time.Now(), Method: "POST",
			Path: "/webhooks/stripe", Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":"` + key + `"}`)},
		Destinations: []string{"inbox"},
	}})
	if err != nil {
		f.t.Fatal(err)
	}
	return id
}

type leasedDelivery struct {
	LeaseID          string              `json:"lease_id"`
	EventID          string              `json:"event_id"`
	Attempt          int                 `json:"attempt"`
	LeaseRemainingMS int64               `json:"lease_remaining_ms"`
	Headers          map[string][]string `json:"headers"`
	Body             string              `json:"body"`
}

func leaseAll(t *testing.T, r response) []leasedDelivery {
	t.Helper()
	var res struct {
		Deliveries []leasedDelivery `json:"deliveries"`
	}
	if err := json.Unmarshal(r.body, &res); err != nil {
		t.Fatalf("%v: %s", err, r.body)
	}
	return res.Deliveries
}

// The lease answer carries what a push delivery's request would, signed
// as Standard Webhooks; ack, nack and extend answer as documented, and
// a lease that ended is 409.
func TestPullAPI(t *testing.T) {
	f, _ := pullFixture(t)
	id := f.seedPull("evt_1")
	ls := leaseAll(t, f.mustStatus(f.do("POST", "/api/destinations/inbox/lease", `{"max": 5, "lease": "30s"}`), http.StatusOK))
	if len(ls) != 1 || ls[0].EventID != id || ls[0].Attempt != 1 || ls[0].LeaseRemainingMS <= 0 || ls[0].LeaseRemainingMS > 30000 {
		t.Fatalf("leased %+v", ls)
	}
	v, err := provider.New(provider.Settings{Provider: "standard", Secrets: []string{pullSecret}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(&provider.Request{Header: http.Header(ls[0].Headers), Body: []byte(ls[0].Body)}, time.Now()); err != nil {
		t.Fatalf("the lease's webhook-* signature does not verify: %v", err)
	}
	if got := http.Header(ls[0].Headers).Get("X-AnyHook-Delivery"); got != id {
		t.Fatalf("X-AnyHook-Delivery %q, want %q", got, id)
	}
	ext := f.mustStatus(f.do("POST", "/api/destinations/inbox/extend", `{"lease_id": "`+ls[0].LeaseID+`", "lease": "2m"}`), http.StatusOK).json(t)
	if ms, _ := ext["lease_remaining_ms"].(float64); ms < 60000 {
		t.Fatalf("extended: %v", ext)
	}
	f.mustStatus(f.do("POST", "/api/destinations/inbox/ack", `{"lease_id": "`+ls[0].LeaseID+`"}`), http.StatusNoContent)
	r := f.mustStatus(f.do("POST", "/api/destinations/inbox/ack", `{"lease_id": "`+ls[0].LeaseID+`"}`), http.StatusConflict)
	if c := r.errCode(t); c != "lease_ended" {
		t.Fatalf("code %q", c)
	}
	// Refusals: a push destination, an unknown one, bad bounds, a forged
	// lease id, fields of another verb.
	for _, c := range []struct {
		path, body string
		status     int
	}{
		{"/api/destinations/billing/lease", `{}`, http.StatusNotFound},
		{"/api/destinations/nope/lease", `{}`, http.StatusNotFound},
		{"/api/destinations/inbox/lease", `{"max": 101}`, http.StatusBadRequest},
		{"/api/destinations/inbox/lease", `{"wait": "61s"}`, http.StatusBadRequest},
		{"/api/destinations/inbox/lease", `{"lease": "2h"}`, http.StatusBadRequest},
		{"/api/destinations/inbox/ack", `{"lease_id": "x"}`, http.StatusBadRequest},
		{"/api/destinations/inbox/ack", `{"lease_id": "` + ls[0].LeaseID + `", "dead": true}`, http.StatusBadRequest},
		{"/api/destinations/inbox/nack", `{"lease_id": "` + ls[0].LeaseID + `", "dead": true, "retry_after": "1m"}`, http.StatusBadRequest},
		{"/api/destinations/inbox/ack", `{"lease_id": "nope.nope.1"}`, http.StatusNotFound},
	} {
		if r := f.do("POST", c.path, c.body); r.status != c.status {
			t.Errorf("POST %s %s: %d, want %d (%s)", c.path, c.body, r.status, c.status, r.body)
		}
	}
	if r := f.doAuth("POST", "/api/destinations/inbox/lease", `{}`, ""); r.status != http.StatusUnauthorized {
		t.Errorf("a lease without a token: %d", r.status)
	}
	// A nack retries later: nothing to lease now.
	f.seedPull("evt_2")
	ls = leaseAll(t, f.mustStatus(f.do("POST", "/api/destinations/inbox/lease", `{}`), http.StatusOK))
	if len(ls) != 1 {
		t.Fatalf("leased %d", len(ls))
	}
	f.mustStatus(f.do("POST", "/api/destinations/inbox/nack", `{"lease_id": "`+ls[0].LeaseID+`", "retry_after": "1h", "reason": "busy"}`), http.StatusNoContent)
	if ls := leaseAll(t, f.mustStatus(f.do("POST", "/api/destinations/inbox/lease", `{}`), http.StatusOK)); len(ls) != 0 {
		t.Fatalf("a nacked delivery was leased again at once: %+v", ls)
	}
}

// The streaming lease sends each delivery as an event, at most
// max_in_flight unsettled at once, and another once one is acked.
func TestPullStream(t *testing.T) {
	f, _ := pullFixture(t)
	for _, k := range []string{"evt_a", "evt_b", "evt_c"} {
		f.seedPull(k)
	}
	req, err := http.NewRequestWithContext(t.Context(), "GET", f.srv.URL+"/api/destinations/inbox/stream?max_in_flight=2&lease=1m", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	events := make(chan leasedDelivery)
	go func() {
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var d leasedDelivery
				if err := json.Unmarshal([]byte(data), &d); err != nil {
					t.Error(err)
					return
				}
				events <- d
			}
		}
	}()
	next := func() leasedDelivery {
		select {
		case d := <-events:
			return d
		case <-time.After(20 * time.Second):
			t.Fatal("no delivery on the stream")
		}
		panic("unreachable")
	}
	first, second := next(), next()
	select {
	case d := <-events:
		t.Fatalf("a third delivery %s while two were unsettled (max_in_flight=2)", d.EventID)
	case <-time.After(300 * time.Millisecond):
	}
	f.mustStatus(f.do("POST", "/api/destinations/inbox/ack", `{"lease_id": "`+first.LeaseID+`"}`), http.StatusNoContent)
	third := next()
	seen := map[string]bool{first.EventID: true, second.EventID: true, third.EventID: true}
	if len(seen) != 3 {
		t.Fatalf("the stream sent %s, %s, %s: want three different events", first.EventID, second.EventID, third.EventID)
	}
}

const bobToken = "bob-pull-token-0123456789"

// Only a token with scope pull:<destination> (or admin) may lease, ack,
// nack, extend or stream that destination; every other is 403, and
// what it names is recorded under the token's name.
func TestPullScopes(t *testing.T) {
	f, _ := pullFixture(t)
	id := f.seedPull("evt_scoped")
	for _, c := range []struct {
		who, tok, method, path string
	}{
		{"read", readToken, "POST", "/api/destinations/inbox/lease"},
		{"read", readToken, "GET", "/api/destinations/inbox/stream"},
		{"another destination's", bobToken, "POST", "/api/destinations/inbox/lease"},
		{"another destination's", bobToken, "POST", "/api/destinations/inbox/ack"},
		{"another destination's", bobToken, "GET", "/api/destinations/inbox/stream"},
		{"its own, on another destination", aliceToken, "POST", "/api/destinations/billing/lease"},
	} {
		r := f.doAuth(c.method, c.path, `{}`, "Bearer "+c.tok)
		if r.status != http.StatusForbidden || r.errCode(t) != "forbidden" {
			t.Errorf("%s token %s %s: %d %s, want 403 forbidden", c.who, c.method, c.path, r.status, r.body)
		}
	}
	ls := leaseAll(t, f.mustStatus(f.doAuth("POST", "/api/destinations/inbox/lease", `{}`, "Bearer "+aliceToken), http.StatusOK))
	if len(ls) != 1 || ls[0].EventID != id {
		t.Fatalf("alice leased %+v", ls)
	}
	f.mustStatus(f.doAuth("POST", "/api/destinations/inbox/nack", `{"lease_id": "`+ls[0].LeaseID+`", "dead": true, "reason": "bad"}`, "Bearer "+aliceToken), http.StatusNoContent)
	ev, err := f.store.Event(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	if a := ev.Deliveries[0].Attempts; len(a) != 1 || a[0].Error != "refused by pull consumer alice: bad" {
		t.Fatalf("the nack's attempt: %+v", a)
	}
}
