package main

import (
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// TestPostgresBreakerTwoProcesses: two anyhook serve processes on one
// PostgreSQL database deliver to a destination with auto_pause that
// answers 500. Whichever counts the failures trips the breaker, and both
// report it paused by the breaker; the deliveries, old and new, wait
// (paused, none dead, nothing sent: the probe is an hour away); a
// person's resume through the other process clears it, and every event
// arrives, answered 2xx exactly once.
func TestPostgresBreakerTwoProcesses(t *testing.T) {
	t.Parallel()
	var healthy atomic.Bool
	sink := sinktest.Start(t, sinktest.Options{Answer: func(*http.Request, []byte) int {
		if healthy.Load() {
			return http.StatusOK
		}
		return http.StatusInternalServerError
	}})
	dsn := pgDSN(t)
	ps := startConfigs(t, 2, func(i int) string {
		return gatewayConfig(dsn, procURL(sink.URL)(i), "reclaim") + "    auto_pause: {consecutive_failures: 3, probe_every: 1h}\n"
	})
	send := func(from, to int) {
		for i := from; i < to; i++ {
			if code, _, err := sendEvent(ps[i%2].url, fmt.Sprintf("evt_breaker_%d", i)); err != nil || code != 200 {
				t.Fatalf("send %d: %d %v", i, code, err)
			}
		}
	}
	send(0, 6)
	for _, p := range ps {
		testwait.For(t, "each process to report billing paused by its breaker", func() bool {
			var out struct {
				Items []struct {
					Name     string
					PausedBy string `json:"paused_by"`
					Breaker  *struct{ Reason string }
				}
			}
			gatewaytest.AdminJSON(t, p.url+"/api/destinations", &out)
			for _, d := range out.Items {
				if d.Name == "billing" {
					return d.PausedBy == "breaker" && d.Breaker != nil && d.Breaker.Reason != ""
				}
			}
			return false
		})
	}
	testwait.For(t, "the attempts in flight at the trip to end", func() bool { return len(deliveries(t, ps[0].url, "delivering")) == 0 })
	sent := len(sink.Requests())
	send(6, 10)
	testwait.For(t, "all 10 deliveries to wait, paused", func() bool { return len(deliveries(t, ps[1].url, "paused")) == 10 })
	if got := len(sink.Requests()); got != sent {
		t.Fatalf("%d requests sent while the breaker was tripped (no probe was due)", got-sent)
	}
	if dead := deliveries(t, ps[0].url, "dead"); len(dead) != 0 {
		t.Fatalf("%d deliveries dead: the pause must not use them up", len(dead))
	}

	healthy.Store(true)
	adminPost(t, ps[1].url+"/api/destinations/billing/resume")
	testwait.For(t, "every delivery to be delivered", func() bool { return len(deliveries(t, ps[0].url, "delivered")) == 10 })
	for _, d := range deliveries(t, ps[0].url, "delivered") {
		ok := 0
		var ev struct {
			Deliveries []deliveryItem `json:"deliveries"`
		}
		gatewaytest.AdminJSON(t, ps[0].url+"/api/events/"+d.EventID, &ev)
		for _, a := range ev.Deliveries[0].Attempts {
			if a.StatusCode == http.StatusOK {
				ok++
			}
		}
		if ok != 1 {
			t.Errorf("event %s answered 2xx %d times, want once", d.EventID, ok)
		}
	}
}
