package rejectlog

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/testkit/testclock"
)

// fakeStore keeps what it is given. When gate is set, RecordRejections
// says so on entered and waits for gate to be closed.
type fakeStore struct {
	mu      sync.Mutex
	batches [][]anyhook.Rejection
	prunes  [][2]int
	err     error
	gate    chan struct{}
	entered chan struct{}
}

func (f *fakeStore) RecordRejections(ctx context.Context, rs []anyhook.Rejection) error {
	if f.gate != nil {
		f.entered <- struct{}{}
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.batches = append(f.batches, append([]anyhook.Rejection(nil), rs...))
	return nil
}

func (f *fakeStore) PruneRejections(ctx context.Context, keepKnown, keepUnknown int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prunes = append(f.prunes, [2]int{keepKnown, keepUnknown})
	return 0, nil
}

func (f *fakeStore) records() []anyhook.Rejection {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []anyhook.Rejection
	for _, b := range f.batches {
		out = append(out, b...)
	}
	return out
}

// counter is an Observer.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) RejectionDropped(reason string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[reason] += n
}

func (c *counter) get(reason string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[reason]
}

func setup(t *testing.T, st Store, lim Limits) (*Log, *counter, *testclock.Clock) {
	t.Helper()
	c := testclock.New(time.Now().Truncate(time.Minute))
	obs := &counter{}
	l := New(st, Options{Limits: lim, Now: c.Now, Observer: obs})
	l.Start(t.Context())
	t.Cleanup(l.Stop)
	return l, obs, c
}

func request(_ string, body string) *http.Request {
	r := httptest.NewRequest("POST", "/webhooks/x", strings.NewReader(body)) // the name is the caller's to give
	r.RemoteAddr = "203.0.113.5:40000"
	r.Header.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
	r.Header.Set("Stripe-Signature", "t=1,v1=00")
	return r
}

func TestRecordKeepsNoBody(t *testing.T) {
	t.Parallel()
	st := &fakeStore{}
	l, _, c := setup(t, st, Limits{})
	body := []byte(`{"id":"evt_secret_payload"}`)
	r := request("stripe", string(body))
	record(l, r, anyhook.Rejection{Source: "stripe", KnownSource: true, Reason: anyhook.RejectSignature, Status: 400, Message: "no signature matched"}, body)

	// An unknown name: long, with control characters and bytes that are
	// not UTF-8; its body is not read.
	name := "wp-admin\x00\n\xff" + strings.Repeat("é", 100)
	u := request(name, "")
	u.ContentLength = 77
	u.Header.Set("User-Agent", strings.Repeat("A", 500))
	record(l, u, anyhook.Rejection{Source: name, Reason: anyhook.RejectUnknownSource, Status: 404, Message: "unknown source " + name}, nil)
	chunked := request("stripe", "")
	chunked.ContentLength = -1
	record(l, chunked, anyhook.Rejection{Source: "stripe", KnownSource: true, Reason: anyhook.RejectTooLarge, Status: 413, Message: "too large"}, nil)
	l.Stop()

	rs := st.records()
	if len(rs) != 3 {
		t.Fatalf("records = %+v", rs)
	}
	sum := sha256.Sum256(body)
	want := anyhook.Rejection{At: c.Now(), Source: "stripe", KnownSource: true, Reason: anyhook.RejectSignature, Status: 400,
		Message: "no signature matched", RemoteAddr: "203.0.113.5:40000", UserAgent: "Stripe/1.0 (+https://stripe.com/docs/webhooks)",
		BodySize: int64(len(body)), BodySHA256: hex.EncodeToString(sum[:]), HeaderCount: 2,
		HeaderBytes: len("User-Agent") + len("Stripe/1.0 (+https://stripe.com/docs/webhooks)") + 4 + len("Stripe-Signature") + len("t=1,v1=00") + 4}
	if !reflect.DeepEqual(rs[0], want) {
		t.Errorf("signature rejection = %+v\nwant %+v", rs[0], want)
	}
	un := rs[1]
	if un.KnownSource || un.BodySize != 77 || un.BodySHA256 != "" || len(un.Source) > maxSource || len(un.UserAgent) != maxUserAgent ||
		len(un.Message) > maxMessage || !strings.HasPrefix(un.Source, "wp-admin??\uFFFD") || strings.ContainsAny(un.Source+un.Message, "\x00\n") {
		t.Errorf("unknown-source rejection = %+v", un)
	}
	for _, s := range []string{un.Source, un.Message, un.UserAgent} {
		if !utf8Valid(s) {
			t.Errorf("%q is not valid UTF-8", s)
		}
	}
	if rs[2].BodySize != -1 || rs[2].BodySHA256 != "" {
		t.Errorf("unannounced body: %+v", rs[2])
	}
	for _, r := range rs {
		if strings.Contains(r.Source+r.Message+r.UserAgent+r.RemoteAddr, "evt_secret_payload") || strings.Contains(r.Message+r.UserAgent, "v1=00") {
			t.Errorf("a record holds a body or a header value: %+v", r)
		}
	}
}

