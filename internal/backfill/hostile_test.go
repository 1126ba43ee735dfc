package backfill_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/anyhook/anyhook/internal/backfill"
)

// hostile is a provider API on 127.0.0.1 that answers every request with
// answer; it counts requests and, past 50 (a lister looping on its
// cursor), answers 400 "looping" so a test fails instead of hanging.
func hostile(t *testing.T, answer http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) > 50 {
			http.Error(w, "looping", http.StatusBadRequest)
			return
		}
		answer(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func noPage([][]byte) error { return nil }

// TestStripeRepeatedCursor: an API answering has_more with the same last
// event every time is refused after it repeats, not paged forever.
func TestStripeRepeatedCursor(t *testing.T) {
	t.Parallel()
	srv, n := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"object":"list","has_more":true,"data":[{"id":"evt_same","object":"event","type":"x","created":1}]}`)
	})
	l := &backfill.Stripe{Client: backfill.Client{Base: srv.URL, Key: key}}
	err := l.List(t.Context(), time.Now().Add(-time.Hour), time.Time{}, noPage)
	if err == nil || !strings.Contains(err.Error(), "repeat") || n.Load() > 3 {
		t.Fatalf("after %d requests: %v; want an error about the repeated cursor", n.Load(), err)
	}
}

// TestPaddleRepeatedCursor: the same for Paddle's after cursor.
func TestPaddleRepeatedCursor(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC().Format(time.RFC3339)
	srv, n := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"data":[{"event_id":"evt_same","event_type":"x","occurred_at":%q,"data":{}}],"meta":{"pagination":{"has_more":true}}}`, now)
	})
	l := &backfill.Paddle{Client: backfill.Client{Base: srv.URL, Key: key}}
	err := l.List(t.Context(), time.Now().Add(-time.Hour), time.Time{}, noPage)
	if err == nil || !strings.Contains(err.Error(), "repeat") || n.Load() > 3 {
		t.Fatalf("after %d requests: %v; want an error about the repeated cursor", n.Load(), err)
	}
}

// TestGitHubLinkLoop: a Link rel="next" back to the same page is refused.
func TestGitHubLinkLoop(t *testing.T) {
	t.Parallel()
	var self string
	srv, n := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "<"+self+">; rel=\"next\"")
		fmt.Fprintf(w, `[{"id":1,"guid":"g1","delivered_at":%q}]`, time.Now().UTC().Format(time.RFC3339))
	})
	self = srv.URL + "/repos/o/r/hooks/1/deliveries?per_page=100"
	g := &backfill.GitHub{Client: backfill.Client{Base: srv.URL, Key: key}, Repo: "o/r", HookID: 1}
	err := g.Deliveries(t.Context(), time.Now().Add(-time.Hour), time.Time{}, func([]backfill.HookDelivery) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "repeat") || n.Load() > 3 {
		t.Fatalf("after %d requests: %v; want an error about the repeated cursor", n.Load(), err)
	}
}

// TestGitHubLinkOtherHost: the key is sent only to api_base, not to
// wherever a Link header points.
func TestGitHubLinkOtherHost(t *testing.T) {
	t.Parallel()
	var leaked atomic.Bool
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Authorization"), key) {
			leaked.Store(true)
		}
		fmt.Fprint(w, `[]`)
	}))
	t.Cleanup(other.Close)
	srv, _ := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "<"+other.URL+"/steal?page=2>; rel=\"next\"")
		fmt.Fprint(w, `[]`)
	})
	g := &backfill.GitHub{Client: backfill.Client{Base: srv.URL, Key: key}, Repo: "o/r", HookID: 1}
	err := g.Deliveries(t.Context(), time.Now().Add(-time.Hour), time.Time{}, func([]backfill.HookDelivery) error { return nil })
	if leaked.Load() || err == nil {
		t.Fatalf("key sent to the Link's host: %v; err %v", leaked.Load(), err)
	}
}

// TestHugePage: a page larger than the bound is an error, not read whole.
func TestHugePage(t *testing.T) {
	t.Parallel()
	srv, _ := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"object":"list","has_more":false,"data":[{"id":"evt_1","pad":"`)
		chunk := strings.Repeat("a", 64<<10)
		for range 64 { // 4 MiB, then the connection ends
			fmt.Fprint(w, chunk)
		}
	})
	l := &backfill.Stripe{Client: backfill.Client{Base: srv.URL, Key: key, MaxPage: 1 << 20}}
	err := l.List(t.Context(), time.Now().Add(-time.Hour), time.Time{}, noPage)
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("a 4 MiB page with a 1 MiB bound: %v", err)
	}
}

