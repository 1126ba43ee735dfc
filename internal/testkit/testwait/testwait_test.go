package testwait

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a testing.TB whose Fatalf records the message and ends the
// goroutine, as the real one does.
type recorder struct {
	testing.TB
	mu  sync.Mutex
	msg string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) {
	r.mu.Lock()
	r.msg = fmt.Sprintf(format, args...)
	r.mu.Unlock()
	runtime.Goexit()
}

// run calls f on a goroutine of its own, as a test would, and returns the
// failure message ("" when f did not fail).
func run(f func(tb testing.TB)) string {
	r := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		f(r)
	}()
	<-done
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msg
}

func TestForReturnsOnceTheCheckHolds(t *testing.T) {
	calls := 0
	if msg := run(func(tb testing.TB) {
		For(tb, "the third call", func() bool { calls++; return calls == 3 })
	}); msg != "" || calls != 3 {
		t.Fatalf("failed %q after %d calls, want success after 3", msg, calls)
	}
}

func TestValueReturnsTheAwaitedValue(t *testing.T) {
	n := 0
	var got int
	if msg := run(func(tb testing.TB) {
		got = Value(tb, "n to reach 5", func() (int, error) {
			n++
			if n < 5 {
				return n, fmt.Errorf("n is %d", n)
			}
			return n, nil
		})
	}); msg != "" || got != 5 {
		t.Fatalf("Value = %d, failure %q; want 5", got, msg)
	}
}

// A check that never holds fails with what was awaited and, for Value,
// what was last seen. (The short timeouts here are failure timeouts too:
// these checks can never pass.)
func TestNeverFailsNamingWhatWasAwaited(t *testing.T) {
	msg := run(func(tb testing.TB) {
		Within(tb, 10*time.Millisecond, "the moon to turn blue", func() bool { return false })
	})
	if !strings.Contains(msg, "waiting for the moon to turn blue") || strings.Contains(msg, "not yet") {
		t.Errorf("For's failure = %q", msg)
	}
	msg = run(func(tb testing.TB) {
		ValueWithin(tb, 10*time.Millisecond, "three rows", func() (int, error) { return 2, errors.New("2 rows") })
	})
	if !strings.Contains(msg, "waiting for three rows: 2 rows") {
		t.Errorf("Value's failure = %q", msg)
	}
}