// TestRecordKeepsIDs: a refused request to a configured source keeps the
// values its provider names requests by — Stripe's t= and the body's id,
// never the v1 signature — cleaned and bounded; one to an unknown name
// keeps none.
func TestRecordKeepsIDs(t *testing.T) {
	t.Parallel()
	st := &fakeStore{}
	stripe := provider.Identifier(provider.Settings{Provider: "stripe"})
	c := testclock.New(time.Now())
	l := New(st, Options{Now: c.Now, Identify: func(source string, h http.Header, body []byte) []anyhook.RequestID {
		if source == "noisy" {
			var out []anyhook.RequestID
			for i := range 20 {
				out = append(out, anyhook.RequestID{Name: "X-Id\t" + strings.Repeat("n", 100), Value: fmt.Sprint(i, "\n", strings.Repeat("v", 300))})
			}
			return out
		}
		return stripe(h, body)
	}})
	l.Start(t.Context())
	t.Cleanup(l.Stop)
	r := request("stripe", "")
	r.Header.Set("Stripe-Signature", "t=1700000000,v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd")
	body := []byte(`{"id":"evt_badsig","object":"event"}`)
	rej := anyhook.Rejection{Source: "stripe", KnownSource: true, Reason: anyhook.RejectSignature, Status: 400}
	record(l, r, rej, body)
	record(l, r, rej, nil) // the body was not read: nothing from it
	rej.Source, rej.KnownSource = "stripe-typo", false
	record(l, r, rej, body)
	rej.Source, rej.KnownSource = "noisy", true
	record(l, r, rej, body)
	l.Stop()
	rs := st.records()
	if len(rs) != 4 {
		t.Fatalf("records = %+v", rs)
	}
	want := []anyhook.RequestID{{Name: "Stripe-Signature t", Value: "1700000000"}, {Name: "body id", Value: "evt_badsig"}}
	if !reflect.DeepEqual(rs[0].IDs, want) {
		t.Errorf("ids = %+v, want %+v", rs[0].IDs, want)
	}
	if !reflect.DeepEqual(rs[1].IDs, want[:1]) {
		t.Errorf("ids of an unread body = %+v, want %+v", rs[1].IDs, want[:1])
	}
	if rs[2].IDs != nil {
		t.Errorf("an unknown source's ids = %+v, want none", rs[2].IDs)
	}
	noisy := rs[3].IDs
	if len(noisy) != maxIDs {
		t.Fatalf("%d ids kept, want %d", len(noisy), maxIDs)
	}
	for _, id := range noisy {
		if len(id.Name) > maxIDName || len(id.Value) > maxIDValue || strings.ContainsAny(id.Name+id.Value, "\t\n") {
			t.Errorf("id not cleaned: %q = %q", id.Name, id.Value)
		}
	}
	for _, r := range rs {
		if strings.Contains(fmt.Sprintf("%+v", r), "5257a869") {
			t.Errorf("a record holds the signature: %+v", r)
		}
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "") == s }

