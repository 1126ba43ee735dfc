package main

// Several real `anyhook serve` processes on one PostgreSQL database (SPEC
// §1): deduplication, shared delivery, rescue after kill -9 and
// the loss of the database, each checked at the binary level. Every test
// has its own fresh database (pgtest.DSN) and runs in parallel. Without a
// reachable PostgreSQL server they skip with a hint (fail under CI=true).

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// pgDSN is a fresh database for t, with a pool of at most 4 connections
// per process so that many parallel tests stay far below the server's
// max_connections.
func pgDSN(t *testing.T) string {
	t.Helper()
	return withPool(pgtest.DSN(t))
}

func withPool(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		panic(err)
	}
	q := u.Query()
	q.Set("pool_max_conns", "4")
	u.RawQuery = q.Encode()
	return u.String()
}

// startN starts n anyhook serve processes on database. Process i (from 1)
// delivers billing to destURL(i); all share one config directory. They
// start at once, so the migrations run concurrently too.
func startN(t *testing.T, n int, database, policy string, destURL func(i int) string) []*proc {
	t.Helper()
	return startConfigs(t, n, func(i int) string { return gatewayConfig(database, destURL(i), policy) })
}

// longLeases makes a test config's leases (timeout + grace) longer than
// any stall of a loaded machine: a test that counts exactly one request
// per event must not see a lease run out while a claimed delivery waits
// for a CPU, which is the at-least-once rescue working as documented.
func longLeases(config string) string {
	if !strings.Contains(config, "timeout: 2s") || !strings.Contains(config, "grace: 1s") {
		panic("longLeases: the test config no longer says timeout: 2s and grace: 1s")
	}
	return strings.Replace(strings.Replace(config, "timeout: 2s", "timeout: 60s", 1), "grace: 1s", "grace: 10s", 1)
}

