package gateway_test

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// objectSink is a gatewaytest.ObjectSink that fails every request for
// in_a until it has answered 2xx to bWant events of in_b: in_a's head
// fails meanwhile.
type objectSink struct {
	*gatewaytest.ObjectSink
}

func newObjectSink(t *testing.T, bWant int) *objectSink {
	s := &objectSink{}
	s.ObjectSink = gatewaytest.NewObjectSink(t, func(_ *http.Request, obj string) int {
		s.Mu.Lock()
		defer s.Mu.Unlock()
		if obj == "in_a" && len(s.OK["in_b"]) < bWant {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	return s
}

// waitOK waits until the sink answered 2xx n times in all.
func (s *objectSink) waitOK(t *testing.T, n int) {
	t.Helper()
	timeout := time.After(testwait.Timeout) // a failure timeout
	for {
		s.Mu.Lock()
		got := len(s.OK["in_a"]) + len(s.OK["in_b"])
		s.Mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-s.Arrived:
		case <-timeout:
			t.Fatalf("sink answered 2xx %d times, want %d", got, n)
		}
	}
}

// TestOrderPerObject: the events of two objects arrive out of order while
// the destination is paused; the API says what each waits behind. Once
// resumed, each object's events reach the sink one at a time in version
// order, and in_a's failing head holds back only in_a: in_b is delivered
// meanwhile.
func TestOrderPerObject(t *testing.T) {
	t.Parallel()
	sk := newObjectSink(t, 3)
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:anyhook.db
admin_token: test-token
delivery: {poll_interval: 50ms, grace: 1s}
sources:
  stripe:
    provider: stripe
    secrets: [%s]
destinations:
  ledger:
    url: %s/ledger
    sources: [stripe]
    order: per_object
    max_attempts: 1000
    backoff: {initial: 5ms, max: 20ms}
`, stripeSecret, sk.URL)
	base, g := gatewaytest.Start(t, yaml, gateway.Options{})
	if err := g.Store().SetPaused(t.Context(), "ledger", true); err != nil {
		t.Fatal(err)
	}
	ids := map[string]string{} // "in_a@2" → event id
	for _, e := range []struct {
		obj     string
		version int
	}{{"in_a", 3}, {"in_b", 20}, {"in_a", 1}, {"in_b", 30}, {"in_a", 2}, {"in_b", 10}} {
		key := e.obj + "@" + strconv.Itoa(e.version)
		body := fmt.Appendf(nil, `{"id":"evt_%s_%d","object":"event","type":"invoice.updated","created":%d,"data":{"object":{"id":%q}}}`, e.obj, e.version, e.version, e.obj)
		a := do(t, stripeRequest(t, base+"/webhooks/stripe", stripeSecret, body, time.Now()))
		if a.Code != 200 {
			t.Fatalf("%s: %+v", key, a)
		}
		ids[key] = a.ID
	}

	// Paused: each object's earliest version is its head, the others wait
	// behind it.
	var list struct {
		Items []struct {
			ID          string `json:"id"`
			EventID     string `json:"event_id"`
			WaitsBehind *struct {
				DeliveryID string `json:"delivery_id"`
				EventID    string `json:"event_id"`
				Version    string `json:"version"`
			} `json:"waits_behind"`
		} `json:"items"`
	}
	gatewaytest.AdminJSON(t, base+"/api/deliveries?destination=ledger", &list)
	behind := map[string]string{} // event id → the event it waits behind @ its version
	for _, d := range list.Items {
		if d.WaitsBehind != nil {
			behind[d.EventID] = d.WaitsBehind.EventID + "@" + d.WaitsBehind.Version
		}
	}
	want := map[string]string{
		ids["in_a@2"]: ids["in_a@1"] + "@1", ids["in_a@3"]: ids["in_a@1"] + "@1",
		ids["in_b@20"]: ids["in_b@10"] + "@10", ids["in_b@30"]: ids["in_b@10"] + "@10",
	}
	if len(behind) != len(want) {
		t.Fatalf("waits_behind on %d deliveries, want %d: %v", len(behind), len(want), behind)
	}
	for ev, head := range want {
		if behind[ev] != head {
			t.Fatalf("event %s waits behind %q, want %q", ev, behind[ev], head)
		}
	}

	if err := g.Store().SetPaused(t.Context(), "ledger", false); err != nil {
		t.Fatal(err)
	}
	sk.waitOK(t, 6)
	sk.Mu.Lock()
	defer sk.Mu.Unlock()
	if len(sk.Overlap) > 0 {
		t.Fatalf("two deliveries of one object in flight at once: %v", sk.Overlap)
	}
	if got := sk.OK["in_b"]; !slices.Equal(got, []int64{10, 20, 30}) {
		t.Fatalf("in_b delivered in the order %v, want 10, 20, 30", got)
	}
	if got := sk.OK["in_a"]; !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("in_a delivered in the order %v, want 1, 2, 3", got)
	}
	// in_a's head was tried (and failed) while in_b went on, and nothing
	// after it was sent before it succeeded.
	sent := sk.Sent["in_a"]
	if len(sent) < 4 || !slices.IsSorted(sent) {
		t.Fatalf("in_a requests in the order %v: want its head failing first, then 1, 2, 3", sent)
	}
}
