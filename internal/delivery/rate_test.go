package delivery_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/store"
)

// TestRateLimitsRequests runs a destination with rate 1/s on a clock the
// test moves: however often the dispatcher polls, the k-th request can
// only be sent once the clock has moved k-1 seconds, and the rest of the
// due deliveries wait.
func TestRateLimitsRequests(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Unix(1_700_000_000, 0)
	advanced := 0 // seconds the clock has moved
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }

	arrived := make(chan int, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		a := advanced
		mu.Unlock()
		arrived <- a
	}))
	t.Cleanup(srv.Close)

	const n = 5
	var claims []store.Claim
	for i := range n {
		c := claim("slow")
		c.Delivery.ID, c.Event.ID = fmt.Sprintf("d%d", i), fmt.Sprintf("e%d", i)
		claims = append(claims, c)
	}
	st := newFakeStore(claims...)
	other := claim("fast") // a destination without a rate is not held back
	other.Delivery.ID = "f1"
	st.claims = append(st.claims, other)
	d := delivery.Destination{Name: "slow", URL: srv.URL, Timeout: 10 * time.Second, MaxAttempts: 3, Initial: time.Second, Max: time.Second,
		MaxInFlight: 16, Rate: 1}
	fast := d
	fast.Name, fast.Rate = "fast", 0
	e := delivery.New(st, delivery.Options{Destinations: []delivery.Destination{d, fast}, PollInterval: time.Millisecond, Now: clock})
	e.Start(t.Context())
	defer e.Stop(time.Second)

	for k := 1; k <= n+1; k++ {
		select {
		case a := <-arrived:
			// Requests so far: k, of which one for "fast"; "slow" may
			// have sent at most advanced+1.
			if slow := k - 1; slow > a+1 {
				t.Fatalf("request %d arrived after the clock moved %ds: rate 1/s exceeded", k, a)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("only %d requests arrived", k-1)
		}
		if k >= 2 { // the fast one and the first slow one need no time
			mu.Lock()
			now = now.Add(time.Second)
			advanced++
			mu.Unlock()
		}
	}
	got := map[string]anyhook.DeliveryStatus{}
	for range n + 1 {
		o := <-st.outcomes
		got[o.DeliveryID] = o.Status
	}
	if len(got) != n+1 || got["d4"] != anyhook.StatusDelivered || got["f1"] != anyhook.StatusDelivered {
		t.Errorf("outcomes = %v", got)
	}
}
