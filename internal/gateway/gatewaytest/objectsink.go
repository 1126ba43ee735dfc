package gatewaytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/anyhook/anyhook/internal/testkit/sinktest"
)

// ObjectSink is a destination on 127.0.0.1 (a sinktest.Sink) that
// records, per Stripe object (data.object.id), the versions (created) it
// was sent, in order, and those it answered 2xx, and any request that
// came while another of its object was in flight. Answer decides each
// request's status; 0 leaves it unanswered. Mu guards the records.
type ObjectSink struct {
	*sinktest.Sink
	Mu       sync.Mutex
	InFlight map[string]int
	Overlap  []string           // "object@version" of each request sent while another was in flight
	Sent     map[string][]int64 // object → versions, every request
	OK       map[string][]int64 // object → versions answered 2xx
	// Arrived gets a value as each request arrives and once its answer is
	// decided.
	Arrived chan struct{}
}

// NewObjectSink starts the sink, answering each request of object obj
// with answer(r, obj) (called without Mu held), until the test ends.
func NewObjectSink(t testing.TB, answer func(r *http.Request, obj string) int) *ObjectSink {
	s := &ObjectSink{InFlight: map[string]int{}, Sent: map[string][]int64{}, OK: map[string][]int64{}, Arrived: make(chan struct{}, 10000)}
	s.Sink = sinktest.Start(t, sinktest.Options{Answer: func(r *http.Request, raw []byte) int {
		var ev struct {
			Created int64 `json:"created"`
			Data    struct {
				Object struct {
					ID string `json:"id"`
				} `json:"object"`
			} `json:"data"`
		}
		if err := json.Unmarshal(raw, &ev); err != nil {
			t.Errorf("sink: %v", err)
		}
		obj := ev.Data.Object.ID
		s.Mu.Lock()
		s.InFlight[obj]++
		if s.InFlight[obj] > 1 {
			s.Overlap = append(s.Overlap, fmt.Sprintf("%s@%d", obj, ev.Created))
		}
		s.Sent[obj] = append(s.Sent[obj], ev.Created)
		s.Mu.Unlock()
		s.Arrived <- struct{}{}
		code := answer(r, obj)
		s.Mu.Lock()
		s.InFlight[obj]--
		if code >= 200 && code < 300 {
			s.OK[obj] = append(s.OK[obj], ev.Created)
		}
		s.Mu.Unlock()
		s.Arrived <- struct{}{}
		return code
	}})
	return s
}
