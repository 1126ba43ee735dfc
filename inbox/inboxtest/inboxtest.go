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
//
// # The sender gave up
//
// Behind a gateway that stops retrying (AnyHook marks a delivery dead after
// max_attempts), a claim whose owner died is never met by a redelivery:
// only Inbox.Sweep applies its policy. The scenario, with a real kill -9 in
// the middle of the effect:
//
//	func TestCaptureGaveUp(t *testing.T) {
//		if _, ok := inboxtest.CrashPoint(); ok { // child: block inside the effect
//			ib := open(t, os.Getenv("DSN"), inbox.Config{})
//			ib.Do(ctx, "capture", ev, inbox.Effect[*sql.Tx]{Policy: inbox.Hold(5 * time.Minute),
//				Run: func(ctx context.Context, c inbox.Claim) error {
//					callProvider(ctx, os.Getenv("PROVIDER"), c.Key) // the parent kills us once it arrives
//					select {}
//				}})
//		}
//		dsn, provider := newDatabase(t), newFakeProvider(t) // provider.called closes on the first call
//		inboxtest.Kill(t, provider.called, "DSN="+dsn, "PROVIDER="+provider.URL)
//		// No redelivery ever comes. Time passes; the sweep runs:
//		inboxtest.AgeClaims(ctx, ib.Driver(), 10*time.Minute)
//		stale, _ := ib.Sweep(ctx) // one StaleClaim, Action StaleHeld; ib.Held lists it
//	}
package inboxtest

import (
	"bytes"
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

// AgeClaims moves every live claim back in time by d, as if d had passed
// by the database clock, so that the next Inbox.Sweep (or Do) judges each
// one by its policy. It returns how many claims it aged.
func AgeClaims[TTx any](ctx context.Context, drv inboxdriver.Driver[TTx], d time.Duration) (int64, error) {
	q := `UPDATE inbox_events SET claimed_at = claimed_at - $1 WHERE status = 'claimed'`
	if drv.Dialect() == inboxdriver.SQLite {
		q = strings.ReplaceAll(q, "$", "?")
	}
	n, err := drv.Exec(ctx, q, d.Microseconds())
	if err != nil {
		return 0, fmt.Errorf("inboxtest: age claims: %w", err)
	}
	return n, nil
}

// CrashExitCode is the exit status of a child process that crashed at its
// point.
const CrashExitCode = 86

const envCrashAt = "INBOXTEST_CRASH_AT"

// Killed is the point CrashPoint reports in a child started by Kill: the
// child does not end by itself; it blocks where the test wants it to die,
// and the parent kills it there.
const Killed inbox.Point = "inboxtest-killed"

// CrashPoint reports whether this process is a child started by Crash or
// Kill, and the point at which it must crash (Killed for Kill).
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
	out, err := child(t, p, env).CombinedOutput()
	t.Logf("crash child at %s:\n%s", p, out)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != CrashExitCode {
		t.Fatalf("inboxtest: child did not crash at %s (want exit status %d): %v", p, CrashExitCode, err)
	}
}

// Kill re-runs the current test in a child process, as Crash does, with
// CrashPoint reporting Killed, and kills it with SIGKILL (kill -9: no
// deferred function, no connection closed, no transaction rolled back by
// the client) as soon as ready is closed — for example when a fake provider
// has received the child's request, so that the process dies in the middle
// of its effect. It fails t if the child ends before ready is closed, and
// returns once the child is gone. The child's output is logged.
func Kill(t testing.TB, ready <-chan struct{}, env ...string) {
	t.Helper()
	if _, ok := CrashPoint(); ok {
		t.Fatal("inboxtest: Kill called in a crash child; check CrashPoint first")
	}
	cmd := child(t, Killed, env)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("inboxtest: start child: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-ready:
		if err := cmd.Process.Kill(); err != nil {
			t.Fatalf("inboxtest: kill child: %v", err)
		}
		err := <-exited
		t.Logf("child killed:\n%s", out.Bytes())
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != -1 {
			t.Fatalf("inboxtest: child was not killed by the signal: %v", err)
		}
	case err := <-exited:
		t.Logf("child output:\n%s", out.Bytes())
		t.Fatalf("inboxtest: child ended by itself before it could be killed: %v", err)
	}
}

// child is the command that re-runs the current test with CrashPoint
// reporting p.
func child(t testing.TB, p inbox.Point, env []string) *exec.Cmd {
	parts := strings.Split(t.Name(), "/")
	for i, s := range parts {
		parts[i] = "^" + regexp.QuoteMeta(s) + "$"
	}
	cmd := exec.Command(os.Args[0], "-test.run="+strings.Join(parts, "/"), "-test.count=1", "-test.v")
	cmd.Env = append(append(os.Environ(), envCrashAt+"="+string(p)), env...)
	return cmd
}
