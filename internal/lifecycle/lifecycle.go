// Package lifecycle is the start/stop state machine that AnyHook's
// long-running parts share: one goroutine, started once, stopped once,
// with Stop waiting for it.
package lifecycle

import (
	"context"
	"errors"
	"sync"
)

// ErrStopped is the cause of a Runner's context ended by Stop.
var ErrStopped = errors.New("stopped")

// Runner runs one function in a goroutine, from Start until its context
// ends. The zero value is ready to use; a Runner is not reused.
//
// Its states are idle, running and stopped, and every transition is made
// under one lock, so that Start and Stop may be called from any number of
// goroutines: the first Start starts, later ones do nothing; Stop cancels
// the context and returns once the function has returned; a Stop before
// Start leaves nothing to wait for, and a Start after Stop does nothing.
type Runner struct {
	mu      sync.Mutex
	stopped bool
	cancel  context.CancelCauseFunc // set while running
	done    chan struct{}           // closed when the function returns
}

// Start runs run in a new goroutine with a context derived from ctx,
// which ends when ctx does or when Stop is called (its cause is then
// ErrStopped: see Stopped). A part whose work must outlive a cancelled
// parent passes context.WithoutCancel(ctx). Start reports whether it
// started run: false when the Runner was started or stopped before.
func (r *Runner) Start(ctx context.Context, run func(ctx context.Context)) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.done != nil {
		return false
	}
	ctx, r.cancel = context.WithCancelCause(ctx)
	r.done = make(chan struct{})
	go func(cancel context.CancelCauseFunc, done chan struct{}) {
		defer close(done)
		defer cancel(nil)
		run(ctx)
	}(r.cancel, r.done)
	return true
}

// Stop ends the context of run and waits until run has returned. It is
// idempotent: every call returns only after run has returned (at once
// when run was never started). run itself must not call it.
func (r *Runner) Stop() {
	r.mu.Lock()
	r.stopped = true
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	if done == nil {
		return
	}
	cancel(ErrStopped)
	<-done
}

// Stopped reports whether ctx (a Runner's context, or one derived from
// it) was ended by Stop rather than by its parent: a part that drains
// its queue on Stop but drops it when its parent is cancelled asks this.
func Stopped(ctx context.Context) bool {
	return errors.Is(context.Cause(ctx), ErrStopped)
}
