// Package inboxtest is the test kit for code built on package inbox: it
// injects failures and pauses at inbox's named Points, ages claims so that
// stale-claim policies can be tested without waiting, and crashes a real
// process at a Point by re-running the test binary.
//
// A crash test runs twice. In the parent, Crash starts the same test in a
// child process and checks that it died at the point. In the child,
// CrashPoint reports the point and CrashHook, installed as inbox.Config.Hook,
// exits the process there:
//
//	func TestCaptureCrash(t *testing.T) {
//		if p, ok := inboxtest.CrashPoint(); ok { // child
//			ib := open(t, os.Getenv("DSN"), inbox.Config{Hook: inboxtest.CrashHook(p)})
//			ib.Do(ctx, "capture", ev, effect)
//			t.Fatal("did not crash")
//		}
//		dsn := newDatabase(t)
//		inboxtest.Crash(t, inbox.AfterClaim, "DSN="+dsn)
//		// inspect the database the child left behind
//	}
package inboxtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook/inbox"
	"github.com/anyhook/anyhook/inbox/inboxdriver"
)

// ErrInjected is the error Faults returns at a point set with FailAt.
var ErrInjected = errors.New("inboxtest: injected failure")

// Faults is a programmable inbox.Config.Hook: it fails or pauses operations
// at chosen points. Its zero value injects nothing; it is safe for
// concurrent use.
type Faults struct {
	mu     sync.Mutex
	fail   map[inbox.Point]error
	pauses map[inbox.Point]*Pause
	hits   map[inbox.Point]int
}

// FailAt makes every operation reaching p stop there with err (ErrInjected
// if err is nil), as if the process had died at p: whatever inbox committed
// before p stays, whatever was open rolls back.
func (f *Faults) FailAt(p inbox.Point, err error) {
	if err == nil {
		err = ErrInjected
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail == nil {
		f.fail = make(map[inbox.Point]error)
	}
	f.fail[p] = err
}

// Pause is a one-shot stop at a point; see Faults.PauseAt.
type Pause struct {
	reached chan struct{}
	release chan struct{}
	once    sync.Once
}

// Reached is closed when an operation arrives at the point.
func (p *Pause) Reached() <-chan struct{} { return p.reached }

// Release lets the paused operation continue. It may be called more than
// once, and before the point is reached.
func (p *Pause) Release() { p.once.Do(func() { close(p.release) }) }

// PauseAt makes the next operation reaching p wait there until the returned
// Pause is released (or the operation's context ends). Later arrivals pass.
func (f *Faults) PauseAt(p inbox.Point) *Pause {
	ps := &Pause{reached: make(chan struct{}), release: make(chan struct{})}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pauses == nil {
		f.pauses = make(map[inbox.Point]*Pause)
	}
	f.pauses[p] = ps
	return ps
}

// Hits reports how many operations have reached p.
func (f *Faults) Hits(p inbox.Point) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hits[p]
}

// Hook is the function to install as inbox.Config.Hook.
func (f *Faults) Hook(ctx context.Context, p inbox.Point) error {
	f.mu.Lock()
	if f.hits == nil {
		f.hits = make(map[inbox.Point]int)
	}
	f.hits[p]++
	ps := f.pauses[p]
	delete(f.pauses, p)
	err := f.fail[p]
	f.mu.Unlock()
	if ps != nil {
		close(ps.reached)
		select {
		case <-ps.release:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return err
}

// AgeClaim moves the claim on (source, handler, eventID) back in time by d,
// as if it had been taken d earlier by the database clock, so the next Do
// judges it stale. It fails if there is no live claim.
func AgeClaim[TTx any](ctx context.Context, drv inboxdriver.Driver[TTx], source, handler, eventID string, d time.Duration) error {
	q := `UPDATE inbox_events SET claimed_at = claimed_at - $4
		WHERE source = $1 AND handler = $2 AND event_id = $3 AND status = 'claimed'`
	if drv.Dialect() == inboxdriver.SQLite {
		q = strings.ReplaceAll(q, "$", "?")
	}
	n, err := drv.Exec(ctx, q, source, handler, eventID, d.Microseconds())
	if err != nil {
		return fmt.Errorf("inboxtest: age claim: %w", err)
	}
	if n != 1 {
		return fmt.Errorf("inboxtest: age claim %s/%s/%s: no live claim", source, handler, eventID)
	}
	return nil
}

// CrashExitCode is the exit status of a child process that crashed at its
// point.
const CrashExitCode = 86

const envCrashAt = "INBOXTEST_CRASH_AT"

// CrashPoint reports whether this process is a child started by Crash, and
// the point at which it must crash.
func CrashPoint() (inbox.Point, bool) {
	p := os.Getenv(envCrashAt)
	return inbox.Point(p), p != ""
}

// CrashHook returns an inbox.Config.Hook that ends the process with
// CrashExitCode, without running deferred functions or closing connections,
// when an operation reaches p. Use it in the child of a crash test.
func CrashHook(p inbox.Point) func(context.Context, inbox.Point) error {
	return func(_ context.Context, at inbox.Point) error {
		if at == p {
			os.Exit(CrashExitCode)
		}
		return nil
	}
}

// Crash re-runs the current test (t.Name(), exactly) in a child process of
// the test binary, with env ("KEY=value") added and CrashPoint reporting p,
// and fails t unless the child exits with CrashExitCode: that is, unless
// it really died at p. The child's output is logged.
func Crash(t testing.TB, p inbox.Point, env ...string) {
	t.Helper()
	if _, ok := CrashPoint(); ok {
		t.Fatal("inboxtest: Crash called in a crash child; check CrashPoint first")
	}
	parts := strings.Split(t.Name(), "/")
	for i, s := range parts {
		parts[i] = "^" + regexp.QuoteMeta(s) + "$"
	}
	cmd := exec.Command(os.Args[0], "-test.run="+strings.Join(parts, "/"), "-test.count=1", "-test.v")
	cmd.Env = append(append(os.Environ(), envCrashAt+"="+string(p)), env...)
	out, err := cmd.CombinedOutput()
	t.Logf("crash child at %s:\n%s", p, out)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != CrashExitCode {
		t.Fatalf("inboxtest: child did not crash at %s (want exit status %d): %v", p, CrashExitCode, err)
	}
}