// TestErrorBodyKeyCut: a provider echoing the key in a long plain-text
// error body, where the message is cut, leaks no part of the key.
func TestErrorBodyKeyCut(t *testing.T) {
	t.Parallel()
	srv, _ := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, strings.Repeat("x", 170)+" bad key "+key+" for this account", http.StatusUnauthorized)
	})
	l := &backfill.Stripe{Client: backfill.Client{Base: srv.URL, Key: key}}
	err := l.List(t.Context(), time.Now().Add(-time.Hour), time.Time{}, noPage)
	if err == nil || strings.Contains(err.Error(), key[:14]) {
		t.Fatalf("error leaks part of the key: %v", err)
	}
}

// TestErrorBodyCutAtACharacter: a long error page in Japanese is cut
// between characters, never inside one: the error is UTF-8 text, as the
// backfill's record of it must be.
func TestErrorBodyCutAtACharacter(t *testing.T) {
	t.Parallel()
	srv, _ := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "x"+strings.Repeat("エラー", 100), http.StatusBadRequest)
	})
	l := &backfill.Stripe{Client: backfill.Client{Base: srv.URL, Key: key}}
	err := l.List(t.Context(), time.Now().Add(-time.Hour), time.Time{}, noPage)
	if err == nil || !utf8.ValidString(err.Error()) || !strings.Contains(err.Error(), "エラー…") {
		t.Fatalf("error %q: want the page's start, cut between characters", err)
	}
}

// TestEndlessPages: an API handing out new cursors forever is stopped at
// the bound on the events of one backfill, not fetched into memory
// without end.
func TestEndlessPages(t *testing.T) {
	t.Parallel()
	var id atomic.Int64
	srv, n := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		for i := range 100 {
			if i > 0 {
				b.WriteString(",")
			}
			fmt.Fprintf(&b, `{"id":"evt_%d","object":"event","type":"x","created":1}`, id.Add(1))
		}
		fmt.Fprintf(w, `{"object":"list","has_more":true,"data":[%s]}`, b.String())
	})
	l := &backfill.Stripe{Client: backfill.Client{Base: srv.URL, Key: key}}
	_, err := backfill.Run(t.Context(), backfill.Request{Source: "s", From: time.Now().Add(-time.Hour), Lister: l, MaxEvents: 250})
	if err == nil || !strings.Contains(err.Error(), "shorter window") || n.Load() > 4 {
		t.Fatalf("after %d requests: %v; want the bound on events", n.Load(), err)
	}
}

