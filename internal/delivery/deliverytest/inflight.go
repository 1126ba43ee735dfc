// Package deliverytest is a test kit for what the delivery engine sends
// to a destination: InFlight watches the requests a destination is
// serving and flags what the engine promises never to do — two attempts
// of one delivery in flight at once (an attempt outliving its lease), and,
// for a destination with order: per_object, two deliveries of one object
// in flight at once or a lower version delivered after a higher one
// without X-AnyHook-Stale. The delivery tests' destinations and `anyhook
// soak`'s use it.
package deliverytest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"

	"github.com/anyhook/anyhook/internal/store"
)

// maxExamples bounds the examples a Report keeps.
const maxExamples = 20

// InFlight records the requests a destination serves. The zero value is
// ready; it is safe for concurrent use.
type InFlight struct {
	// Ordered says the destination has order: per_object: an object's
	// requests must not overlap, nor its versions go backwards unflagged.
	Ordered bool

	mu         sync.Mutex
	deliveries map[string]int    // X-AnyHook-Delivery → requests in flight
	objects    map[string]int    // source and object → requests in flight
	highest    map[string]string // source and object → highest version delivered
	rep        Report
	bad        chan struct{} // closed at the first defect
}

// Report is what InFlight saw.
type Report struct {
	Requests    int
	PerDelivery int // requests that began while another of their delivery was in flight
	PerObject   int // (Ordered) requests that began while another of their object was in flight
	Inversions  int // (Ordered) versions delivered after a higher one of their object, without X-AnyHook-Stale
	Examples    []string
}

// Defects is the number of defects seen.
func (r Report) Defects() int { return r.PerDelivery + r.PerObject + r.Inversions }

// Begin records that r, a request of the engine's, has arrived, and
// returns the function to call once it has ended: with delivered set
// when it was answered 2xx. A request has ended once its handler has
// returned or its sender is gone (r.Context() is done), whichever is
// first: an abandoned request no longer counts as in flight. Begin reads
// r's body: until it is read, the server does not notice a sender that
// is gone.
func (f *InFlight) Begin(r *http.Request) (end func(delivered bool)) {
	io.Copy(io.Discard, r.Body)
	id := r.Header.Get("X-AnyHook-Delivery")
	obj := ""
	if o := r.Header.Get("X-AnyHook-Object"); o != "" && f.Ordered {
		obj = r.Header.Get("X-AnyHook-Source") + " " + o
	}
	what := fmt.Sprintf("delivery %s attempt %s", id, r.Header.Get("X-AnyHook-Attempt"))
	if obj != "" {
		what += fmt.Sprintf(" (object %s version %s)", obj, r.Header.Get("X-AnyHook-Version"))
	}
	f.mu.Lock()
	f.init()
	f.rep.Requests++
	if f.deliveries[id]++; f.deliveries[id] > 1 {
		f.defect(&f.rep.PerDelivery, what+": another attempt of its delivery is in flight")
	}
	if obj != "" {
		if f.objects[obj]++; f.objects[obj] > 1 {
			f.defect(&f.rep.PerObject, what+": another delivery of its object is in flight")
		}
	}
	f.mu.Unlock()
	var once sync.Once
	finish := func(delivered bool) {
		once.Do(func() {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.deliveries[id]--
			if obj == "" {
				return
			}
			f.objects[obj]--
			if !delivered {
				return
			}
			v := r.Header.Get("X-AnyHook-Version")
			switch h, ok := f.highest[obj]; {
			case !ok || store.CompareVersions(v, h) > 0:
				f.highest[obj] = v
			case store.CompareVersions(v, h) < 0 && r.Header.Get("X-AnyHook-Stale") != "true":
				f.defect(&f.rep.Inversions, fmt.Sprintf("%s: delivered after version %s, without X-AnyHook-Stale", what, h))
			}
		})
	}
	stop := context.AfterFunc(r.Context(), func() { finish(false) })
	return func(delivered bool) {
		stop()
		finish(delivered)
	}
}

// Open is the number of requests in flight now.
func (f *InFlight) Open() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, k := range f.deliveries {
		n += k
	}
	return n
}

// Report returns what f has seen so far.
func (f *InFlight) Report() Report {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.rep
	r.Examples = append([]string(nil), f.rep.Examples...)
	return r
}

// Bad is closed at the first defect.
func (f *InFlight) Bad() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.init()
	return f.bad
}

func (f *InFlight) init() {
	if f.deliveries == nil {
		f.deliveries, f.objects, f.highest, f.bad = map[string]int{}, map[string]int{}, map[string]string{}, make(chan struct{})
	}
}

// defect counts one defect in n, with its example; f.mu is held.
func (f *InFlight) defect(n *int, example string) {
	if f.rep.Defects() == 0 {
		close(f.bad)
	}
	*n++
	if len(f.rep.Examples) < maxExamples {
		f.rep.Examples = append(f.rep.Examples, example)
	}
}
