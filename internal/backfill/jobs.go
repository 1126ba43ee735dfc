package backfill

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/anyhook/anyhook/internal/store"
)

// Job states.
const (
	StateRunning = "running"
	StateDone    = "done"
	StateFailed  = "failed"
)

// Job is one backfill started through the admin API or the dashboard, as
// it stands.
type Job struct {
	Source     string    `json:"source"`
	From       time.Time `json:"from"`
	To         time.Time `json:"to,omitzero"` // absent: up to now
	DryRun     bool      `json:"dry_run"`
	By         string    `json:"by"` // who started it: "api", a dashboard session
	State      string    `json:"state"`
	Progress   Progress  `json:"progress"`
	Error      string    `json:"error,omitempty"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
}

// RunFunc runs one backfill, telling progress of each step.
type RunFunc func(ctx context.Context, source string, from, to time.Time, dryRun bool, progress func(Progress)) (Progress, error)

// The pace of a backfill's record in the database: its process writes it
// every heartbeatEvery while it runs, and a running backfill not written
// for StaleAfter (by the database's clock) ran in a process that stopped
// (crashed, killed, its host lost): it is shown failed, and another can
// start. A process that cannot write its backfill for giveUpAfter stops
// it, before another process may take the source over.
const (
	heartbeatEvery = 5 * time.Second
	StaleAfter     = 30 * time.Second
	giveUpAfter    = StaleAfter - heartbeatEvery
)

// JobsOptions configure Jobs.
type JobsOptions struct {
	Now func() time.Time // default time.Now
	// Log keeps each source's latest backfill in the database, so that
	// every process sharing it sees the backfill one of them runs (and
	// refuses a second), and it outlives the process.
	Log    store.BackfillLog
	Logger *slog.Logger // default: discard
}

// Jobs runs backfills in the background, at most one per source at a
// time, and keeps the latest job of each source (in the database,
// JobsOptions.Log).
type Jobs struct {
	ctx    context.Context
	cancel context.CancelFunc
	// end bounds the database writes of a run's end: cancelled when
	// Stop's deadline passes, so that shutdown does not wait them out.
	end       context.Context
	endCancel context.CancelFunc
	run       RunFunc
	opt       JobsOptions
	wg        sync.WaitGroup
	// The heartbeat's pace: heartbeatEvery and giveUpAfter but in tests.
	beat, giveUp time.Duration

	mu   sync.Mutex
	jobs map[string]*local // this process's latest job of each source
}

// local is a job this process runs or ran.
type local struct {
	job  Job
	run  string        // its id in the database
	done chan struct{} // closed when it has ended and been written
	// heard is when its last write that the database took was sent: the
	// database stamped heard_at at or after it.
	heard time.Time
}

// ErrRunning refuses a backfill of a source while one runs.
var ErrRunning = errors.New("a backfill of this source is running; wait for it to finish")

// Why a run ends early, as its job's error says.
var (
	errShutdown = errors.New("stopped: the gateway process shut down")
	errReplaced = errors.New("stopped: another process took the source over, this one having not recorded its progress for " + StaleAfter.String())
	errCutOff   = errors.New("stopped: its progress could not be recorded in the database for " + giveUpAfter.String() + ", after which another process may take the source over")
)

// NewJobs returns a Jobs that runs each backfill with run.
func NewJobs(run RunFunc, opt JobsOptions) *Jobs {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	end, endCancel := context.WithCancel(context.Background())
	return &Jobs{ctx: ctx, cancel: cancel, end: end, endCancel: endCancel, run: run, opt: opt,
		beat: heartbeatEvery, giveUp: giveUpAfter, jobs: map[string]*local{}}
}

// Start starts a backfill of source and returns it as it starts. While
// one of source runs, here or in another process sharing the database, it
// returns that one and ErrRunning. The database is asked without holding
// the jobs' lock: a slow one stalls no other source's backfill.
func (j *Jobs) Start(source string, from, to time.Time, dryRun bool, by string) (Job, error) {
	ctx, cancel := context.WithCancelCause(j.ctx)
	// Times as the database keeps them (microseconds, UTC), so that every
	// process tells one backfill alike.
	from, to = from.UTC().Truncate(time.Microsecond), to.UTC().Truncate(time.Microsecond)
	l := &local{job: Job{Source: source, From: from, To: to, DryRun: dryRun, By: by, State: StateRunning, StartedAt: j.now()},
		run: store.NewID(), done: make(chan struct{})}
	j.mu.Lock()
	prev := j.jobs[source]
	if prev != nil && prev.job.State == StateRunning {
		running := prev.job // its run writes its progress under the lock
		j.mu.Unlock()
		cancel(nil)
		return running, ErrRunning
	}
	j.jobs[source] = l // holds the source while the database is asked
	j.mu.Unlock()
	l.heard = time.Now()
	sctx, scancel := context.WithTimeout(j.ctx, 10*time.Second)
	cur, err := j.opt.Log.StartBackfill(sctx, l.record(), StaleAfter)
	scancel()
	if err != nil {
		j.mu.Lock()
		j.jobs[source] = prev
		j.mu.Unlock()
		close(l.done) // a Wait that saw the placeholder
		cancel(nil)
		if errors.Is(err, store.ErrBackfillRunning) {
			return j.jobOf(cur), ErrRunning
		}
		return Job{}, err
	}
	started := l.job // before the run may write its progress
	j.wg.Go(func() { j.runJob(ctx, cancel, l) })
	return started, nil
}

// runJob runs l's backfill, writing it to the database as it goes and
// when it ends; cancel (with a cause) ends it early.
func (j *Jobs) runJob(ctx context.Context, cancel context.CancelCauseFunc, l *local) {
	defer close(l.done)
	stop := make(chan struct{})
	var beats sync.WaitGroup
	beats.Go(func() { j.heartbeat(l, cancel, stop) })
	job := l.job // the request: only Start wrote it, before this goroutine
	p, err := j.run(ctx, job.Source, job.From, job.To, job.DryRun, func(p Progress) {
		j.mu.Lock()
		l.job.Progress = p
		j.mu.Unlock()
	})
	// Why it was stopped, rather than the context's error, decided as it
	// returns (a heartbeat may still cancel it before it is waited for).
	if err != nil && ctx.Err() != nil {
		if cause := context.Cause(ctx); errors.Is(cause, context.Canceled) {
			err = errShutdown
		} else {
			err = cause
		}
	}
	close(stop)
	beats.Wait()
	cancel(nil)
	j.mu.Lock()
	l.job.Progress, l.job.FinishedAt, l.job.State = p, j.now(), StateDone
	if err != nil {
		l.job.State, l.job.Error = StateFailed, err.Error()
	}
	ended := l.job
	j.mu.Unlock()
	if !errors.Is(err, errReplaced) { // the row is another run's now
		j.saveEnd(l)
	}
	j.opt.Logger.Info("backfill ended", "source", ended.Source, "state", ended.State, "error", ended.Error, "dry_run", ended.DryRun,
		"pages", ended.Progress.Pages, "found", ended.Progress.Found, "already_had", ended.Progress.AlreadyHad, "new", ended.Progress.New,
		"redelivered", ended.Progress.Redelivered, "took", ended.FinishedAt.Sub(ended.StartedAt).String())
}

// now is the jobs' clock, as the database keeps times.
func (j *Jobs) now() time.Time { return j.opt.Now().UTC().Truncate(time.Microsecond) }

// heartbeat writes l every heartbeatEvery until stop. It ends the run
// (cancel) when another process's run replaced l's in the database, and
// giveUpAfter after the last write the database took was sent, whatever
// the writes in flight: by StaleAfter another process may take the source
// over, and two would run. (The database stamped that write at or after it
// was sent; the local clock measures the time since.)
func (j *Jobs) heartbeat(l *local, cancel context.CancelCauseFunc, stop <-chan struct{}) {
	t := time.NewTicker(j.beat)
	defer t.Stop()
	cutoff := time.AfterFunc(j.giveUp-time.Since(l.heard), func() { cancel(errCutOff) })
	defer cutoff.Stop()
	for {
		select {
		case <-t.C:
		case <-stop:
			return
		}
		sent := time.Now()
		saved, err := j.save(l)
		switch {
		case err == nil && saved:
			cutoff.Reset(j.giveUp - time.Since(sent))
		case err == nil:
			cancel(errReplaced)
			return
		}
	}
}

// saveEnd writes l's end, trying again for up to giveUpAfter while the
// database fails: a backfill whose end is not written shows as
// interrupted, its counts those of its last heartbeat.
func (j *Jobs) saveEnd(l *local) {
	deadline := time.Now().Add(j.giveUp)
	for wait := 250 * time.Millisecond; ; wait = min(2*wait, 4*time.Second) {
		_, err := j.save(l)
		if err == nil || time.Now().Add(wait).After(deadline) {
			return
		}
		select {
		case <-time.After(wait):
		case <-j.end.Done(): // Stop's deadline
			return
		}
	}
}

// save writes l as it stands to the database, and says whether its run
// is still the source's latest. A failure is logged.
func (j *Jobs) save(l *local) (bool, error) {
	j.mu.Lock()
	b := l.record()
	j.mu.Unlock()
	// Not j.ctx: the end of a backfill cut by Stop is written too, until
	// Stop's deadline.
	ctx, cancel := context.WithTimeout(j.end, 10*time.Second)
	defer cancel()
	saved, err := j.opt.Log.SaveBackfill(ctx, b)
	switch {
	case err != nil:
		j.opt.Logger.Warn("backfill: recording its progress failed", "source", b.Source, "err", err)
	case !saved:
		j.opt.Logger.Warn("backfill: another process's backfill of the source replaced this one in the database; stopping it", "source", b.Source)
	}
	return saved, err
}

// record is l's row for the database (which sets when it was heard from).
func (l *local) record() store.Backfill {
	progress, _ := json.Marshal(l.job.Progress)
	return store.Backfill{Source: l.job.Source, Run: l.run, From: l.job.From, To: l.job.To, DryRun: l.job.DryRun, By: l.job.By,
		State: l.job.State, Progress: progress, Error: l.job.Error, StartedAt: l.job.StartedAt, FinishedAt: l.job.FinishedAt}
}

// jobOf is the Job of a database row: a running one not heard from for
// StaleAfter is shown as failed, since nothing runs it.
func (j *Jobs) jobOf(b store.Backfill) Job {
	job := Job{Source: b.Source, From: b.From, To: b.To, DryRun: b.DryRun, By: b.By, State: b.State, Error: b.Error,
		StartedAt: b.StartedAt, FinishedAt: b.FinishedAt}
	if err := json.Unmarshal(b.Progress, &job.Progress); err != nil {
		j.opt.Logger.Warn("backfill: its recorded progress does not read", "source", b.Source, "err", err)
	}
	if b.Stale {
		job.State = StateFailed
		job.Error = "interrupted: the gateway process running it stopped; nothing was heard from it after " + b.HeardAt.UTC().Format(time.RFC3339)
	}
	return job
}

// Get returns the latest backfill of source: in the database, started by
// any process sharing it; without one, this process's own. false: none
// was ever started. An error: the database did not answer, and this
// process runs none of the source (one it ran and ended may no longer be
// the latest: another process may have started one since).
func (j *Jobs) Get(source string) (Job, bool, error) {
	j.mu.Lock()
	l := j.jobs[source]
	var mine Job
	if l != nil {
		mine = l.job
	}
	j.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // after Stop too
	b, ok, err := j.opt.Log.LatestBackfill(ctx, source, StaleAfter)
	cancel()
	switch {
	case err != nil && (l == nil || mine.State != StateRunning):
		return Job{}, false, err
	case err != nil:
		j.opt.Logger.Warn("backfill: reading the latest from the database failed; answering with the one this process runs", "source", source, "err", err)
	case ok && (l == nil || b.Run != l.run):
		return j.jobOf(b), true, nil
	}
	return mine, l != nil, nil
}

// Wait waits until the latest backfill of source has finished, or ctx is
// done, and returns it. One that another process runs is read again
// every pollEvery.
func (j *Jobs) Wait(ctx context.Context, source string) (Job, bool, error) {
	j.mu.Lock()
	l := j.jobs[source]
	j.mu.Unlock()
	if l != nil {
		select {
		case <-l.done:
		case <-ctx.Done():
		}
	}
	for {
		job, ok, err := j.Get(source)
		if err != nil || !ok || job.State != StateRunning {
			return job, ok, err
		}
		select {
		case <-time.After(pollEvery):
		case <-ctx.Done():
			return job, ok, nil
		}
	}
}

// pollEvery is how often Wait reads a backfill another process runs.
const pollEvery = 250 * time.Millisecond

// Stop cancels the running backfills and waits for them to return and
// their ends to be written, or for ctx to end: the writes still in flight
// are then abandoned (an end not written shows as interrupted after
// StaleAfter).
func (j *Jobs) Stop(ctx context.Context) {
	j.cancel()
	done := make(chan struct{})
	go func() {
		j.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		j.endCancel()
		<-done
	}
	j.endCancel()
}
