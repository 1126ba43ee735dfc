package alert

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/redirect/redirecttest"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/testclock"
)

// recorder is an alert channel (sinktest.Sink) answering status with a
// two-line body.
type recorder struct{ srv *sinktest.Sink }

func newRecorder(t *testing.T, status int) *recorder {
	t.Helper()
	return &recorder{sinktest.Start(t, sinktest.Options{
		Answer: func(*http.Request, []byte) int { return status },
		Reply:  func(int) string { return "no_service\nsecond line" },
	})}
}

// posts are the bodies posted so far.
func (r *recorder) posts() [][]byte {
	var out [][]byte
	for _, q := range r.srv.Requests() {
		out = append(out, q.Body)
	}
	return out
}

// next waits for the next post.
func (r *recorder) next(t *testing.T) []byte {
	t.Helper()
	return r.srv.Next(t).Body
}

// logs collects log records.
type logs struct {
	mu   sync.Mutex
	recs []string
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }
func (l *logs) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *logs) WithGroup(string) slog.Handler            { return l }
func (l *logs) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.Key + "=" + a.Value.String())
		return true
	})
	l.mu.Lock()
	l.recs = append(l.recs, b.String())
	l.mu.Unlock()
	return nil
}

func (l *logs) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.recs, "\n")
}

type fixture struct {
	n      *Notifier
	clock  *testclock.Clock
	logs   *logs
	tick   chan time.Time
	outbox *sqlite.Store
}

