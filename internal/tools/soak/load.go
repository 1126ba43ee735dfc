package soak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anyhook/anyhook/internal/provider"
)

// The providers' secrets, as the gateways' config has them.
var secrets = map[string]string{
	"stripe":   "whsec_soak_stripe_secret",
	"github":   "soak-github-secret",
	"shopify":  "soak-shopify-secret",
	"standard": "whsec_c29hay1zdGFuZGFyZC1zZWNyZXQtMTIzNDU2Nzg=",
}

var sourceNames = []string{"stripe", "github", "shopify", "standard"}

// event is one provider event, sent until a gateway acknowledges it (as
// providers retry), and possibly again afterwards (a provider duplicate).
type event struct {
	n       int
	source  string
	key     string // the dedup key, as X-AnyHook-Event-Id carries it
	body    []byte
	header  http.Header // before signing
	object  string      // ordering object, "" when none
	version int

	mu      sync.Mutex
	id      string // AnyHook id from the first 2xx
	acked   bool
	resends int // after the ack
}

// load generates events and sends them through the gateways.
type load struct {
	s      *soak
	client *http.Client
	queue  chan *event

	mu       sync.Mutex
	events   []*event
	versions map[string]int // object -> last version generated

	outstanding atomic.Int64 // events not acknowledged yet
	sends       atomic.Int64
	failures    atomic.Int64 // no answer, 5xx or 429: retried
	dupsSent    atomic.Int64 // re-sends of acknowledged events
	reordered   atomic.Int64 // events sent after a newer version of their object
	mismatches  atomic.Int64 // a re-send acknowledged with another AnyHook id
	rejected    atomic.Int64 // 4xx: a bug in the soak or the gateway
	stressed    stressStats

	workers sync.WaitGroup
	stop    context.CancelFunc
}

const (
	sendWorkers = 16
	objectPool  = 40 // ordering objects per ordered source
)

func newLoad(s *soak) *load {
	l := &load{
		s:        s,
		client:   newClient(),
		queue:    make(chan *event, 1<<20),
		versions: map[string]int{},
	}
	ctx, stop := context.WithCancel(context.Background())
	l.stop = stop
	for range sendWorkers {
		l.workers.Go(func() { l.work(ctx) })
	}
	return l
}

// run generates new events at the configured rate until ctx ends.
func (l *load) run(ctx context.Context) {
	tick := time.NewTicker(time.Second / time.Duration(l.s.o.rate))
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		switch f := l.s.float(); {
		case f < 0.08:
			// A provider re-delivers an event it already got a 2xx for.
			l.mu.Lock()
			n := len(l.events)
			l.mu.Unlock()
			if n > 0 {
				ev := l.event(l.s.intn(n))
				ev.mu.Lock()
				acked := ev.acked
				if acked {
					ev.resends++
				}
				ev.mu.Unlock()
				if acked {
					l.dupsSent.Add(1)
					l.queue <- ev
				}
			}
		case f < 0.16:
			// Reordering: two or three versions of one object, newest first.
			src := []string{"stripe", "shopify"}[l.s.intn(2)]
			obj := fmt.Sprintf("%s_obj_%d", src, l.s.intn(objectPool))
			k := 2 + l.s.intn(2)
			group := make([]*event, k)
			for i := range group {
				group[i] = l.newEvent(src, obj)
			}
			for i := k - 1; i >= 0; i-- {
				if i < k-1 {
					l.reordered.Add(1)
				}
				l.queue <- group[i]
			}
		default:
			src := sourceNames[l.s.intn(len(sourceNames))]
			obj := ""
			if src == "stripe" || src == "shopify" {
				obj = fmt.Sprintf("%s_obj_%d", src, l.s.intn(objectPool))
			}
			l.queue <- l.newEvent(src, obj)
		}
	}
}

func (l *load) event(i int) *event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.events[i]
}

func (l *load) all() []*event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]*event(nil), l.events...)
}

