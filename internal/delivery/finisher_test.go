package delivery

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/groupcommit"
	"github.com/anyhook/anyhook/internal/store"
)

// finishStore records each Finish call. It fences like the real stores: an
// outcome holds the claim only if its attempt is the delivery's current
// one. The first call blocks until gate is closed, so that the test can
// queue more outcomes behind it.
type finishStore struct {
	gate    chan struct{}
	mu      sync.Mutex
	current map[string]int // delivery -> attempt holding the claim
	calls   [][]string     // delivery:attempt per call
	bad     string         // a delivery whose outcome fails its whole call
	entered chan struct{}  // closed when the first call has begun, if set
}

func (s *finishStore) Claim(context.Context, string, int, time.Duration) ([]store.Claim, error) {
	return nil, nil
}

func (s *finishStore) ClaimInOrder(context.Context, string, int, time.Duration) ([]store.Claim, error) {
	return nil, nil
}

func (s *finishStore) ExpirePending(context.Context, string, time.Time, int, string) ([]anyhook.Delivery, error) {
	return nil, nil
}

func (s *finishStore) Rescue(context.Context, func(string) (store.StaleRule, bool)) ([]anyhook.Delivery, error) {
	return nil, nil
}

func (s *finishStore) Finish(ctx context.Context, outs []store.Outcome) ([]string, error) {
	s.mu.Lock()
	first := len(s.calls) == 0
	var call []string
	for _, o := range outs {
		call = append(call, o.DeliveryID+":"+string(rune('0'+o.Attempt)))
	}
	s.calls = append(s.calls, call)
	s.mu.Unlock()
	if first {
		if s.entered != nil {
			close(s.entered)
		}
		<-s.gate
	}
	var lost []string
	for _, o := range outs {
		if o.DeliveryID == s.bad {
			return nil, errors.New("constraint failed")
		}
		if s.current[o.DeliveryID] != o.Attempt {
			lost = append(lost, o.DeliveryID)
		}
	}
	return lost, nil
}

// finishReq is one queued outcome and the answer it got.
type finishReq struct {
	out  store.Outcome
	lost bool
	err  error
}

// queued starts a finisher, sends a first outcome (whose Finish blocks on
// the gate), then queues outs behind it, so the batches the finisher
// forms are known in advance.
func queued(t *testing.T, st *finishStore, max int, outs ...store.Outcome) (first *finishReq, reqs []*finishReq) {
	t.Helper()
	st.entered = make(chan struct{})
	f := newFinisher(st, max)
	f.Start(t.Context())
	t.Cleanup(f.Stop)
	first = &finishReq{out: store.Outcome{DeliveryID: "first", Attempt: 1}}
	fp, err := f.c.Add(first.out)
	if err != nil {
		t.Fatal(err)
	}
	<-st.entered // the first Finish has begun and blocks
	var ps []*groupcommit.Pending[store.Outcome, bool]
	for _, o := range outs {
		p, err := f.c.Add(o)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
		reqs = append(reqs, &finishReq{out: o})
	}
	close(st.gate)
	first.lost, first.err = fp.Wait(t.Context())
	for i, p := range ps {
		reqs[i].lost, reqs[i].err = p.Wait(t.Context())
	}
	return first, reqs
}

func out(id string, attempt int) store.Outcome {
	return store.Outcome{DeliveryID: id, Attempt: attempt, Status: anyhook.StatusDelivered}
}

func TestFinisherBatchesWhatQueuedDuringACommit(t *testing.T) {
	t.Parallel()
	st := &finishStore{gate: make(chan struct{}), current: map[string]int{"first": 1, "a": 1, "b": 1, "c": 1, "d": 1, "e": 1}}
	_, reqs := queued(t, st, 3, out("a", 1), out("b", 1), out("c", 1), out("d", 1), out("e", 1))
	want := [][]string{{"first:1"}, {"a:1", "b:1", "c:1"}, {"d:1", "e:1"}}
	if !slices.EqualFunc(st.calls, want, slices.Equal) {
		t.Errorf("Finish calls = %v, want %v (batches bounded by max)", st.calls, want)
	}
	for _, r := range reqs {
		if r.lost || r.err != nil {
			t.Errorf("%s: lost %v, err %v", r.out.DeliveryID, r.lost, r.err)
		}
	}
}