// outbox opens a SQLite store, a real file, for a Notifier's outbox, on
// clock (nil: the real one); it is closed at the end of the test.
func outbox(t *testing.T, clock func() time.Time) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlite.Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// setup returns a started Notifier over channels with a manual clock (its
// outbox's too), a manual flush tick and no jitter; it is stopped at the
// end of the test.
func setup(t *testing.T, channels ...Channel) *fixture {
	t.Helper()
	f := &fixture{
		clock: testclock.New(time.Now().UTC().Truncate(time.Second)),
		logs:  &logs{},
		tick:  make(chan time.Time),
	}
	f.outbox = outbox(t, f.clock.Now)
	n, err := New(channels, Options{Outbox: f.outbox, Now: f.clock.Now, Logger: slog.New(f.logs), Rand: func() float64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	n.tick = f.tick
	n.tickDone = make(chan struct{})
	n.wrote = make(chan int, 4096)
	f.n = n
	n.Start(t.Context())
	t.Cleanup(n.Stop)
	return f
}

// flush runs one flush of the sending goroutine and waits for it,
// including the posts it makes. It runs after any send the goroutine was
// making, so it is also a barrier: what that send posted is recorded.
func (f *fixture) flush() {
	f.tick <- f.clock.Now()
	<-f.n.tickDone
}

// written waits until the writer has written n more alerts to the outbox.
func (f *fixture) written(t *testing.T, n int) {
	t.Helper()
	for n > 0 {
		select {
		case k := <-f.n.wrote:
			n -= k
		case <-time.After(time.Minute):
			t.Fatalf("the writer did not write %d more alerts", n)
		}
	}
}

func decode(t *testing.T, b []byte) webhookBody {
	t.Helper()
	var w webhookBody
	if err := json.Unmarshal(b, &w); err != nil {
		t.Fatalf("body %s: %v", b, err)
	}
	return w
}

func dead(dest string, i int) Alert {
	return Alert{Kind: DeliveryDead, Destination: dest, Source: "stripe",
		EventID: fmt.Sprintf("ev_%d", i), DeliveryID: fmt.Sprintf("dl_%d", i), Message: "8 attempts; last: 503"}
}

func TestStormIsFolded(t *testing.T) {
	t.Parallel()
	r := newRecorder(t, http.StatusOK)
	f := setup(t, Channel{Webhook: r.srv.URL})
	for i := range 500 {
		f.n.Notify(t.Context(), dead("billing", i))
	}
	f.n.Stop()
	posts := r.posts()
	if len(posts) != 2 {
		t.Fatalf("500 alerts made %d posts, want 2 (the first, then one summary)", len(posts))
	}
	first, summary := decode(t, posts[0]), decode(t, posts[1])
	if first.DeliveryID != "dl_0" || first.More != 0 || first.Kind != DeliveryDead || first.Destination != "billing" {
		t.Errorf("first = %+v", first)
	}
	if summary.DeliveryID != "dl_499" || summary.More != 498 || !strings.Contains(summary.Text, "and 498 more") {
		t.Errorf("summary = %+v", summary)
	}
	if first.Time.IsZero() || !strings.Contains(first.Text, "destination billing") {
		t.Errorf("first = %+v", first)
	}
	if ct := r.srv.Requests()[0].Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
}

func TestWindow(t *testing.T) {
	t.Parallel()
	r := newRecorder(t, http.StatusOK)
	f := setup(t, Channel{Webhook: r.srv.URL})
	ctx := t.Context()

	f.n.Notify(ctx, dead("billing", 1))
	if got := decode(t, r.next(t)); got.DeliveryID != "dl_1" || got.More != 0 {
		t.Fatalf("first = %+v", got)
	}
	f.n.Notify(ctx, dead("billing", 2))
	f.n.Notify(ctx, dead("billing", 3))
	f.n.Notify(ctx, dead("billing", 3)) // an exact repeat: dropped, not counted
	f.written(t, 4)

	f.clock.Add(30 * time.Second)
	f.flush() // window not over: nothing
	if n := len(r.posts()); n != 1 {
		t.Fatalf("%d posts inside the window, want 1", n)
	}

	f.clock.Add(30 * time.Second)
	f.flush() // window over: one summary
	if got := decode(t, r.next(t)); got.DeliveryID != "dl_3" || got.More != 1 {
		t.Fatalf("summary = %+v", got)
	}

	f.clock.Add(10 * time.Second)
	f.n.Notify(ctx, dead("billing", 4)) // inside the summary's window
	f.written(t, 1)
	f.clock.Add(time.Minute)
	f.n.Notify(ctx, dead("billing", 5)) // window over: sent at once, carrying dl_4
	if got := decode(t, r.next(t)); got.DeliveryID != "dl_5" || got.More != 1 {
		t.Fatalf("after the window = %+v", got)
	}

	f.clock.Add(2 * time.Minute)
	f.flush() // nothing pending: nothing sent, state forgotten
	f.written(t, 1)
	f.n.Notify(ctx, dead("billing", 6))
	if got := decode(t, r.next(t)); got.DeliveryID != "dl_6" || got.More != 0 {
		t.Fatalf("after a quiet spell = %+v", got)
	}
	if n := len(r.posts()); n != 4 {
		t.Errorf("%d posts, want 4", n)
	}
}

func TestDestinationsAndKindsNotMerged(t *testing.T) {
	t.Parallel()
	r := newRecorder(t, http.StatusOK)
	f := setup(t, Channel{Webhook: r.srv.URL})
	for i := range 10 {
		f.n.Notify(t.Context(), dead("billing", i))
		f.n.Notify(t.Context(), dead("shipping", i))
	}
	f.n.Notify(t.Context(), Alert{Kind: DeliveryHeld, Destination: "billing", DeliveryID: "dl_h"})
	f.n.Stop()
	count := map[string]int{}
	for _, b := range r.posts() {
		w := decode(t, b)
		count[w.Kind+"/"+w.Destination] += 1 + w.More
	}
	want := map[string]int{"delivery_dead/billing": 10, "delivery_dead/shipping": 10, "delivery_held/billing": 1}
	if fmt.Sprint(count) != fmt.Sprint(want) {
		t.Errorf("alerts accounted per key = %v, want %v", count, want)
	}
	if n := len(r.posts()); n != 5 {
		t.Errorf("%d posts, want 5 (first + summary per destination, one held)", n)
	}
}

func TestSlackBody(t *testing.T) {
	t.Parallel()
	r := newRecorder(t, http.StatusOK)
	f := setup(t, Channel{Slack: r.srv.URL + "/services/T000/B000/XXXX"})
	f.n.Notify(t.Context(), Alert{Kind: IncidentOpened, Destination: "billing",
		Message: "5 failures in a row: <503> & timeouts"})
	var body map[string]any
	if err := json.Unmarshal(r.next(t), &body); err != nil {
		t.Fatal(err)
	}
	text, ok := body["text"].(string)
	if len(body) != 1 || !ok {
		t.Fatalf("Slack body = %v, want only {\"text\": ...}", body)
	}
	want := "AnyHook: incident opened: destination billing: 5 failures in a row: &lt;503&gt; &amp; timeouts"
	if text != want {
		t.Errorf("text = %q, want %q", text, want)
	}
}

func TestPagerDutyBodies(t *testing.T) {
	t.Parallel()
	r := newRecorder(t, http.StatusAccepted)
	f := setup(t, Channel{PagerDuty: &PagerDuty{RoutingKey: "R0UT1NG", URL: r.srv.URL + "/v2/enqueue"}})
	ctx := t.Context()

	const inc = "0193b0c4-1111-7000-8000-000000000001"
	f.n.Notify(ctx, Alert{Kind: IncidentOpened, Destination: "billing", IncidentID: inc, Message: "503 for 5m"})
	var trig pdEvent
	if err := json.Unmarshal(r.next(t), &trig); err != nil {
		t.Fatal(err)
	}
	if trig.RoutingKey != "R0UT1NG" || trig.EventAction != "trigger" || trig.DedupKey != inc {
		t.Errorf("trigger = %+v", trig)
	}
	p := trig.Payload
	if p == nil || p.Severity != "error" || p.Source == "" || p.Component != "billing" || p.Class != IncidentOpened ||
		p.CustomDetails["incident_id"] != inc || !strings.Contains(p.Summary, "incident opened: destination billing (incident "+inc+"): 503 for 5m") {
		t.Fatalf("payload = %+v", p)
	}
	if _, err := time.Parse(time.RFC3339, p.Timestamp); err != nil {
		t.Errorf("timestamp %q: %v", p.Timestamp, err)
	}

	// Within the window, the escalation and then the resolve are folded:
	// the summary carries the latest state and resolves the incident.
	f.n.Notify(ctx, Alert{Kind: IncidentEscalated, Destination: "billing", IncidentID: inc, Message: "still 503"})
	f.n.Notify(ctx, Alert{Kind: IncidentResolved, Destination: "billing", IncidentID: inc})
	f.written(t, 3)
	f.flush()
	if n := len(r.posts()); n != 1 {
		t.Fatalf("%d posts inside the window, want 1", n)
	}
	f.clock.Add(time.Minute)
	f.flush()
	var res map[string]any
	if err := json.Unmarshal(r.next(t), &res); err != nil {
		t.Fatal(err)
	}
	if res["event_action"] != "resolve" || res["dedup_key"] != inc ||
		res["routing_key"] != "R0UT1NG" || res["payload"] != nil {
		t.Errorf("resolve = %v", res)
	}
	f.n.Stop()
	if n := len(r.posts()); n != 2 {
		t.Errorf("%d posts, want 2 (trigger, resolve)", n)
	}

	held := pagerDutyChannel{routingKey: "k"}
	b, err := held.body(message{Alert: Alert{Kind: DeliveryHeld, Destination: "ship", DeliveryID: "dl_1"}, More: 3})
	if err != nil {
		t.Fatal(err)
	}
	var ev pdEvent
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	if ev.DedupKey != "anyhook/delivery_held/ship" || ev.Payload.Severity != "warning" ||
		ev.Payload.CustomDetails["delivery_id"] != "dl_1" || ev.Payload.CustomDetails["more"] != 3.0 {
		t.Errorf("held event = %+v %+v", ev, ev.Payload)
	}
}

// TestFailingChannelIsRetried: a channel that fails is posted the
// alert again, after a backoff that grows, until it answers 2xx; then
// never again. Each failure is logged without the channel's URL; a
// healthy channel beside it gets the alert once, at once.
func TestFailingChannelIsRetried(t *testing.T) {
	t.Parallel()
	bad := &recorder{sinktest.Start(t, sinktest.Options{Script: []int{500, 503, 500}, Reply: func(int) string { return "no_service\nsecond line" }})}
	good := newRecorder(t, http.StatusOK)
	f := setup(t, Channel{Slack: bad.srv.URL + "/services/SECRET-TOKEN"}, Channel{Webhook: good.srv.URL})
	f.n.Notify(t.Context(), dead("billing", 1))
	first := bad.next(t)
	good.next(t)
	f.flush() // the failure is recorded: due again in 1s (2s·2⁰, jitter 0)
	for i, wait := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
		f.clock.Add(wait - time.Millisecond)
		f.flush()
		if n := len(bad.posts()); n != i+1 {
			t.Fatalf("retry %d: posted %d times before its backoff of %v ended", i+1, n, wait)
		}
		f.clock.Add(time.Millisecond)
		f.flush()
		if got := bad.next(t); string(got) != string(first) {
			t.Fatalf("retry %d posted %s, want %s", i+1, got, first)
		}
	}
	f.clock.Add(time.Hour)
	f.flush()
	f.n.Stop()
	if n := len(bad.posts()); n != 4 {
		t.Errorf("the channel that failed 3 times got %d posts, want 4 (the 4th taken)", n)
	}
	if n := len(good.posts()); n != 1 {
		t.Errorf("the healthy channel got %d posts, want 1", n)
	}
	logged := f.logs.all()
	if strings.Count(logged, "alert sink failed") != 3 || !strings.Contains(logged, "sink=slack#0") ||
		!strings.Contains(logged, "status 500: no_service second line") || !strings.Contains(logged, "status 503") {
		t.Errorf("logs:\n%s", logged)
	}
	if strings.Contains(logged, "SECRET-TOKEN") {
		t.Errorf("logs leak the channel URL:\n%s", logged)
	}
}

func TestUnreachableChannelDoesNotLeakURL(t *testing.T) {
	t.Parallel()
	r := newRecorder(t, http.StatusOK)
	url := r.srv.URL + "/services/SECRET-TOKEN"
	r.srv.Close() // nothing listens any more
	f := setup(t, Channel{Slack: url})
	f.n.Notify(t.Context(), dead("billing", 1))
	f.n.Stop()
	logged := f.logs.all()
	if !strings.Contains(logged, "alert sink failed") || strings.Contains(logged, "SECRET-TOKEN") {
		t.Errorf("logs:\n%s", logged)
	}
}

func TestStopDrains(t *testing.T) {
	t.Parallel()
	r := newRecorder(t, http.StatusOK)
	f := setup(t, Channel{Webhook: r.srv.URL})
	for i := range 20 {
		f.n.Notify(t.Context(), dead(fmt.Sprintf("d%d", i), i))
	}
	f.n.Stop()
	if n := len(r.posts()); n != 20 {
		t.Errorf("%d posts after Stop, want 20", n)
	}
	f.n.Stop() // idempotent
	f.n.Notify(t.Context(), dead("late", 1))
	if n := len(r.posts()); n != 20 {
		t.Errorf("an alert after Stop was sent")
	}
	if !strings.Contains(f.logs.all(), "alert dropped: notifier stopped") {
		t.Errorf("the late alert was not logged:\n%s", f.logs.all())
	}
}

func TestNotifyBeforeStart(t *testing.T) {
	t.Parallel()
	r := newRecorder(t, http.StatusOK)
	n, err := New([]Channel{{Webhook: r.srv.URL}}, Options{Outbox: outbox(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	n.Notify(t.Context(), dead("billing", 1)) // queued until Start
	n.Start(t.Context())
	n.Start(t.Context()) // idempotent
	if got := decode(t, r.next(t)); got.DeliveryID != "dl_1" {
		t.Errorf("got %+v", got)
	}
	n.Stop()
}

func TestNoChannels(t *testing.T) {
	t.Parallel()
	n, err := New(nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	n.Notify(t.Context(), dead("billing", 1))
	n.Stop() // never started: returns at once
}

func TestNewRejectsBadChannels(t *testing.T) {
	t.Parallel()
	for _, a := range []Channel{
		{},
		{Webhook: "http://a/", Slack: "http://b/"},
		{PagerDuty: &PagerDuty{}},
	} {
		if _, err := New([]Channel{a}, Options{Outbox: outbox(t, nil)}); err == nil {
			t.Errorf("New(%+v) = nil error", a)
		}
		if err := CheckChannels([]Channel{{Webhook: "http://ok/"}, a}); err == nil || !strings.HasPrefix(err.Error(), "alerts[1]") {
			t.Errorf("CheckChannels(…, %+v) = %v, want alerts[1]'s error", a, err)
		}
	}
	if _, err := New([]Channel{{Webhook: "http://ok/"}}, Options{}); err == nil {
		t.Error("New with channels and no outbox = nil error")
	}
}

func TestText(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		m    message
		want string
	}{
		{message{Alert: Alert{Kind: LedgerVerificationFailed, Message: "event ev_9 does not match"}},
			"AnyHook: log verification failed: event ev_9 does not match"},
		{message{Alert: dead("billing", 7), More: 41},
			"AnyHook: delivery dead: destination billing (source stripe, event ev_7, delivery dl_7): 8 attempts; last: 503 — and 41 more"},
		{message{Alert: Alert{Kind: IncidentResolved, Destination: "billing", IncidentID: "inc_1"}},
			"AnyHook: incident resolved: destination billing (incident inc_1)"},
	} {
		if got := tt.m.text(); got != tt.want {
			t.Errorf("text = %q, want %q", got, tt.want)
		}
	}
	if got := truncate("aé", 2); got != "a" {
		t.Errorf("truncate = %q", got)
	}
}

func TestCancelStopsAtOnce(t *testing.T) {
	t.Parallel()
	block := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(block) })
	n, err := New([]Channel{{Webhook: srv.URL}}, Options{Outbox: outbox(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	n.Start(ctx)
	n.Notify(ctx, dead("billing", 1))
	cancel()
	n.Stop() // returns although the channel never answers
}

func TestFlappingEndsOnLatestState(t *testing.T) {
	t.Parallel()
	r := newRecorder(t, http.StatusOK)
	f := setup(t, Channel{Webhook: r.srv.URL})
	ctx := t.Context()
	opened := Alert{Kind: IncidentOpened, Destination: "billing", IncidentID: "inc_1", Message: "503"}
	resolved := Alert{Kind: IncidentResolved, Destination: "billing", IncidentID: "inc_1"}
	f.n.Notify(ctx, opened)
	f.n.Notify(ctx, resolved)
	f.n.Notify(ctx, opened) // said before, but news after the resolve (a reopen)
	f.n.Notify(ctx, Alert{Kind: IncidentResolved, Destination: "shipping", IncidentID: "inc_2"})
	f.n.Stop()
	var got []string
	for _, b := range r.posts() {
		w := decode(t, b)
		got = append(got, fmt.Sprintf("%s/%s+%d", w.Kind, w.Destination, w.More))
	}
	if len(got) != 3 || got[0] != "incident_opened/billing+0" ||
		!strings.Contains(strings.Join(got, " "), "incident_opened/billing+1") ||
		!strings.Contains(strings.Join(got, " "), "incident_resolved/shipping+0") {
		t.Errorf("posts = %v", got)
	}
}

// TestRedirectIsNotFollowedElsewhere: a channel that redirects is a failed
// post, not a delivered alert. net/http would re-send a 301/302/303 as a
// GET (whose 200 counted the alert as sent though none arrived), and a
// 307/308 to another origin with the body (a PagerDuty routing_key) and
// a Referer naming the channel's URL (a Slack or webhook URL is the
// credential). A 307/308 within the channel's origin keeps the POST and is
// followed.
func TestRedirectIsNotFollowedElsewhere(t *testing.T) {
	t.Parallel()
	other := redirecttest.NewElsewhere(t)
	for _, code := range redirecttest.Codes {
		for _, to := range []*redirecttest.Elsewhere{other, nil} {
			channel, posts := redirecttest.Server(t, code, to)
			f := setup(t, Channel{Slack: channel.URL + "/services/SECRET-TOKEN"},
				Channel{PagerDuty: &PagerDuty{RoutingKey: "ROUTING-KEY", URL: channel.URL + "/v2/enqueue"}})
			f.n.Notify(t.Context(), dead("billing", 1))
			f.n.Stop()
			channel.Close()
			logged := f.logs.all()
			switch follow := redirecttest.Followed(code, to != nil); {
			case follow && (posts.Load() != 2 || strings.Contains(logged, "alert sink failed")):
				t.Errorf("%d within the channel: %d posts arrived; logs:\n%s", code, posts.Load(), logged)
			case !follow && strings.Count(logged, "alert sink failed") != 2:
				t.Errorf("%d (elsewhere: %v): not logged as failed; logs:\n%s", code, to != nil, logged)
			case strings.Contains(logged, "SECRET-TOKEN") || strings.Contains(logged, "ROUTING-KEY"):
				t.Errorf("%d (elsewhere: %v): logs leak the channel URL or key:\n%s", code, to != nil, logged)
			}
		}
	}
	if got := other.Requests(); len(got) != 0 {
		t.Errorf("another origin was sent %d requests: %q", len(got), got)
	}
}

// TestPlainHTTPCredentialChannelReachesOnlyLoopback: a Slack URL or a
// PagerDuty routing key over plain http:// is allowed by the configuration
// only to a loopback host, but a name such as localhost is the resolver's
// to answer. Whatever a plain-http credential channel resolves to, the post
// connects only to a loopback address: 192.0.2.1 (a documentation
// address) stands for what /etc/hosts or DNS might have answered, and is
// refused before connecting, with a log line that says why and shows no
// secret. A Slack channel on 127.0.0.1 still gets its post.
func TestPlainHTTPCredentialChannelReachesOnlyLoopback(t *testing.T) {
	t.Parallel()
	local := newRecorder(t, http.StatusOK)
	f := setup(t, Channel{Slack: "http://192.0.2.1:9/services/SECRET-TOKEN"},
		Channel{PagerDuty: &PagerDuty{URL: "http://192.0.2.1:9/v2/enqueue", RoutingKey: "SECRET-KEY"}},
		Channel{Slack: local.srv.URL + "/services/T000/B000/XXXX"})
	f.n.Notify(t.Context(), dead("billing", 1))
	f.n.Stop()
	logged := f.logs.all()
	if strings.Count(logged, "loopback") != 2 || strings.Contains(logged, "SECRET") {
		t.Errorf("want both credential channels at 192.0.2.1 refused for not being loopback, with no secret in the logs:\n%s", logged)
	}
	if n := len(local.posts()); n != 1 {
		t.Errorf("the Slack channel on 127.0.0.1 got %d posts, want 1", n)
	}
}

// TestObserveSeesEveryPost: Observe wraps the transport of the caller's
// client and the loopback-only one a plain-http Slack or PagerDuty channel
// posts through, so every post is seen (the gateway's alert metrics).
func TestObserveSeesEveryPost(t *testing.T) {
	t.Parallel()
	local := newRecorder(t, http.StatusOK)
	var seen atomic.Int64
	observe := func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			seen.Add(1)
			return rt.RoundTrip(r)
		})
	}
	n, err := New([]Channel{{Webhook: local.srv.URL + "/hook"}, {Slack: local.srv.URL + "/services/T000/B000/XXXX"},
		{PagerDuty: &PagerDuty{URL: local.srv.URL + "/v2/enqueue", RoutingKey: "R"}}}, Options{Observe: observe, Outbox: outbox(t, nil)})
	if err != nil {
		t.Fatal(err)
	}
	n.Start(t.Context())
	n.Notify(t.Context(), dead("billing", 1))
	n.Stop()
	if got, posts := seen.Load(), len(local.posts()); got != 3 || posts != 3 {
		t.Errorf("Observe saw %d posts of the %d the channels got, want 3 of 3", got, posts)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
