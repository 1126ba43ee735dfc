package gateway_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// signals is the gateway's test observer (gateway.Options.Observer): it
// counts each delivery attempt and rescue the engine reports, once the
// store recorded it and the metrics counted it, and wakes whoever waits
// for the next report. Tests wait on it instead of polling.
type signals struct {
	mu      sync.Mutex
	counts  map[string]int // "attempted billing dead" → reports
	changed chan struct{}  // closed, and replaced, at each report
}

func newSignals() *signals {
	return &signals{counts: map[string]int{}, changed: make(chan struct{})}
}

func (s *signals) Attempted(destination string, status anyhook.DeliveryStatus, _ anyhook.Attempt) {
	s.report("attempted " + destination + " " + string(status))
}

func (s *signals) Rescued(destination string, status anyhook.DeliveryStatus) {
	s.report("rescued " + destination + " " + string(status))
}

func (s *signals) Released(destination, reason string) {
	s.report("released " + destination + " " + reason)
}

func (s *signals) report(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.counts[key]++
	close(s.changed)
	s.changed = make(chan struct{})
}

// count is how many reports of key ("attempted billing delivered") came.
func (s *signals) count(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.counts[key]
}

// wait calls check now and again after each report until it returns nil;
// it fails t, with check's last error, if testwait.Timeout (a failure
// timeout) passes first.
func (s *signals) wait(t *testing.T, what string, check func() error) {
	t.Helper()
	timeout := time.NewTimer(testwait.Timeout)
	defer timeout.Stop()
	for {
		s.mu.Lock()
		next := s.changed
		s.mu.Unlock()
		err := check()
		if err == nil {
			return
		}
		select {
		case <-next:
		case <-timeout.C:
			t.Fatalf("timed out after %v waiting for %s: %v", testwait.Timeout, what, err)
		}
	}
}

// waitCount waits until n reports of key came.
func (s *signals) waitCount(t *testing.T, key string, n int) {
	t.Helper()
	s.wait(t, fmt.Sprintf("%d reports of %q", n, key), func() error {
		if got := s.count(key); got < n {
			return fmt.Errorf("%d so far", got)
		}
		return nil
	})
}
