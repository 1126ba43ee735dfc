package soak

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// The hot-object stress: bursts of Stripe events that all concern one
// object (one data.object.id, so every ingest takes the object's version
// mark), each event sent as several identical signed requests at once to
// every running gateway, and each burst repeating half of the previous
// one's events next to new ones. It is the contention of several processes
// on one database, where identical requests on two processes could
// deadlock (a 503) or wait seconds for the deadlock detector.
const (
	hotObject        = "stripe_obj_hot"
	stressNew        = 3 // new events per burst
	stressRepeat     = 3 // events of the previous burst sent again
	stressCopiesEach = 2 // identical requests per event and gateway
	stressMinCopies  = 4 // identical requests per event, at least
)

type stressStats struct {
	bursts, events, requests atomic.Int64
}

// stress sends a burst about every --stress until ctx ends.
func (l *load) stress(ctx context.Context) {
	var prev []*event
	for {
		sleep(ctx, time.Duration((0.5+l.s.float())*float64(l.s.o.stress)))
		if ctx.Err() != nil {
			return
		}
		gws := l.live()
		if len(gws) == 0 {
			continue
		}
		burst := prev[max(0, len(prev)-stressRepeat):]
		fresh := make([]*event, stressNew)
		for i := range fresh {
			fresh[i] = l.newEvent("stripe", hotObject)
		}
		burst = append(burst, fresh...)
		l.burst(ctx, gws, burst)
		// A new event that no copy got acknowledged goes on like any
		// other: the provider retries it.
		for _, ev := range fresh {
			ev.mu.Lock()
			acked := ev.acked
			ev.mu.Unlock()
			if !acked {
				time.AfterFunc(resendInterval, func() { l.queue <- ev })
			}
		}
		prev = fresh
	}
}

// burst sends every event of evs as identical requests (signed once) to
// each gateway of gws, all released at once, and waits for the answers.
func (l *load) burst(ctx context.Context, gws []string, evs []*event) {
	copies := max(stressMinCopies, stressCopiesEach*len(gws))
	ready := make(chan struct{})
	var wg sync.WaitGroup
	for k, ev := range evs {
		h := l.sign(ev)
		for i := range copies {
			base := gws[(k+i)%len(gws)]
			wg.Go(func() {
				<-ready
				l.post(ctx, time.Now(), base, ev, h)
			})
		}
	}
	l.stressed.bursts.Add(1)
	l.stressed.events.Add(int64(len(evs)))
	l.stressed.requests.Add(int64(len(evs) * copies))
	close(ready)
	wg.Wait()
}

// client for the load: enough idle connections per gateway for a burst,
// so that bursts do not open (and leave in TIME_WAIT) new ones each time.
func newClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: sendWorkers + (stressNew+stressRepeat)*stressMinCopies}}
}