// TestPaddleEventWithoutTime: an event without occurred_at is an error,
// not taken for one older than the window (which would stop the listing
// early and report the rest as not there).
func TestPaddleEventWithoutTime(t *testing.T) {
	t.Parallel()
	srv, _ := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"data":[{"event_id":"evt_1","event_type":"x","data":{}}],"meta":{"pagination":{"has_more":true}}}`)
	})
	l := &backfill.Paddle{Client: backfill.Client{Base: srv.URL, Key: key}}
	err := l.List(t.Context(), time.Now().Add(-time.Hour), time.Time{}, noPage)
	if err == nil || !strings.Contains(err.Error(), "occurred_at") {
		t.Fatalf("an event without occurred_at: %v", err)
	}
}

// TestGitHubDeliveryWithoutGUID: a delivery without a guid or
// delivered_at is an error, not redelivered under the dedup key "1:" nor
// taken for one older than the window; so is one whose guid makes a
// dedup key that no webhook could have.
func TestGitHubDeliveryWithoutGUID(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC().Format(time.RFC3339)
	for d, says := range map[string]string{
		`{"id":1,"delivered_at":"` + now + `"}`: "without",
		`{"id":1,"guid":"g1"}`:                  "without",
		// No webhook has such a dedup key: PostgreSQL would fail its lookup.
		`{"id":1,"guid":"g\u0000","delivered_at":"` + now + `"}`:                           "the event id holds a NUL byte",
		`{"id":1,"guid":"` + strings.Repeat("g", 1100) + `","delivered_at":"` + now + `"}`: "the event id is 1102 bytes, at most 1024",
	} {
		srv, _ := hostile(t, func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "["+d+"]")
		})
		g := &backfill.GitHub{Client: backfill.Client{Base: srv.URL, Key: key}, Repo: "o/r", HookID: 1}
		err := g.Deliveries(t.Context(), time.Now().Add(-time.Hour), time.Time{}, func([]backfill.HookDelivery) error { return nil })
		if err == nil || !strings.Contains(err.Error(), says) {
			t.Fatalf("delivery %.80s: %v, want an error saying %q", d, err, says)
		}
	}
}

// TestAPIBaseTrailingSlash: api_base with a trailing slash reads the same
// paths as without.
func TestAPIBaseTrailingSlash(t *testing.T) {
	t.Parallel()
	var paths []string
	var mu sync.Mutex
	srv, _ := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		fmt.Fprint(w, `{"object":"list","data":[],"meta":{"pagination":{"has_more":false}}}`)
	})
	from := time.Now().Add(-time.Hour)
	if err := (&backfill.Stripe{Client: backfill.Client{Base: srv.URL + "/", Key: key}}).List(t.Context(), from, time.Time{}, noPage); err != nil {
		t.Fatal(err)
	}
	if err := (&backfill.Paddle{Client: backfill.Client{Base: srv.URL + "/", Key: key}}).List(t.Context(), from, time.Time{}, noPage); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(paths) != 2 || paths[0] != "/v1/events" || paths[1] != "/events" {
		t.Fatalf("paths %q, want /v1/events and /events", paths)
	}
}

// TestRetryAfterOverflow: a Retry-After too large for a time.Duration is
// a wait too long, not one that wraps around to nothing.
func TestRetryAfterOverflow(t *testing.T) {
	t.Parallel()
	for _, ra := range []string{"999999", "9300000000", "99999999999999999999"} {
		srv, n := hostile(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", ra)
			http.Error(w, `{"error":{"message":"slow down"}}`, http.StatusTooManyRequests)
		})
		var sl fakeSleep
		l := &backfill.Stripe{Client: backfill.Client{Base: srv.URL, Key: key, Sleep: sl.sleep}}
		err := l.List(t.Context(), time.Now().Add(-time.Hour), time.Time{}, noPage)
		if err == nil || !strings.Contains(err.Error(), "longer than") || n.Load() != 1 || len(sl.waits) != 0 {
			t.Fatalf("Retry-After %s: %d requests, waits %v, %v", ra, n.Load(), sl.waits, err)
		}
	}
}

// TestEndlessBytes: events within the count bound but too large in all
// are stopped at the bound on bytes.
func TestEndlessBytes(t *testing.T) {
	t.Parallel()
	var id atomic.Int64
	pad := strings.Repeat("p", 10<<10)
	srv, n := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"object":"list","has_more":true,"data":[{"id":"evt_%d","object":"event","type":"x","created":1,"pad":%q}]}`, id.Add(1), pad)
	})
	l := &backfill.Stripe{Client: backfill.Client{Base: srv.URL, Key: key}}
	_, err := backfill.Run(t.Context(), backfill.Request{Source: "s", From: time.Now().Add(-time.Hour), Lister: l, MaxBytes: 25 << 10})
	if err == nil || !strings.Contains(err.Error(), "bytes: backfill a shorter window") || n.Load() > 4 {
		t.Fatalf("after %d requests: %v; want the bound on bytes", n.Load(), err)
	}
}