// startConfigs starts n processes, process i (from 1) with config(i).
func startConfigs(t *testing.T, n int, config func(i int) string) []*proc {
	t.Helper()
	dir := t.TempDir()
	cfgs := make([]string, n)
	for i := range n {
		cfgs[i] = filepath.Join(dir, fmt.Sprintf("anyhook-%d.yaml", i+1))
		if err := os.WriteFile(cfgs[i], []byte(config(i+1)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ps := make([]*proc, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	for i := range n {
		wg.Go(func() {
			p, err := startProc(t, cfgs[i])
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed = append(failed, err.Error())
			}
			ps[i] = p
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Fatal(strings.Join(failed, "\n"))
	}
	return ps
}

// procURL gives each process its own ?proc= on one destination, so the
// sink knows which process sent each request.
func procURL(sink string) func(int) string {
	return func(i int) string { return sink + "/hooks?proc=" + strconv.Itoa(i) }
}

// client is an HTTP client for many concurrent requests to the gateways.
func client(t *testing.T) *http.Client {
	tr := &http.Transport{MaxIdleConnsPerHost: 128, MaxIdleConns: 512}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

type deliveryItem struct {
	ID           string `json:"id"`
	EventID      string `json:"event_id"`
	Status       string `json:"status"`
	AttemptCount int    `json:"attempt_count"`
	Attempts     []struct {
		Number     int    `json:"number"`
		StatusCode int    `json:"status_code"`
		Error      string `json:"error"`
	} `json:"attempts"`
}

// deliveries lists every delivery with status (all pages).
func deliveries(t *testing.T, base, status string) []deliveryItem {
	t.Helper()
	var all []deliveryItem
	cursor := ""
	for range 1000 {
		var page struct {
			Items      []deliveryItem `json:"items"`
			NextCursor string         `json:"next_cursor"`
		}
		gatewaytest.AdminJSON(t, base+"/api/deliveries?limit=500&status="+status+"&cursor="+url.QueryEscape(cursor), &page)
		all = append(all, page.Items...)
		if page.NextCursor == "" {
			return all
		}
		cursor = page.NextCursor
	}
	t.Fatal("deliveries: too many pages")
	return nil
}

// settled reports whether no delivery is waiting or in flight: every
// request a sink will ever get has been answered and recorded.
func settled(t *testing.T, base string) bool {
	return len(deliveries(t, base, "pending")) == 0 && len(deliveries(t, base, "retrying")) == 0 && len(deliveries(t, base, "delivering")) == 0
}

// adminPost POSTs {} to an admin API url and wants a 2xx answer.
func adminPost(t *testing.T, url string) {
	t.Helper()
	if code, b := gatewaytest.Admin(t, "POST", url, "{}"); code/100 != 2 {
		t.Fatalf("POST %s: %d %s", url, code, b)
	}
}

// 300 identical signed requests spread over three processes at once: one
// event, one delivery.
func TestPostgresIdenticalRequestsThreeProcesses(t *testing.T) {
	t.Parallel()
	sink := newRecorder(t, false)
	dsn, dest := pgDSN(t), procURL(sink.URL)
	ps := startConfigs(t, 3, func(i int) string { return longLeases(gatewayConfig(dsn, dest(i), "reclaim")) })
	body, h, err := stripeEvent("evt_same_everywhere", 0)
	if err != nil {
		t.Fatal(err)
	}
	c := client(t)

	const n = 300
	codes := make([]int, n)
	ids := make([]string, n)
	errs := make([]error, n)
	ready := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-ready
			codes[i], ids[i], errs[i] = postEvent(c, ps[i%3].url, body, h)
		})
	}
	close(ready)
	wg.Wait()
	id := ids[0]
	for i := range n {
		if errs[i] != nil || codes[i] != 200 || ids[i] != id || id == "" {
			t.Fatalf("request %d (process %d): %d %q %v; want 200 with the id %q every process answered", i, i%3+1, codes[i], ids[i], errs[i], id)
		}
	}

	var ev struct {
		Duplicates int            `json:"duplicates"`
		Deliveries []deliveryItem `json:"deliveries"`
	}
	testwait.For(t, "the event to be delivered", func() bool {
		gatewaytest.AdminJSON(t, ps[2].url+"/api/events/"+id, &ev)
		return len(ev.Deliveries) == 1 && ev.Deliveries[0].Status == "delivered"
	})
	if ev.Duplicates != n-1 {
		t.Errorf("duplicates = %d, want %d", ev.Duplicates, n-1)
	}
	var list struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	gatewaytest.AdminJSON(t, ps[1].url+"/api/events", &list)
	if len(list.Items) != 1 || list.Items[0].ID != id {
		t.Errorf("events = %+v, want only %s", list.Items, id)
	}
	if all := deliveries(t, ps[0].url, ""); len(all) != 1 {
		t.Errorf("%d deliveries, want 1", len(all))
	}
	got := sink.snapshot()
	if len(got) != 1 || len(got[id]) != 1 || got[id][0] != "1" {
		t.Errorf("the sink got %v, want one request for %s (attempt 1)", got, id)
	}
}

// A backlog of a few thousand events, delivered by three processes: each
// exactly once, and the work was shared.
func TestPostgresBacklogSharedThreeProcesses(t *testing.T) {
	t.Parallel()
	sink := newRecorder(t, false)
	dsn, dest := pgDSN(t), procURL(sink.URL)
	ps := startConfigs(t, 3, func(i int) string { return longLeases(gatewayConfig(dsn, dest(i), "reclaim")) })
	adminPost(t, ps[0].url+"/api/destinations/billing/pause")

	const n, clients = 2000, 16
	c := client(t)
	acked := make([]string, n)
	next := make(chan int)
	go func() {
		for i := range n {
			next <- i
		}
		close(next)
	}()
	var wg sync.WaitGroup
	var failed atomic.Value
	for range clients {
		wg.Go(func() {
			for i := range next {
				body, h, err := stripeEvent(fmt.Sprintf("evt_backlog_%d", i), 0)
				if err != nil {
					failed.Store(err.Error())
					continue
				}
				code, id, err := postEvent(c, ps[i%3].url, body, h)
				if err != nil || code != 200 {
					failed.Store(fmt.Sprintf("event %d: %d %v", i, code, err))
					continue
				}
				acked[i] = id
			}
		})
	}
	wg.Wait()
	if f := failed.Load(); f != nil {
		t.Fatalf("ingest: %v", f)
	}
	if got := len(sink.snapshot()); got != 0 {
		t.Fatalf("%d events delivered while the destination was paused", got)
	}

	adminPost(t, ps[1].url+"/api/destinations/billing/resume")
	seen := map[string]bool{}
	for len(seen) < n {
		seen[sink.next(t)] = true
	}
	testwait.For(t, "every delivery to settle (none pending or in flight)", func() bool { return settled(t, ps[2].url) })

	got := sink.snapshot()
	for i, id := range acked {
		if a := got[id]; len(a) != 1 || a[0] != "1" {
			t.Errorf("event %d (%s): attempts %v, want exactly one request, attempt 1", i, id, a)
		}
	}
	if len(got) != n {
		t.Errorf("the sink got %d distinct events, want %d", len(got), n)
	}
	senders := fmt.Sprint(sink.senders())
	busy := len(sink.senders())
	t.Logf("requests per process: %s", senders)
	if busy < 2 {
		t.Errorf("only %d process delivered (%s); the work was not shared", busy, senders)
	}
	if delivered := deliveries(t, ps[0].url, "delivered"); len(delivered) != n {
		t.Errorf("%d deliveries delivered, want %d", len(delivered), n)
	}
}

// kill -9 of one of three processes while its deliveries are in flight:
// another process rescues them once their lease is over.
func TestPostgresKillOneOfThree(t *testing.T) {
	t.Parallel()
	for _, policy := range []string{"reclaim", "hold"} {
		t.Run(policy, func(t *testing.T) {
			t.Parallel()
			// Process 1 delivers to a sink that never answers; processes
			// 2 and 3 to one that answers at once.
			stuck, open := newRecorder(t, true), newRecorder(t, false)
			ps := startN(t, 3, pgDSN(t), policy, func(i int) string {
				if i == 1 {
					return stuck.URL + "/hooks?proc=1"
				}
				return open.URL + "/hooks?proc=" + strconv.Itoa(i)
			})

			// Events sent to process 1 wake its dispatcher at once, so it
			// claims them as they come, up to max_in_flight; the
			// others poll and take the rest.
			// On a loaded machine processes 2 and 3 can take a whole
			// round before process 1's dispatcher runs: send rounds until
			// process 1 holds claims (at most five).
			const perRound = 24
			acked := map[string]bool{}
			for round := 0; len(stuck.snapshot()) == 0; round++ {
				if round == 5 {
					t.Fatal("process 1 claimed nothing in five rounds; the test proves nothing")
				}
				for i := range perRound {
					code, id, err := sendEvent(ps[0].url, fmt.Sprintf("evt_kill_%s_%d_%d", policy, round, i))
					if err != nil || code != 200 {
						t.Fatalf("send %d = %d, %v", i, code, err)
					}
					acked[id] = true
				}
				// Wait until every event was sent once, by somebody.
				testwait.For(t, "every event to be sent", func() bool {
					s, o := stuck.snapshot(), open.snapshot()
					for id := range acked {
						if len(s[id]) == 0 && len(o[id]) == 0 {
							return false
						}
					}
					return true
				})
			}
			n := len(acked)
			inFlight := stuck.snapshot()
			ps[0].kill() // its attempts have unknown outcomes now
			t.Logf("process 1 held %d of %d claims when killed", len(inFlight), n)

			switch policy {
			case "reclaim":
				// Every event is delivered by process 2 or 3; the rescued
				// ones with the same X-AnyHook-Delivery and the next
				// attempt number.
				testwait.For(t, "the rescued deliveries to be resent", func() bool {
					o := open.snapshot()
					for id := range acked {
						if len(o[id]) == 0 {
							return false
						}
					}
					return true
				})
				testwait.For(t, "every delivery to settle (none pending or in flight)", func() bool { return settled(t, ps[1].url) })
				o := open.snapshot()
				for id := range acked {
					want := []string{"1"}
					if a, ok := inFlight[id]; ok {
						last, _ := strconv.Atoi(a[len(a)-1])
						want = []string{strconv.Itoa(last + 1)}
					}
					if fmt.Sprint(o[id]) != fmt.Sprint(want) {
						t.Errorf("event %s: attempts %v after the rescue, want %v (process 1 sent %v)", id, o[id], want, inFlight[id])
					}
				}
				for id := range inFlight {
					var ev struct {
						Deliveries []deliveryItem `json:"deliveries"`
					}
					gatewaytest.AdminJSON(t, ps[2].url+"/api/events/"+id, &ev)
					d := ev.Deliveries[0]
					if d.Status != "delivered" || len(d.Attempts) < 2 || !strings.HasPrefix(d.Attempts[0].Error, "outcome unknown") {
						t.Errorf("rescued delivery %+v: want delivered, its first attempt recorded as outcome unknown", d)
					}
				}
			case "hold":
				held := testwait.Value(t, "the killed process's claims to be held", func() ([]deliveryItem, error) {
					held := deliveries(t, ps[1].url, "held")
					if len(held) != len(inFlight) {
						return held, fmt.Errorf("%d held, want %d: %+v", len(held), len(inFlight), held)
					}
					return held, nil
				})
				for _, d := range held {
					if _, ok := inFlight[d.EventID]; !ok {
						t.Errorf("held %+v, which process 1 never sent", d)
					}
				}
				// The rest was delivered once by processes 2 and 3.
				testwait.For(t, "every delivery to settle (none pending or in flight)", func() bool { return settled(t, ps[1].url) })
				// A held delivery is never sent: one more event goes
				// through, then nothing held may have reached a sink.
				code, last, err := sendEvent(ps[2].url, "evt_kill_hold_after")
				if err != nil || code != 200 {
					t.Fatalf("send after = %d, %v", code, err)
				}
				testwait.For(t, "the event after the rescue to be delivered", func() bool { return len(open.snapshot()[last]) > 0 })
				o := open.snapshot()
				for id := range acked {
					_, wasHeld := inFlight[id]
					switch {
					case wasHeld && len(o[id]) != 0:
						t.Errorf("held event %s was sent again: %v", id, o[id])
					case !wasHeld && fmt.Sprint(o[id]) != "[1]":
						t.Errorf("event %s: attempts %v, want [1]", id, o[id])
					}
				}
				if got := stuck.snapshot(); len(got) != len(inFlight) {
					t.Errorf("process 1's sink got %d events after the kill, want %d", len(got), len(inFlight))
				}
			}
		})
	}
}

// PostgreSQL goes away mid-traffic (a TCP proxy between anyhook and the
// shared server is cut; the server itself keeps serving other tests):
// ingest answers 503, never 2xx for an event it did not record; /readyz
// turns 503; when the database is back, ingest and delivery resume without
// restarting anyhook, and every event that got a 2xx is delivered.
func TestPostgresOutage(t *testing.T) {
	t.Parallel()
	u, err := url.Parse(pgDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	server := u.Host
	px := pgtest.Proxy(t, server)
	u.Host = px.Addr()
	sink := newRecorder(t, false)
	ps := startN(t, 1, u.String(), "reclaim", procURL(sink.URL))
	p := ps[0]
	c := client(t)

	var mu sync.Mutex
	acked := map[string]string{} // provider id -> AnyHook id
	var retry []string           // provider ids answered 503: the provider sends them again
	send := func(pid string) (int, error) {
		body, h, err := stripeEvent(pid, 0)
		if err != nil {
			return 0, err
		}
		code, id, err := postEvent(c, p.url, body, h)
		if err != nil {
			return 0, err
		}
		mu.Lock()
		defer mu.Unlock()
		switch code {
		case 200:
			acked[pid] = id
		case 503:
			retry = append(retry, pid)
		default:
			return code, fmt.Errorf("event %s: status %d, want 200 or 503", pid, code)
		}
		return code, nil
	}

	// Mid-traffic: the proxy is cut once 100 of 300 events are acked; the
	// requests in flight then may land either way.
	const before, clients = 300, 8
	next := make(chan int)
	go func() {
		for i := range before {
			next <- i
		}
		close(next)
	}()
	var cut sync.Once
	var wg sync.WaitGroup
	errs := make(chan error, before)
	for range clients {
		wg.Go(func() {
			for i := range next {
				code, err := send(fmt.Sprintf("evt_outage_%d", i))
				if err != nil {
					errs <- err
					continue
				}
				mu.Lock()
				n := len(acked)
				mu.Unlock()
				if code == 200 && n >= 100 {
					cut.Do(px.Cut)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	mu.Lock()
	t.Logf("before and at the cut: %d acked, %d answered 503", len(acked), len(retry))
	mu.Unlock()

	// While the database is away: /readyz says so, every ingest is a 503.
	testwait.For(t, "/readyz to turn 503", func() bool { return readyz(t, p.url) == 503 })
	for i := range 20 {
		pid := fmt.Sprintf("evt_outage_during_%d", i)
		if code, err := send(pid); err != nil || code != 503 {
			t.Fatalf("ingest of %s with the database away: %d, %v; want 503", pid, code, err)
		}
	}

	// Back: no restart; the gateway finds the database by itself.
	px.Restore()
	testwait.For(t, "/readyz to turn 200 after the database came back", func() bool { return readyz(t, p.url) == 200 })
	// The provider retries what was refused (a cut-off COMMIT may have
	// landed: then the retry is a duplicate with the original id), and
	// sends new events.
	mu.Lock()
	pending := retry
	retry = nil
	mu.Unlock()
	for i := range 50 {
		pending = append(pending, fmt.Sprintf("evt_outage_after_%d", i))
	}
	for _, pid := range pending {
		testwait.For(t, "ingest of "+pid+" to recover", func() bool {
			code, err := send(pid)
			if err != nil {
				t.Fatal(err)
			}
			return code == 200
		})
	}
	select {
	case <-p.done:
		t.Fatalf("anyhook exited during the outage: %s", p.stderr)
	default:
	}

	mu.Lock()
	want := make(map[string]bool, len(acked))
	for _, id := range acked {
		want[id] = true
	}
	mu.Unlock()
	total := before + 20 + 50
	if len(want) != total {
		t.Fatalf("%d distinct events acknowledged, want %d", len(want), total)
	}
	got := sink.awaitAll(t, want)
	for id := range got {
		if !want[id] {
			t.Errorf("delivered %s, which was never acknowledged", id)
		}
	}
}

// TestPostgresThroughput measures ingest and delivery on PostgreSQL with 1
// and then 3 processes, in one run, against the real binary. It is a
// measurement, not a check, so it runs only when asked:
//
//	ANYHOOK_BENCH=1 go test -run TestPostgresThroughput -v -count=1 ./cmd/anyhook/
//
// Ingest: ANYHOOK_BENCH_EVENTS (default 5000) distinct 1 KiB signed Stripe
// events from 32 concurrent clients, spread round-robin over the
// processes, with the destination paused; events/s from the first request
// to the last answer. Delivery: then the destination is resumed and the
// same events are delivered to a local sink that answers 200 at once;
// events/s from the resume to the last arrival. docs/scaling.md records
// the figures.
func TestPostgresThroughput(t *testing.T) {
	if os.Getenv("ANYHOOK_BENCH") != "1" {
		t.Skip("a measurement; run with ANYHOOK_BENCH=1 (see docs/scaling.md)")
	}
	events := 5000
	if s := os.Getenv("ANYHOOK_BENCH_EVENTS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 9000 {
			t.Fatalf("ANYHOOK_BENCH_EVENTS=%q: want 1 to 9000", s)
		}
		events = n
	}
	const clients, size = 32, 1024
	for _, n := range []int{1, 3} {
		ingest, deliver := throughput(t, n, events, clients, size)
		t.Logf("PostgreSQL, %d process(es), %d events of %d B, %d clients: ingest %.0f events/s, delivery %.0f events/s",
			n, events, size, clients, ingest, deliver)
	}
}

func throughput(t *testing.T, procs, events, clients, size int) (ingest, deliver float64) {
	sink := newRecorder(t, false)
	ps := startN(t, procs, pgDSN(t), "reclaim", procURL(sink.URL))
	defer func() {
		for _, p := range ps {
			p.kill()
		}
	}()
	adminPost(t, ps[0].url+"/api/destinations/billing/pause")
	type req struct {
		body []byte
		h    http.Header
	}
	reqs := make([]req, events)
	for i := range reqs {
		body, h, err := stripeEvent(fmt.Sprintf("evt_bench_%d_%d", procs, i), size)
		if err != nil {
			t.Fatal(err)
		}
		reqs[i] = req{body, h}
	}
	c := client(t)
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	began := time.Now()
	for range clients {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= events {
					return
				}
				code, _, err := postEvent(c, ps[i%procs].url, reqs[i].body, reqs[i].h)
				if err != nil || code != 200 {
					failed.Store(fmt.Sprintf("event %d: %d %v", i, code, err))
				}
			}
		})
	}
	wg.Wait()
	ingest = float64(events) / time.Since(began).Seconds()
	if f := failed.Load(); f != nil {
		t.Fatalf("ingest: %v", f)
	}

	began = time.Now()
	adminPost(t, ps[0].url+"/api/destinations/billing/resume")
	seen := map[string]bool{}
	for len(seen) < events {
		seen[sink.next(t)] = true
	}
	deliver = float64(events) / time.Since(began).Seconds()
	for id, a := range sink.snapshot() {
		if len(a) != 1 {
			t.Errorf("event %s delivered %d times", id, len(a))
		}
	}
	t.Logf("requests per process: %v", sink.senders())
	return ingest, deliver
}

func readyz(t *testing.T, base string) int {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// stripeObjectEvent is a Stripe event about object (data.object.id) created
// at created: the stripe provider orders such events per object, so every
// ingest of one takes the object's version mark.
func stripeObjectEvent(id, object string, created int64) ([]byte, http.Header, error) {
	body := fmt.Appendf(nil, `{"id":%q,"object":"event","type":"customer.updated","created":%d,"data":{"object":{"id":%q,"object":"customer"}}}`, id, created, object)
	pr := &provider.Request{Method: "POST", Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
	if err := provider.Sign("stripe", secret, pr, time.Now()); err != nil {
		return nil, nil, err
	}
	return body, pr.Header, nil
}

// deadlocks is the number of deadlocks PostgreSQL has detected in the
// database of dsn since the statistics were reset (pg_stat_database).
func deadlocks(t *testing.T, dsn string) int64 {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(t.Context())
	var n int64
	if err := conn.QueryRow(t.Context(), `SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Three processes on one database, a stripe source (ordering per object on),
// and rounds of identical and overlapping requests that all concern ONE
// object: every request is answered 200, each key makes one event, and
// PostgreSQL detects no deadlock (a deadlock is a 503 or, while it is being
// detected, a wait of deadlock_timeout). The deadlock this guards against:
// one transaction held the version mark and waited on a dedup key that
// another held while it waited on the mark.
func TestPostgresOneObjectThreeProcessesNoDeadlock(t *testing.T) {
	t.Parallel()
	sink := newRecorder(t, false)
	dsn := pgtest.DSN(t)
	ps := startN(t, 3, withPool(dsn), "reclaim", procURL(sink.URL))
	c := client(t)
	const rounds, keys, copies = 8, 6, 8 // per round: 6 keys, each sent 8 times
	ids := map[string]string{}           // provider event id -> AnyHook id
	var slowest time.Duration
	created := time.Now().Unix()
	for r := range rounds {
		type req struct {
			key     string
			body    []byte
			h       http.Header
			process int
		}
		var reqs []req
		for k := range keys {
			// Overlapping: each round repeats half of the previous
			// round's keys next to new ones.
			key := fmt.Sprintf("evt_hot_%d", r*keys/2+k)
			body, h, err := stripeObjectEvent(key, "cus_hot", created+int64(r*keys/2+k))
			if err != nil {
				t.Fatal(err)
			}
			for i := range copies {
				reqs = append(reqs, req{key, body, h, (k + i) % len(ps)})
			}
		}
		type answer struct {
			code int
			id   string
			err  error
			took time.Duration
		}
		answers := make([]answer, len(reqs))
		ready := make(chan struct{})
		var wg sync.WaitGroup
		for i, rq := range reqs {
			wg.Go(func() {
				<-ready
				began := time.Now()
				code, id, err := postEvent(c, ps[rq.process].url, rq.body, rq.h)
				answers[i] = answer{code, id, err, time.Since(began)}
			})
		}
		close(ready)
		wg.Wait()
		for i, a := range answers {
			rq := reqs[i]
			if a.err != nil || a.code != 200 || a.id == "" {
				t.Fatalf("round %d: %s to process %d: %d %q %v; want 200", r, rq.key, rq.process+1, a.code, a.id, a.err)
			}
			if prev, ok := ids[rq.key]; ok && prev != a.id {
				t.Fatalf("round %d: %s answered %s and %s: two events for one key", r, rq.key, prev, a.id)
			}
			ids[rq.key] = a.id
			slowest = max(slowest, a.took)
		}
	}
	if n := deadlocks(t, dsn); n != 0 {
		t.Errorf("PostgreSQL detected %d deadlocks", n)
	}
	var list struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	gatewaytest.AdminJSON(t, ps[0].url+"/api/events?limit=500", &list)
	if len(list.Items) != len(ids) {
		t.Errorf("%d events recorded for %d keys", len(list.Items), len(ids))
	}
	t.Logf("%d keys, %d requests in %d rounds; slowest answer %v", len(ids), rounds*keys*copies, rounds, slowest)
}

// During a rolling config change, a process whose config
// lacks a destination must not rescue that destination's claims with a
// policy it guesses (reclaim re-sends a charge that may have happened). A
// process that knows the destination applies its declared hold.
func TestPostgresRescueLeavesUnknownDestination(t *testing.T) {
	t.Parallel()
	charges := newRecorder(t, true) // answers only when the test lets it
	audit := newRecorder(t, true)
	dsn := pgDSN(t)
	dir := t.TempDir()
	config := func(name string, withCharges bool) string {
		dests := fmt.Sprintf(`  audit:
    url: %s
    sources: [stripe]
    timeout: 3s
    on_stale_claim: reclaim
`, audit.URL)
		if withCharges {
			// A shorter timeout than audit's: charges' lease expires first.
			dests += fmt.Sprintf(`  charges:
    url: %s
    sources: [stripe]
    timeout: 1s
    on_stale_claim: hold
`, charges.URL)
		}
		body := fmt.Sprintf(`listen: 127.0.0.1:0
database: %q
admin_token: test-token
delivery: {poll_interval: 100ms, grace: 1s, shutdown: 1s}
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
%s`, dsn, secret, dests)
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	old := start(t, config("old.yaml", true))
	code, id, err := sendEvent(old.url, "evt_rolling")
	if err != nil || code != 200 {
		t.Fatalf("send = %d, %v", code, err)
	}
	charges.Next(t)
	audit.Next(t)
	old.kill() // both attempts in flight: outcomes unknown

	audit.Release()
	next := start(t, config("new.yaml", false)) // knows audit only
	// Its rescuer re-sends audit's expired claim; charges' expired earlier,
	// so that rescue round saw it too.
	audit.expect(t, id, "the rescue of audit's expired claim")
	var ev struct {
		Deliveries []struct {
			Destination string `json:"destination"`
			Status      string `json:"status"`
		} `json:"deliveries"`
	}
	gatewaytest.AdminJSON(t, next.url+"/api/events/"+id, &ev)
	for _, d := range ev.Deliveries {
		if d.Destination == "charges" && d.Status != "delivering" {
			t.Fatalf("charges delivery is %s after a rescue by a process without charges; want it left delivering", d.Status)
		}
	}
	if n := len(charges.snapshot()[id]); n != 1 {
		t.Fatalf("charges got %d requests, want 1", n)
	}

	knows := start(t, config("new-with-charges.yaml", true))
	testwait.For(t, "charges' claim to be held by a process that knows its policy", func() bool {
		held := deliveries(t, knows.url, "held")
		return len(held) == 1 && held[0].EventID == id
	})
	if n := len(charges.snapshot()[id]); n != 1 {
		t.Fatalf("charges got %d requests, want 1", n)
	}
}
