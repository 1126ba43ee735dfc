package ingest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/ingest"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/store"
)

// backlogRecorder records every event and reports the backlog the test
// sets, standing in for the Batcher's estimate.
type backlogRecorder struct {
	backlog atomic.Int64
	pace    atomic.Int64 // events per second
	batch   atomic.Int64 // the smallest batch that times the pace
	waiting atomic.Int64 // Ingest calls held by block
	mu      sync.Mutex
	keys    []string
	block   chan struct{} // when not nil, Ingest waits for it or ctx
	held    chan struct{} // when not nil, Ingest of "evt_held" waits for it or ctx
	entered chan struct{} // when not nil, closed as the first Ingest begins
	once    sync.Once
}

func (r *backlogRecorder) Backlog() time.Duration { return time.Duration(r.backlog.Load()) }

func (r *backlogRecorder) Pace() float64 { return float64(r.pace.Load()) }

func (r *backlogRecorder) Drain(n int64, batches int) time.Duration {
	if p := r.pace.Load(); p > 0 && n >= int64(batches)*r.batch.Load() {
		return time.Duration(n) * time.Second / time.Duration(p)
	}
	return 0
}

func (r *backlogRecorder) Ingest(ctx context.Context, evs []store.NewEvent) ([]store.IngestResult, error) {
	if r.entered != nil {
		r.once.Do(func() { close(r.entered) })
	}
	if r.held != nil && len(evs) == 1 && evs[0].Event.DedupKey == "evt_held" {
		r.waiting.Add(1)
		select {
		case <-r.held:
		case <-ctx.Done():
		}
		r.waiting.Add(-1)
	} else if r.block != nil {
		r.waiting.Add(1)
		defer r.waiting.Add(-1)
		select {
		case <-r.block:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]store.IngestResult, len(evs))
	for i, ev := range evs {
		r.keys = append(r.keys, ev.Event.DedupKey)
		out[i].ID = "id-" + ev.Event.DedupKey
	}
	return out, nil
}

type outcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomes) Ingested(source, outcome string, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.n[source+"/"+outcome]++
}

// overloadServer serves two sources over real HTTP: "stripe" sheds,
// "github" queues.
func overloadServer(t *testing.T, rec ingest.Recorder, log *slog.Logger, obs ingest.Observer) (*httptest.Server, func(src, id string) *http.Request) {
	t.Helper()
	var sources []ingest.Source
	for _, name := range []string{"stripe", "github"} {
		p, err := provider.New(provider.Settings{Provider: name, Secrets: []string{fuzzSecret}})
		if err != nil {
			t.Fatal(err)
		}
		sources = append(sources, ingest.Source{Name: name, Provider: p, MaxBody: 1 << 16, Destinations: []string{"d"}, Shed: name == "stripe"})
	}
	h := ingest.New(ingest.Options{Sources: sources, Recorder: rec, Logger: log, Observer: obs, MaxQueueWait: 50 * time.Millisecond})
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks/{source}", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	signed := func(src, id string) *http.Request {
		body := []byte(`{"id":"` + id + `","type":"invoice.paid","object":"event"}`)
		pr := &provider.Request{Method: "POST", URL: srv.URL + "/webhooks/" + src, Header: http.Header{}, Body: body}
		if src == "github" {
			pr.Header.Set("X-GitHub-Delivery", id)
			pr.Header.Set("X-GitHub-Event", "push")
		}
		if err := provider.Sign(src, fuzzSecret, pr, time.Now()); err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("POST", pr.URL, bytes.NewReader(body))
		req.Header = pr.Header
		req.Header.Set("Content-Type", "application/json")
		return req
	}
	return srv, signed
}