// newEvent builds a new event of src (object: its ordering object).
func (l *load) newEvent(src, object string) *event {
	l.mu.Lock()
	n := len(l.events)
	ev := &event{n: n, source: src, header: http.Header{"Content-Type": {"application/json"}}}
	if object != "" {
		l.versions[object]++
		ev.object, ev.version = object, l.versions[object]
	}
	l.events = append(l.events, ev)
	l.mu.Unlock()
	l.outstanding.Add(1)
	pad := fmt.Sprintf("%x", n*2654435761)
	switch src {
	case "stripe":
		ev.key = fmt.Sprintf("evt_soak_%d", n)
		// created is the version: one second per version.
		ev.body = fmt.Appendf(nil, `{"id":%q,"object":"event","type":"invoice.updated","created":%d,"data":{"object":{"id":%q,"pad":%q}}}`,
			ev.key, 1700000000+ev.version, object, pad)
	case "github":
		d := fmt.Sprintf("soak-delivery-%d", n)
		ev.header.Set("X-GitHub-Hook-ID", "4242")
		ev.header.Set("X-GitHub-Delivery", d)
		ev.header.Set("X-GitHub-Event", "push")
		ev.key = "4242:" + d
		ev.body = fmt.Appendf(nil, `{"ref":"refs/heads/main","n":%d,"pad":%q}`, n, pad)
	case "shopify":
		ev.key = fmt.Sprintf("soak-shopify-%d", n)
		ev.header.Set("X-Shopify-Topic", "orders/updated")
		ev.header.Set("X-Shopify-Event-Id", ev.key)
		id := object[len("shopify_obj_"):]
		ev.body = fmt.Appendf(nil, `{"id":%s,"updated_at":%q,"pad":%q}`, id,
			time.Unix(1700000000+int64(ev.version), 0).UTC().Format(time.RFC3339), pad)
	case "standard":
		ev.key = fmt.Sprintf("msg_soak_%d", n)
		ev.header.Set("webhook-id", ev.key)
		ev.body = fmt.Appendf(nil, `{"type":"invoice.paid","n":%d,"pad":%q}`, n, pad)
	}
	return ev
}

// work sends queued events; failures go back to the queue after a pause.
func (l *load) work(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-l.queue:
			if !l.send(ctx, ev) {
				time.AfterFunc(resendInterval, func() { l.queue <- ev })
			}
		}
	}
}

// send signs ev now and posts it to a live gateway; false: retry later.
func (l *load) send(ctx context.Context, ev *event) bool {
	start := time.Now()
	base := l.pickGateway()
	if base == "" {
		return false
	}
	return l.post(ctx, start, base, ev, l.sign(ev))
}

// sign signs ev as its provider would, now.
func (l *load) sign(ev *event) http.Header {
	pr := &provider.Request{Method: "POST", Header: ev.header.Clone(), Body: ev.body}
	if err := provider.Sign(ev.source, secrets[ev.source], pr, time.Now()); err != nil {
		panic(err) // a programming error of the soak
	}
	return pr.Header
}

// post sends ev, signed with header, to the gateway at base, records the
// answer (the request counts from start) and the acknowledgement; false:
// not acknowledged.
func (l *load) post(ctx context.Context, start time.Time, base string, ev *event, header http.Header) bool {
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/webhooks/"+ev.source, bytes.NewReader(ev.body))
	if err != nil {
		return false
	}
	req.Header = header.Clone()
	l.sends.Add(1)
	resp, err := l.client.Do(req)
	if err != nil {
		if ctx.Err() == nil { // not the soak stopping its senders
			l.s.answers.record(start, time.Now(), base, ev.source, 0, err)
		}
		l.failures.Add(1)
		return false
	}
	defer resp.Body.Close()
	var a struct{ Status, ID string }
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	code := resp.StatusCode
	if err != nil {
		code = 0 // the answer was cut off
	}
	if ctx.Err() == nil {
		l.s.answers.record(start, time.Now(), base, ev.source, code, err)
	}
	if code != http.StatusOK {
		if code != 0 && code < 500 && code != http.StatusTooManyRequests {
			l.rejected.Add(1)
			l.s.logf("event %d (%s) answered %d: %s", ev.n, ev.source, code, body)
		}
		l.failures.Add(1)
		return false
	}
	if err := json.Unmarshal(body, &a); err != nil || a.ID == "" {
		l.failures.Add(1)
		return false
	}
	ev.mu.Lock()
	defer ev.mu.Unlock()
	switch {
	case !ev.acked:
		ev.acked, ev.id = true, a.ID
		l.outstanding.Add(-1)
	case ev.id != a.ID:
		l.mismatches.Add(1)
		l.s.logf("event %d (%s %s) acknowledged as %s, earlier as %s", ev.n, ev.source, ev.key, a.ID, ev.id)
	}
	return true
}

func (l *load) pickGateway() string {
	live := l.live()
	if len(live) == 0 {
		return ""
	}
	return live[l.s.intn(len(live))]
}

// live are the base URLs of the gateways running now.
func (l *load) live() []string {
	var live []string
	for _, g := range l.s.gws {
		if a := g.addr(); a != "" {
			live = append(live, a)
		}
	}
	return live
}

// drain waits until every generated event is acknowledged (the providers'
// retries), then stops the senders.
func (l *load) drain(ctx context.Context, timeout time.Duration) error {
	defer func() {
		l.stop()
		l.workers.Wait()
	}()
	deadline := time.Now().Add(timeout)
	for l.outstanding.Load() > 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d events were never acknowledged within %s of healthy running", l.outstanding.Load(), timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	// Re-sends of acknowledged events still queued are not needed.
	return nil
}