func TestFinisherKeepsTwoAttemptsOfOneDeliveryApart(t *testing.T) {
	t.Parallel()
	// Delivery a was rescued and claimed again: attempt 2 holds the claim,
	// and the late outcome of attempt 1 must be the one reported lost.
	st := &finishStore{gate: make(chan struct{}), current: map[string]int{"first": 1, "a": 2, "b": 1, "c": 1}}
	_, reqs := queued(t, st, 10, out("a", 1), out("b", 1), out("a", 2), out("c", 1))
	want := [][]string{{"first:1"}, {"a:1", "b:1"}, {"a:2", "c:1"}}
	if !slices.EqualFunc(st.calls, want, slices.Equal) {
		t.Errorf("Finish calls = %v, want %v", st.calls, want)
	}
	for _, r := range reqs {
		wantLost := r.out.DeliveryID == "a" && r.out.Attempt == 1
		if r.lost != wantLost || r.err != nil {
			t.Errorf("%s attempt %d: lost %v, err %v; want lost %v", r.out.DeliveryID, r.out.Attempt, r.lost, r.err, wantLost)
		}
	}
}

func TestFinisherIsolatesAFailingOutcome(t *testing.T) {
	t.Parallel()
	st := &finishStore{gate: make(chan struct{}), current: map[string]int{"first": 1, "a": 1, "b": 1, "c": 1}, bad: "b"}
	_, reqs := queued(t, st, 10, out("a", 1), out("b", 1), out("c", 1))
	want := [][]string{{"first:1"}, {"a:1", "b:1", "c:1"}, {"a:1"}, {"b:1"}, {"c:1"}}
	if !slices.EqualFunc(st.calls, want, slices.Equal) {
		t.Errorf("Finish calls = %v, want %v (the failed batch retried one by one)", st.calls, want)
	}
	for _, r := range reqs {
		if (r.err != nil) != (r.out.DeliveryID == "b") || r.lost {
			t.Errorf("%s: lost %v, err %v", r.out.DeliveryID, r.lost, r.err)
		}
	}
}

func TestLimiter(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }

	l := newLimiter(50, clock) // bucket of 5
	if got, _ := l.take(16); got != 5 {
		t.Fatalf("full bucket gave %d, want 5", got)
	}
	got, wait := l.take(16)
	if got != 0 || wait != 20*time.Millisecond {
		t.Fatalf("empty bucket gave %d, wait %v; want 0, 20ms", got, wait)
	}
	now = now.Add(60 * time.Millisecond) // 3 tokens
	if got, _ := l.take(16); got != 3 {
		t.Fatalf("after 60ms got %d, want 3", got)
	}
	l.giveBack(2)
	if got, _ := l.take(1); got != 1 {
		t.Fatalf("after giving back got %d, want 1", got)
	}
	now = now.Add(time.Hour) // never more than the bucket
	if got, _ := l.take(100); got != 5 {
		t.Fatalf("after an hour got %d, want 5", got)
	}

	slow := newLimiter(0.5, clock) // one request every 2s, bucket of 1
	if got, _ := slow.take(4); got != 1 {
		t.Fatalf("slow: first take gave %d, want 1", got)
	}
	if got, wait := slow.take(4); got != 0 || wait != 2*time.Second {
		t.Fatalf("slow: second take gave %d, wait %v; want 0, 2s", got, wait)
	}

	var none *limiter // no rate: everything allowed
	if got, _ := none.take(7); got != 7 {
		t.Fatalf("no limit gave %d, want 7", got)
	}
}
