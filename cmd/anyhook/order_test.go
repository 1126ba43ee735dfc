package main

// order: per_object across real processes: a kill -9 mid-sequence (the
// rescuer reclaims the heads the dead process held, and each object still
// goes in version order), and two processes on one PostgreSQL database
// (never two deliveries of one object in flight at once).

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// orderConfig is gatewayConfig with billing in order per object.
func orderConfig(database, destURL, policy string) string {
	return gatewayConfig(database, destURL, policy) + "    order: per_object\n"
}

// objectSink is a gatewaytest.ObjectSink that, while holding, keeps every
// request open, unanswered, until released or the sender goes away.
type objectSink struct {
	*gatewaytest.ObjectSink
	hold chan struct{}
}

func newObjectSink(t *testing.T, hold bool) *objectSink {
	s := &objectSink{}
	if hold {
		s.hold = make(chan struct{})
	}
	s.ObjectSink = gatewaytest.NewObjectSink(t, func(r *http.Request, _ string) int {
		s.Mu.Lock()
		hold := s.hold
		s.Mu.Unlock()
		if hold != nil {
			select {
			case <-hold:
			case <-r.Context().Done():
				return 0
			}
		}
		return http.StatusOK
	})
	t.Cleanup(s.release) // before the server closes
	return s
}

// release lets held requests (and all later ones) through.
func (s *objectSink) release() {
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if s.hold != nil {
		close(s.hold)
		s.hold = nil
	}
}

// await waits until cond holds of the sink (checked under its lock).
func (s *objectSink) await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.After(testwait.Timeout) // a failure timeout
	for {
		s.Mu.Lock()
		done := cond()
		s.Mu.Unlock()
		if done {
			return
		}
		select {
		case <-s.Arrived:
		case <-timeout:
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// delivered counts the 2xx answers; the caller holds s.Mu.
func (s *objectSink) delivered() int {
	n := 0
	for _, v := range s.OK {
		n += len(v)
	}
	return n
}

// check fails t if two of one object were ever in flight at once, or an
// object's 2xx answers are not its versions in order, each once, or it
// was ever sent a version before an earlier one was answered.
func (s *objectSink) check(t *testing.T, versions map[string][]int64) {
	t.Helper()
	s.Mu.Lock()
	defer s.Mu.Unlock()
	if len(s.Overlap) > 0 {
		t.Errorf("sent while another delivery of the same object was in flight: %v", s.Overlap)
	}
	for obj, vs := range versions {
		want := slices.Sorted(slices.Values(vs))
		if got := s.OK[obj]; !slices.Equal(got, want) {
			t.Errorf("%s answered 2xx for versions %v, want %v", obj, got, want)
		}
		if got := s.Sent[obj]; !slices.IsSorted(got) {
			t.Errorf("%s sent versions in the order %v", obj, got)
		}
	}
}

// sendObjects pauses billing on the gateway at base, sends, round-robin
// over bases, every version of every object newest first (out of order),
// and resumes billing.
func sendObjects(t *testing.T, bases []string, versions map[string][]int64) {
	t.Helper()
	adminPost(t, bases[0]+"/api/destinations/billing/pause")
	i := 0
	for _, obj := range slices.Sorted(func(yield func(string) bool) {
		for k := range versions {
			if !yield(k) {
				return
			}
		}
	}) {
		vs := slices.Sorted(slices.Values(versions[obj]))
		slices.Reverse(vs)
		for _, v := range vs {
			body, h, err := stripeObjectEvent(fmt.Sprintf("evt_%s_%d", obj, v), obj, v)
			if err != nil {
				t.Fatal(err)
			}
			if code, _, err := postEvent(http.DefaultClient, bases[i%len(bases)], body, h); err != nil || code != 200 {
				t.Fatalf("send %s@%d: %d %v", obj, v, code, err)
			}
			i++
		}
	}
	adminPost(t, bases[0]+"/api/destinations/billing/resume")
}

// TestOrderKillMidSequence: a process holds the heads of three objects in
// flight when it is killed (kill -9); a new process on the same database
// reclaims them when their lease expires, and each object still reaches
// the sink in version order, one delivery at a time.
func TestOrderKillMidSequence(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			database := "sqlite:" + filepath.Join(t.TempDir(), "anyhook.db")
			if db == "postgres" {
				database = pgDSN(t)
			}
			sk := newObjectSink(t, true)
			cfg := writeConfig(t, t.TempDir(), orderConfig(database, sk.URL+"/hooks", "reclaim"))
			p1 := start(t, cfg)
			versions := map[string][]int64{
				"cus_a": {100, 101, 102, 103},
				"cus_b": {200, 201, 202},
				"cus_c": {300, 301, 302, 303},
			}
			sendObjects(t, []string{p1.url}, versions)
			// Each object's head is in flight, and nothing after it.
			sk.await(t, "the three heads to be in flight", func() bool {
				return len(sk.Sent["cus_a"]) > 0 && len(sk.Sent["cus_b"]) > 0 && len(sk.Sent["cus_c"]) > 0
			})
			p1.kill()
			sk.Mu.Lock()
			for obj, vs := range versions {
				if got := sk.Sent[obj]; !slices.Equal(got, vs[:1]) {
					t.Errorf("%s: sent %v before the kill, want its head %d alone", obj, got, vs[0])
				}
			}
			sk.Mu.Unlock()
			// The held requests end with their sender, unanswered.
			sk.await(t, "the killed process's requests to end", func() bool {
				for _, n := range sk.InFlight {
					if n > 0 {
						return false
					}
				}
				return true
			})
			sk.release()
			start(t, cfg) // its rescuer reclaims p1's claims once their lease ends
			sk.await(t, "every version delivered", func() bool { return sk.delivered() == 11 })
			sk.check(t, versions)
			sk.Mu.Lock()
			defer sk.Mu.Unlock()
			for obj, vs := range versions {
				if got := sk.Sent[obj]; len(got) != len(vs)+1 || got[0] != got[1] {
					t.Errorf("%s: sent %v, want its head twice (the lost attempt, then the reclaimed one), then the rest", obj, got)
				}
			}
		})
	}
}

// TestPostgresOrderTwoProcesses: two processes on one PostgreSQL database
// share the queue of a destination with order: per_object; events of
// eight objects arrive out of order at both. No object ever has two
// deliveries in flight, and each object's arrive in version order.
func TestPostgresOrderTwoProcesses(t *testing.T) {
	t.Parallel()
	sk := newObjectSink(t, false)
	dsn := pgDSN(t)
	dir := t.TempDir()
	var bases []string
	for i := range 2 {
		cfg := filepath.Join(dir, fmt.Sprintf("anyhook-%d.yaml", i+1))
		if err := os.WriteFile(cfg, []byte(orderConfig(dsn, fmt.Sprintf("%s/hooks?proc=%d", sk.URL, i+1), "reclaim")), 0o600); err != nil {
			t.Fatal(err)
		}
		bases = append(bases, start(t, cfg).url)
	}
	versions := map[string][]int64{}
	total := 0
	for o := range 8 {
		obj := fmt.Sprintf("cus_%d", o)
		for v := range 6 {
			versions[obj] = append(versions[obj], int64(1000*o+v))
			total++
		}
	}
	sendObjects(t, bases, versions)
	sk.await(t, "every version delivered", func() bool { return sk.delivered() == total })
	sk.check(t, versions)
}