// TestCapsPerMinute: per minute, each configured source and all unknown
// names together get PerSource records, and everything PerMinute; the
// rest is dropped and counted; the next minute starts afresh.
func TestCapsPerMinute(t *testing.T) {
	t.Parallel()
	st := &fakeStore{}
	l, obs, c := setup(t, st, Limits{PerSource: 3, PerMinute: 7})
	send := func(source string, known bool, n int) {
		for range n {
			record(l, request(source, ""), anyhook.Rejection{Source: source, KnownSource: known, Reason: anyhook.RejectSignature, Status: 400}, nil)
		}
	}
	send("stripe", true, 5)     // 3 kept
	send("scanner-1", false, 2) // unknown names share one cap: 2 kept
	send("scanner-2", false, 2) // 1 kept
	send("github", true, 3)     // 1 kept: 7 in all
	if got := obs.get(DroppedRate); got != 2+1+2 {
		t.Errorf("dropped over the caps = %d, want 5", got)
	}
	c.Add(time.Minute)
	send("stripe", true, 4) // a new minute: 3 kept
	if got := obs.get(DroppedRate); got != 6 {
		t.Errorf("dropped after a minute = %d, want 6", got)
	}
	l.Stop()
	count := map[string]int{}
	for _, r := range st.records() {
		count[r.Source]++
	}
	if want := map[string]int{"stripe": 6, "scanner-1": 2, "scanner-2": 1, "github": 1}; !maps.Equal(count, want) {
		t.Errorf("recorded %v, want %v", count, want)
	}
}

// TestRecordNeverBlocks: with the store stuck mid-write, Record still
// returns at once; what does not fit in the queue is dropped and counted,
// and what did is written once the store answers.
func TestRecordNeverBlocks(t *testing.T) {
	t.Parallel()
	st := &fakeStore{gate: make(chan struct{}), entered: make(chan struct{}, 1)}
	l, obs, _ := setup(t, st, Limits{Queue: 4, PerSource: 1000, PerMinute: 1000})
	rej := anyhook.Rejection{Source: "stripe", KnownSource: true, Reason: anyhook.RejectSignature, Status: 400}
	record(l, request("stripe", ""), rej, nil)
	<-st.entered // the writer holds that one and is stuck in the store
	for range 50 {
		record(l, request("stripe", ""), rej, []byte("body"))
	}
	if got := obs.get(DroppedQueue); got != 46 {
		t.Errorf("dropped for a full queue = %d, want 46", got)
	}
	close(st.gate)
	l.Stop()
	if got := len(st.records()); got != 5 {
		t.Errorf("written %d, want 5 (one in flight, four queued)", got)
	}
}

func TestStoreErrorCounted(t *testing.T) {
	t.Parallel()
	st := &fakeStore{err: errors.New("disk full")}
	l, obs, _ := setup(t, st, Limits{})
	for range 3 {
		record(l, request("stripe", ""), anyhook.Rejection{Source: "stripe", KnownSource: true, Reason: anyhook.RejectSignature}, nil)
	}
	l.Stop()
	if got := obs.get(DroppedError); got != 3 {
		t.Errorf("dropped on store errors = %d, want 3", got)
	}
}

func TestPrunes(t *testing.T) {
	t.Parallel()
	st := &fakeStore{}
	l, _, _ := setup(t, st, Limits{PruneEvery: 5, Batch: 1, KeepKnown: 50, KeepUnknown: 7, PerSource: 100, PerMinute: 100})
	for range 12 {
		record(l, request("stripe", ""), anyhook.Rejection{Source: "stripe", KnownSource: true, Reason: anyhook.RejectSignature}, nil)
	}
	l.Stop()
	st.mu.Lock()
	defer st.mu.Unlock()
	// At start, then after every 5 records written one by one.
	if len(st.prunes) != 3 || st.prunes[0] != [2]int{50, 7} {
		t.Errorf("prunes = %v, want 3 of (50, 7)", st.prunes)
	}
}

func TestStopBeforeStart(t *testing.T) {
	t.Parallel()
	l := New(&fakeStore{}, Options{})
	l.Stop() // returns: nothing was started
	l.Stop()
}

// record tells l of r as ingest does.
func record(l *Log, r *http.Request, rej anyhook.Rejection, body []byte) {
	rej.RemoteAddr, rej.BodySize = r.RemoteAddr, r.ContentLength
	l.Record(rej, r.Header, body)
}