// Past max_queue_wait a source that sheds is answered 503 with
// Retry-After at once, counted as shed and not recorded; a source that
// queues is recorded as usual; below it, both are recorded.
func TestOverloadSheds(t *testing.T) {
	t.Parallel()
	rec := &backlogRecorder{}
	obs := &outcomes{n: map[string]int{}}
	var logs bytes.Buffer
	srv, signed := overloadServer(t, rec, slog.New(slog.NewJSONHandler(&logs, nil)), obs)
	post := func(src, id string) *http.Response {
		t.Helper()
		resp, err := srv.Client().Do(signed(src, id))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := post("stripe", "evt_1"); resp.StatusCode != 200 {
		t.Fatalf("no backlog: %d", resp.StatusCode)
	}
	rec.backlog.Store(int64(80 * time.Millisecond))
	for i := range 3 {
		resp := post("stripe", "evt_shed")
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("request %d over capacity: %d, Retry-After %q; want 503 with Retry-After", i, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if resp := post("github", "gh_1"); resp.StatusCode != 200 {
		t.Errorf("a source that queues, over capacity: %d, want 200", resp.StatusCode)
	}
	rec.backlog.Store(int64(50 * time.Millisecond)) // at the bound, not past it
	if resp := post("stripe", "evt_2"); resp.StatusCode != 200 {
		t.Errorf("backlog at max_queue_wait: %d, want 200", resp.StatusCode)
	}
	rec.mu.Lock()
	keys := strings.Join(rec.keys, ",")
	rec.mu.Unlock()
	if len(rec.keys) != 3 || strings.Contains(keys, "evt_shed") || !strings.Contains(keys, "gh_1") {
		t.Errorf("recorded %s, want evt_1,gh_1,evt_2 (nothing shed)", keys)
	}
	obs.mu.Lock()
	defer obs.mu.Unlock()
	if obs.n["stripe/shed"] != 3 || obs.n["stripe/accepted"] != 2 || obs.n["github/accepted"] != 1 {
		t.Errorf("outcomes %v", obs.n)
	}
	// One warning for the three (they came within 10 s), no error.
	if n := strings.Count(logs.String(), "over capacity"); n != 1 || strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("%d over-capacity log lines, want 1 and no error:\n%s", n, logs.String())
	}
	// It says what the requests in progress were judged against.
	for _, want := range []string{`"backlog":"80ms"`, `"bound":"50ms"`, `"late":false`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the over-capacity line lacks %s:\n%s", want, logs.String())
		}
	}
}

// Past the CPU's capacity requests wait everywhere in the handler, and
// the commit queue's own backlog stays short: what is in flight, at the
// store's pace, bounds admission too. At 40 events/s two requests in
// flight are 50 ms of work, at the bound; a third is past it.
func TestOverloadShedsPastWhatIsInFlight(t *testing.T) {
	t.Parallel()
	rec := &backlogRecorder{block: make(chan struct{})}
	rec.pace.Store(40)
	srv, signed := overloadServer(t, rec, slog.New(slog.DiscardHandler), &outcomes{n: map[string]int{}})
	var release sync.Once
	unblock := func() { release.Do(func() { close(rec.block) }) }
	t.Cleanup(unblock) // before the server's Close, which waits for the handlers
	codes := make(chan int, 3)
	send := func(src, id string) {
		resp, err := srv.Client().Do(signed(src, id))
		if err != nil {
			codes <- 0
			return
		}
		resp.Body.Close()
		codes <- resp.StatusCode
	}
	go send("stripe", "evt_1")
	go send("github", "gh_1") // a source that queues counts, and is never shed
	waitInFlight(t, rec, 2)
	// Admitted, it would wait in the recorder: the deadline says so.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := srv.Client().Do(signed("stripe", "evt_3").WithContext(ctx))
	if err != nil {
		t.Fatalf("a third request in flight at 40 events/s was not answered at once: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("a third request in flight at 40 events/s: %d, want 503", resp.StatusCode)
	}
	go send("github", "gh_2")
	waitInFlight(t, rec, 3)
	unblock()
	for range 3 {
		if code := <-codes; code != 200 {
			t.Errorf("a request admitted before the bound: %d, want 200", code)
		}
	}
	rec.pace.Store(0) // a pace not known yet bounds nothing
	if resp := mustPost(t, srv, signed("stripe", "evt_4")); resp != 200 {
		t.Errorf("no pace known: %d, want 200", resp)
	}
}

// waitInFlight waits until n requests are inside rec's Ingest.
func waitInFlight(t *testing.T, rec *backlogRecorder, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); rec.waiting.Load() < int64(n); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%d requests reached the recorder, want %d", rec.waiting.Load(), n)
		}
	}
}

