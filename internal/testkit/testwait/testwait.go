// Package testwait waits, in tests, for something another process or
// goroutine does and announces no signal for: a row a child process
// writes, a page an HTTP server answers. It polls a check with a short
// backoff until the check holds. The timeout is a failure timeout, never a
// measurement: a passing test takes as long as the awaited thing takes,
// and a test fails only when the thing never happens, with a message that
// says what was awaited and what was last seen.
//
// In-process tests should wait on a signal instead (a channel the code
// under test sends on, such as the gateway's test observer); testwait is
// for what crosses a process or offers no hook.
package testwait

import (
	"errors"
	"testing"
	"time"
)

// Timeout is the failure timeout of [For] and [Value]: generous, since the
// machine running the tests may be loaded; a passing test never waits it.
const Timeout = 60 * time.Second

// For polls ok until it returns true, failing t with "timed out after
// Timeout waiting for what" if it never does.
func For(t testing.TB, what string, ok func() bool) {
	t.Helper()
	Within(t, Timeout, what, ok)
}

// Within is [For] with another failure timeout (a long-running process
// step, for example).
func Within(t testing.TB, timeout time.Duration, what string, ok func() bool) {
	t.Helper()
	ValueWithin(t, timeout, what, func() (struct{}, error) {
		if ok() {
			return struct{}{}, nil
		}
		return struct{}{}, errNotYet
	})
}

// Value polls get until it returns a nil error, and returns its value.
// The error says why the value is not the awaited one yet (what was seen);
// the last one is in the failure message.
func Value[T any](t testing.TB, what string, get func() (T, error)) T {
	t.Helper()
	return ValueWithin(t, Timeout, what, get)
}

// ValueWithin is [Value] with another failure timeout.
func ValueWithin[T any](t testing.TB, timeout time.Duration, what string, get func() (T, error)) T {
	t.Helper()
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	for {
		v, err := get()
		if err == nil {
			return v
		}
		if time.Now().After(deadline) {
			if err == errNotYet {
				t.Fatalf("timed out after %v waiting for %s", timeout, what)
			} else {
				t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
			}
			return v
		}
		time.Sleep(pause)
		pause = min(2*pause, 50*time.Millisecond)
	}
}

var errNotYet = errors.New("not yet")
