package throttle

import (
	"fmt"
	"testing"
	"time"
)

func TestBucket(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1700000000, 0)
	b := NewBucket(2, 3) // 2/s, burst 3
	for i := range 3 {
		if ok, _ := b.Allow(t0); !ok {
			t.Fatalf("request %d of the burst refused", i)
		}
	}
	ok, wait := b.Allow(t0)
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("over the burst: %v, wait %v; want refused, 500ms", ok, wait)
	}
	if ok, _ := b.Allow(t0.Add(500 * time.Millisecond)); !ok {
		t.Fatal("refused after a token was refilled")
	}
	if ok, _ := b.Allow(t0.Add(500 * time.Millisecond)); ok {
		t.Fatal("allowed twice on one token")
	}
	// A long pause refills to the burst, not beyond.
	t1 := t0.Add(time.Hour)
	for i := range 3 {
		if ok, _ := b.Allow(t1); !ok {
			t.Fatalf("after a pause, request %d refused", i)
		}
	}
	if ok, _ := b.Allow(t1); ok {
		t.Fatal("the bucket filled beyond its burst")
	}
	// A clock going backwards neither refills nor breaks it.
	if ok, _ := b.Allow(t0); ok {
		t.Fatal("allowed on a clock going backwards")
	}
}

func TestFailures(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1700000000, 0)
	f := NewFailures(3, time.Minute, 100)
	for i := range 3 {
		if _, blocked := f.Blocked("1.2.3.4", t0); blocked {
			t.Fatalf("blocked after %d failures", i)
		}
		f.Fail("1.2.3.4", t0.Add(time.Duration(i)*time.Second))
	}
	wait, blocked := f.Blocked("1.2.3.4", t0.Add(10*time.Second))
	if !blocked || wait != 50*time.Second {
		t.Fatalf("after 3 failures: blocked %v for %v; want 50s (until the window ends)", blocked, wait)
	}
	if _, blocked := f.Blocked("5.6.7.8", t0.Add(10*time.Second)); blocked {
		t.Fatal("another address is blocked too")
	}
	if _, blocked := f.Blocked("1.2.3.4", t0.Add(time.Minute)); blocked {
		t.Fatal("still blocked after the window")
	}
	// Failures spread over more than a window never block.
	for i := range 10 {
		f.Fail("9.9.9.9", t0.Add(time.Duration(i)*40*time.Second))
		if _, blocked := f.Blocked("9.9.9.9", t0.Add(time.Duration(i)*40*time.Second)); blocked && i%2 == 0 {
			t.Fatalf("blocked at failure %d, spread over windows", i)
		}
	}
}

func TestFailuresBoundedMemory(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1700000000, 0)
	f := NewFailures(3, time.Minute, 1000)
	addr := func(i int) string { return fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255) }
	const n = 5000
	for i := range n {
		f.Fail(addr(i), t0.Add(time.Duration(i)*time.Millisecond))
		if f.Len() > 1000 {
			t.Fatalf("tracking %d addresses, want at most 1000", f.Len())
		}
	}
	// The newest attacker is still tracked.
	now := t0.Add(n * time.Millisecond)
	f.Fail(addr(n-1), now)
	f.Fail(addr(n-1), now)
	if _, blocked := f.Blocked(addr(n-1), now); !blocked {
		t.Fatal("a recent address was evicted before older ones")
	}
}