func mustPost(t *testing.T, srv *httptest.Server, req *http.Request) int {
	t.Helper()
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A client that goes away while its request is queued behind a commit
// (the Batcher withdraws it) is logged as that, at info with the time
// spent, never as a store failure; its event is not recorded.
func TestClientGoneIsNotAStoreFailure(t *testing.T) {
	t.Parallel()
	rec := &backlogRecorder{block: make(chan struct{}), entered: make(chan struct{})}
	b := ingest.NewBatcher(rec, 256)
	b.Start(t.Context())
	defer b.Stop()
	obs := &outcomes{n: map[string]int{}}
	var mu sync.Mutex
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(lockedWriter{&mu, &logs}, nil))
	srv, signed := overloadServer(t, b, log, obs)
	holder := make(chan int, 1)
	go func() {
		resp, err := srv.Client().Do(signed("stripe", "evt_holder"))
		if err != nil {
			holder <- 0
			return
		}
		resp.Body.Close()
		holder <- resp.StatusCode
	}()
	<-rec.entered // the holder's commit is in progress: the next request queues
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := srv.Client().Do(signed("stripe", "evt_gone").WithContext(ctx)); err == nil {
		t.Fatal("the request was answered while the store held it")
	}
	// The handler's answer comes after the client left: wait for its log.
	deadline := time.Now().Add(10 * time.Second)
	var line map[string]any
	for line == nil && time.Now().Before(deadline) {
		mu.Lock()
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, "client went away") {
				json.Unmarshal([]byte(l), &line)
			}
		}
		mu.Unlock()
		time.Sleep(10 * time.Millisecond)
	}
	if line == nil {
		t.Fatalf("no client-gone log line:\n%s", logs.String())
	}
	if line["level"] != "INFO" || line["spent"] == "" || line["source"] != "stripe" {
		t.Errorf("client-gone line %v: want INFO with source and spent", line)
	}
	mu.Lock()
	if strings.Contains(logs.String(), "unavailable") || strings.Contains(logs.String(), `"level":"ERROR"`) {
		t.Errorf("logged as a store failure:\n%s", logs.String())
	}
	mu.Unlock()
	close(rec.block)
	if code := <-holder; code != 200 {
		t.Errorf("the request that stayed: %d, want 200", code)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if strings.Join(rec.keys, ",") != "evt_holder" {
		t.Errorf("recorded %v, want only the request that stayed", rec.keys)
	}
	if obs.n["stripe/client_gone"] != 1 {
		t.Errorf("outcomes %v, want one client_gone", obs.n)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// Requests recorded later than max_queue_wait, behind a queue, halve the
// bound for the next window: what admission estimates leaves out the CPU
// a request waits for past capacity, and what was measured late does
// not. A request estimated within half the bound is still taken; once a
// window passes on time, or the queue drains, the whole bound is back.
func TestLateRequestsHalveTheBound(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	advance := func(d time.Duration) { mu.Lock(); clock = clock.Add(d); mu.Unlock() }
	rec := &backlogRecorder{held: make(chan struct{})}
	var logMu sync.Mutex
	var logs bytes.Buffer
	logged := func() string { logMu.Lock(); defer logMu.Unlock(); return logs.String() }
	p, err := provider.New(provider.Settings{Provider: "stripe", Secrets: []string{fuzzSecret}})
	if err != nil {
		t.Fatal(err)
	}
	h := ingest.New(ingest.Options{Sources: []ingest.Source{{Name: "stripe", Provider: p, MaxBody: 1 << 16, Destinations: []string{"d"}, Shed: true}},
		Recorder: rec, Logger: slog.New(slog.NewJSONHandler(lockedWriter{&logMu, &logs}, nil)), Now: now, MaxQueueWait: 50 * time.Millisecond})
	var n atomic.Int64
	post := func(id string) int {
		if id == "" {
			id = "evt_" + strconv.FormatInt(n.Add(1), 10)
		}
		body := []byte(`{"id":"` + id + `","type":"invoice.paid","object":"event"}`)
		pr := &provider.Request{Method: "POST", URL: "http://gw/webhooks/stripe", Header: http.Header{}, Body: body}
		if err := provider.Sign("stripe", fuzzSecret, pr, now()); err != nil {
			t.Error(err)
			return 0
		}
		req := httptest.NewRequest("POST", pr.URL, bytes.NewReader(body))
		req.Header = pr.Header
		req.SetPathValue("source", "stripe")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w.Code
	}
	// A request held in the recorder keeps the queue from draining; with
	// it, one more in flight at 66 events/s is an estimated 30 ms, within
	// the bound and past half of it; at 100 events/s, 20 ms.
	const within, withinHalf = 66, 100
	rec.pace.Store(within)
	heldDone := make(chan int, 1)
	go func() { heldDone <- post("evt_held") }()
	waitInFlight(t, rec, 1)
	if code := post(""); code != 200 {
		t.Fatalf("estimated 30 ms, nothing late: %d, want 200", code)
	}
	// Four requests recorded 60 ms after they arrived, behind a queue
	// (at 1,000 events/s all four are admitted).
	rec.pace.Store(1000)
	rec.block = make(chan struct{})
	done := make(chan int, 4)
	for range 4 {
		go func() { done <- post("") }()
	}
	waitInFlight(t, rec, 5)
	advance(60 * time.Millisecond)
	close(rec.block)
	for range 4 {
		if code := <-done; code != 200 {
			t.Fatalf("a request admitted before it was late: %d, want 200", code)
		}
	}
	rec.block = nil
	rec.pace.Store(within)
	advance(100 * time.Millisecond)
	if code := post(""); code != 200 { // recorded on time, it ends the late window
		t.Fatalf("the request that ends the late window: %d, want 200", code)
	}
	rec.batch.Store(2) // two in flight are one timed batch, not two
	if code := post(""); code != http.StatusServiceUnavailable {
		t.Errorf("estimated 30 ms after a late window: %d, want 503 (the bound halved)", code)
	}
	// The line says what that request was refused on: the one held and
	// itself, 2/66 s, against half the bound.
	for _, want := range []string{`"in_flight":1`, `"in_flight_wait":"30.30303ms"`, `"bound":"25ms"`, `"late":true`} {
		if !strings.Contains(logged(), want) {
			t.Errorf("the over-capacity line lacks %s:\n%s", want, logged())
		}
	}
	if a := h.Admission(); a != (ingest.Admission{Pace: within, InProgress: 1, Halved: true}) {
		t.Errorf("admission after a late window, one held: %+v", a)
	}
	rec.pace.Store(withinHalf)
	if code := post(""); code != 200 {
		t.Errorf("estimated 20 ms after a late window: %d, want 200 (within half the bound)", code)
	}
	rec.pace.Store(within)
	if code := post(""); code != http.StatusServiceUnavailable {
		t.Errorf("estimated 30 ms after a late window, one timed batch in flight: %d, want 503", code)
	}
	// The queue drains: the whole bound is back at once, and only two
	// timed batches in flight are judged.
	close(rec.held)
	if code := <-heldDone; code != 200 {
		t.Fatalf("the held request: %d, want 200", code)
	}
	if a := h.Admission(); a.Halved || a.InProgress != 0 {
		t.Errorf("admission once drained: %+v, want nothing halved or in progress", a)
	}
	rec.pace.Store(33) // alone in flight: 30 ms
	rec.batch.Store(0)
	if code := post(""); code != 200 {
		t.Errorf("estimated 30 ms after the queue drained: %d, want 200 (the whole bound back)", code)
	}
	rec.pace.Store(10)
	rec.batch.Store(1)
	if code := post(""); code != 200 {
		t.Errorf("estimated 100 ms, fewer in flight than two timed batches, nothing late: %d, want 200", code)
	}
}