// TestEndlessPagesOutsideWindow: pages of events newer than the window
// (which are not counted) handed out forever are stopped at the bound on
// pages, for a lister and for GitHub's deliveries.
func TestEndlessPagesOutsideWindow(t *testing.T) {
	t.Parallel()
	var id atomic.Int64
	future := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	srv, n := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		i := id.Add(1)
		if strings.Contains(r.URL.Path, "deliveries") {
			w.Header().Set("Link", fmt.Sprintf("<%s%s?page=%d>; rel=\"next\"", "http://"+r.Host, r.URL.Path, i))
			fmt.Fprintf(w, `[{"id":%d,"guid":"g%d","delivered_at":%q}]`, i, i, future)
			return
		}
		fmt.Fprintf(w, `{"data":[{"event_id":"evt_%d","event_type":"x","occurred_at":%q,"data":{}}],"meta":{"pagination":{"has_more":true}}}`, i, future)
	})
	from, to := time.Now().Add(-2*time.Hour), time.Now().Add(-time.Hour)
	c := backfill.Client{Base: srv.URL, Key: key}
	_, err := backfill.Run(t.Context(), backfill.Request{Source: "s", From: from, To: to, Lister: &backfill.Paddle{Client: c}, MaxPages: 5})
	if err == nil || !strings.Contains(err.Error(), "pages") || n.Load() > 6 {
		t.Fatalf("paddle, after %d requests: %v; want the bound on pages", n.Load(), err)
	}
	n.Store(0)
	_, err = backfill.Run(t.Context(), backfill.Request{Source: "s", From: from, To: to, Redeliverer: &backfill.GitHub{Client: c, Repo: "o/r", HookID: 1}, MaxPages: 5})
	if err == nil || !strings.Contains(err.Error(), "pages") || n.Load() > 6 {
		t.Fatalf("github, after %d requests: %v; want the bound on pages", n.Load(), err)
	}
}

// TestRedirectKeepsTheKey: a provider API (https) that redirects to plain
// http on the same machine, or to another host, does not get the key
// sent there. net/http alone would forward the Authorization header to
// the same host name over http.
func TestRedirectKeepsTheKey(t *testing.T) {
	t.Parallel()
	var leaked atomic.Int64
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Authorization"), key) || strings.Contains(r.URL.RawQuery, key) {
			leaked.Add(1)
		}
		fmt.Fprint(w, `{"object":"list","has_more":false,"data":[]}`)
	}))
	t.Cleanup(plain.Close)
	for _, to := range []string{plain.URL, strings.Replace(plain.URL, "127.0.0.1", "localhost", 1)} {
		api := httptest.NewTLSServer(http.RedirectHandler(to+"/v1/events", http.StatusFound))
		t.Cleanup(api.Close)
		l := &backfill.Stripe{Client: backfill.Client{Base: api.URL, Key: key, HTTP: api.Client()}}
		err := l.List(t.Context(), time.Now().Add(-time.Hour), time.Time{}, noPage)
		if leaked.Load() != 0 || err == nil || strings.Contains(err.Error(), key) {
			t.Fatalf("redirect to %s: key sent %d times; err %v", to, leaked.Load(), err)
		}
	}
	// A redirect within the API (same scheme and host) is followed.
	var same *httptest.Server
	same = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/moved/v1/events" {
			http.Redirect(w, r, same.URL+"/moved/v1/events", http.StatusMovedPermanently)
			return
		}
		if !strings.Contains(r.Header.Get("Authorization")+r.URL.RawQuery, key) {
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, `{"object":"list","has_more":false,"data":[]}`)
	}))
	t.Cleanup(same.Close)
	l := &backfill.Stripe{Client: backfill.Client{Base: same.URL, Key: key, HTTP: same.Client()}}
	if err := l.List(t.Context(), time.Now().Add(-time.Hour), time.Time{}, noPage); err != nil {
		t.Fatalf("a redirect within the API: %v", err)
	}
}

// TestRedeliverRedirectIsNotARedelivery: a redelivery (a POST) that the
// API redirects with 301, 302 or 303 would be re-sent by net/http as a
// GET, and a GET answered 200 is not a redelivery: it is an error, not
// counted. A 307 or 308 within the API keeps the POST and is followed.
func TestRedeliverRedirectIsNotARedelivery(t *testing.T) {
	t.Parallel()
	const attempts = "/repos/o/r/hooks/1/deliveries/7/attempts"
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		var posts atomic.Int64
		srv, _ := hostile(t, func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == attempts {
				http.Redirect(w, r, "/moved"+attempts, code)
				return
			}
			if r.Method == http.MethodPost && strings.Contains(r.Header.Get("Authorization"), key) {
				posts.Add(1)
			}
			w.WriteHeader(http.StatusAccepted) // a GET here is answered 2xx too
		})
		g := &backfill.GitHub{Client: backfill.Client{Base: srv.URL, Key: key}, Repo: "o/r", HookID: 1}
		err := g.Redeliver(t.Context(), backfill.HookDelivery{ID: 7, GUID: "g7"})
		keeps := code == http.StatusTemporaryRedirect || code == http.StatusPermanentRedirect
		switch {
		case keeps && (err != nil || posts.Load() != 1):
			t.Errorf("%d within the API: %d POSTs arrived; err %v; want the POST followed", code, posts.Load(), err)
		case !keeps && err == nil:
			t.Errorf("%d: the redelivery counted as made though the POST became a GET", code)
		case err != nil && strings.Contains(err.Error(), key):
			t.Errorf("%d: the error shows the key: %v", code, err)
		}
	}
}

// TestGitHubLinkBaseCase: scheme and host names are case-insensitive, so
// an api_base written HTTPS://GHE.EXAMPLE (which the config accepts)
// pages on through GitHub's lower-case Link; a Link with a user name, on
// another port or outside the base's path is still refused.
func TestGitHubLinkBaseCase(t *testing.T) {
	t.Parallel()
	now := time.Now().UTC().Format(time.RFC3339)
	var next string
	var page atomic.Int64
	srv, n := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.RawQuery, "page=2") {
			w.Header().Set("Link", "<"+next+">; rel=\"next\"")
		}
		fmt.Fprintf(w, `[{"id":%d,"guid":"g%[1]d","delivered_at":%q}]`, page.Add(1), now)
	})
	host := strings.TrimPrefix(srv.URL, "http://")
	base := "HTTP://" + strings.ToUpper(strings.Replace(host, "127.0.0.1", "localhost", 1)) + "/API/v3"
	for link, ok := range map[string]bool{
		"http://localhost" + host[len("127.0.0.1"):] + "/API/v3/repos/o/r/hooks/1/deliveries?page=2": true,
		"http://localhost" + host[len("127.0.0.1"):] + "/api/v3/repos/o/r/hooks/1/deliveries?page=2": false,
		"http://localhost" + host[len("127.0.0.1"):] + "/API/v3x/deliveries?page=2":                  false,
		"http://u@localhost" + host[len("127.0.0.1"):] + "/API/v3/deliveries?page=2":                 false,
		"http://localhost:1/API/v3/deliveries?page=2":                                                false,
		"/API/v3/repos/o/r/hooks/1/deliveries?page=2":                                                false,
	} {
		next = link
		n.Store(0)
		g := &backfill.GitHub{Client: backfill.Client{Base: base, Key: key}, Repo: "o/r", HookID: 1}
		err := g.Deliveries(t.Context(), time.Now().Add(-time.Hour), time.Time{}, func([]backfill.HookDelivery) error { return nil })
		if ok && (err != nil || n.Load() != 2) || !ok && (err == nil || n.Load() != 1) {
			t.Errorf("api_base %s, Link %s: %d requests, err %v; want it followed: %v", base, link, n.Load(), err, ok)
		}
	}
}

// TestPlainHTTPBaseReachesOnlyLoopback: the configuration allows a plain
// http:// api_base only for a loopback host, but a name such as localhost
// is the resolver's to answer. Whatever a plain-http base resolves to, the
// client connects only to a loopback address: 192.0.2.1 (a documentation
// address) stands for what /etc/hosts or DNS might have answered, and is
// refused before any connection, with an error that says why and holds no
// key. 127.0.0.1 and localhost still work.
func TestPlainHTTPBaseReachesOnlyLoopback(t *testing.T) {
	t.Parallel()
	l := &backfill.Stripe{Client: backfill.Client{Base: "http://192.0.2.1:9", Key: key}}
	err := l.List(t.Context(), time.Now().Add(-time.Hour), time.Time{}, noPage)
	if err == nil || !strings.Contains(err.Error(), "loopback") || strings.Contains(err.Error(), key) {
		t.Fatalf("a plain-http base at 192.0.2.1: %v", err)
	}
	api, _ := hostile(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"object":"list","has_more":false,"data":[]}`)
	})
	for _, base := range []string{api.URL, strings.Replace(api.URL, "127.0.0.1", "localhost", 1)} {
		l := &backfill.Stripe{Client: backfill.Client{Base: base, Key: key}}
		if err := l.List(t.Context(), time.Now().Add(-time.Hour), time.Time{}, noPage); err != nil {
			t.Errorf("a plain-http base at %s: %v", base, err)
		}
	}
}
