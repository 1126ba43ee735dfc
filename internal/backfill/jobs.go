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
// for staleAfter ran in a process that stopped (crashed, killed, its host
// lost): it is shown failed, and another can start.
const (
	heartbeatEvery = 5 * time.Second
	staleAfter     = 30 * time.Second
)

// JobsOptions configure Jobs.
type JobsOptions struct {
	Now func() time.Time // default time.Now
	// Log, when set, keeps each source's latest backfill in the database,
	// so that every process sharing it sees the backfill one of them runs
	// (and refuses a second), and it outlives the process. nil: each
	// process knows only its own, until it exits.
	Log    store.BackfillLog
	Logger *slog.Logger // default: discard
}

// Jobs runs backfills in the background, at most one per source at a
// time, and keeps the latest job of each source (in the database, with
// JobsOptions.Log).
type Jobs struct {
	ctx    context.Context
	cancel context.CancelFunc
	run    RunFunc
	opt    JobsOptions
	wg     sync.WaitGroup

	mu   sync.Mutex
	jobs map[string]*local // this process's latest job of each source
}

// local is a job this process runs or ran.
type local struct {
	job  Job
	run  string        // its id in the database
	done chan struct{} // closed when it has ended and been written
}

// ErrRunning refuses a backfill of a source while one runs.
var ErrRunning = errors.New("a backfill of this source is running; wait for it to finish")

// NewJobs returns a Jobs that runs each backfill with run.
func NewJobs(run RunFunc, opt JobsOptions) *Jobs {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Jobs{ctx: ctx, cancel: cancel, run: run, opt: opt, jobs: map[string]*local{}}
}

// Start starts a backfill of source and returns it as it starts. While
// one of source runs, here or in another process sharing the database, it
// returns that one and ErrRunning.
func (j *Jobs) Start(source string, from, to time.Time, dryRun bool, by string) (Job, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if cur := j.jobs[source]; cur != nil && cur.job.State == StateRunning {
		return cur.job, ErrRunning
	}
	now := j.opt.Now()
	l := &local{job: Job{Source: source, From: from, To: to, DryRun: dryRun, By: by, State: StateRunning, StartedAt: now},
		run: store.NewID(), done: make(chan struct{})}
	if j.opt.Log != nil {
		ctx, cancel := context.WithTimeout(j.ctx, 10*time.Second)
		cur, err := j.opt.Log.StartBackfill(ctx, l.record(now), now.Add(-staleAfter))
		cancel()
		switch {
		case errors.Is(err, store.ErrBackfillRunning):
			return j.jobOf(cur), ErrRunning
		case err != nil:
			return Job{}, err
		}
	}
	j.jobs[source] = l
	j.wg.Go(func() { j.runJob(l) })
	return l.job, nil
}

// runJob runs l's backfill, writing it to the database as it goes and
// when it ends.
func (j *Jobs) runJob(l *local) {
	defer close(l.done)
	stop := make(chan struct{})
	var beats sync.WaitGroup
	if j.opt.Log != nil {
		beats.Go(func() {
			t := time.NewTicker(heartbeatEvery)
			defer t.Stop()
			for {
				select {
				case <-t.C:
					j.save(l)
				case <-stop:
					return
				}
			}
		})
	}
	job := l.job // the request; only this goroutine and Get's readers touch l
	p, err := j.run(j.ctx, job.Source, job.From, job.To, job.DryRun, func(p Progress) {
		j.mu.Lock()
		l.job.Progress = p
		j.mu.Unlock()
	})
	close(stop)
	beats.Wait()
	j.mu.Lock()
	l.job.Progress, l.job.FinishedAt, l.job.State = p, j.opt.Now(), StateDone
	if err != nil {
		l.job.State, l.job.Error = StateFailed, err.Error()
	}
	j.mu.Unlock()
	j.save(l)
}

// save writes l as it stands to the database. A failure is logged: the
// next write, or the end's, carries it; should the end's fail too, the
// backfill shows as interrupted once staleAfter has passed.
func (j *Jobs) save(l *local) {
	if j.opt.Log == nil {
		return
	}
	j.mu.Lock()
	b := l.record(j.opt.Now())
	j.mu.Unlock()
	// Not j.ctx: the end of a backfill cut by Stop is written too.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	saved, err := j.opt.Log.SaveBackfill(ctx, b)
	switch {
	case err != nil:
		j.opt.Logger.Warn("backfill: recording its progress failed", "source", b.Source, "err", err)
	case !saved:
		j.opt.Logger.Warn("backfill: another backfill of the source replaced this one in the database (this process was taken for stopped)", "source", b.Source)
	}
}

// record is l's row for the database, heard from at now.
func (l *local) record(now time.Time) store.Backfill {
	progress, _ := json.Marshal(l.job.Progress)
	return store.Backfill{Source: l.job.Source, Run: l.run, From: l.job.From, To: l.job.To, DryRun: l.job.DryRun, By: l.job.By,
		State: l.job.State, Progress: progress, Error: l.job.Error, StartedAt: l.job.StartedAt, FinishedAt: l.job.FinishedAt, HeardAt: now}
}

// jobOf is the Job of a database row: a running one whose process has not
// been heard from for staleAfter is shown as failed, since nothing runs it.
func (j *Jobs) jobOf(b store.Backfill) Job {
	job := Job{Source: b.Source, From: b.From, To: b.To, DryRun: b.DryRun, By: b.By, State: b.State, Error: b.Error,
		StartedAt: b.StartedAt, FinishedAt: b.FinishedAt}
	if err := json.Unmarshal(b.Progress, &job.Progress); err != nil {
		j.opt.Logger.Warn("backfill: its recorded progress does not read", "source", b.Source, "err", err)
	}
	if job.State == StateRunning && b.HeardAt.Before(j.opt.Now().Add(-staleAfter)) {
		job.State = StateFailed
		job.Error = "interrupted: the gateway process running it stopped; nothing was heard from it after " + b.HeardAt.UTC().Format(time.RFC3339)
	}
	return job
}

// Get returns the latest backfill of source: in the database, started by
// any process sharing it, or this process's own without one (or while
// the database does not answer).
func (j *Jobs) Get(source string) (Job, bool) {
	j.mu.Lock()
	l := j.jobs[source]
	var mine Job
	if l != nil {
		mine = l.job
	}
	j.mu.Unlock()
	if j.opt.Log != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second) // after Stop too
		b, ok, err := j.opt.Log.LatestBackfill(ctx, source)
		cancel()
		switch {
		case err != nil:
			j.opt.Logger.Warn("backfill: reading the latest from the database failed; answering with this process's own", "source", source, "err", err)
		case ok && (l == nil || b.Run != l.run):
			return j.jobOf(b), true
		}
	}
	return mine, l != nil
}

// Wait waits until the latest backfill of source has finished, or ctx is
// done, and returns it. One that another process runs is read again
// every pollEvery.
func (j *Jobs) Wait(ctx context.Context, source string) (Job, bool) {
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
		job, ok := j.Get(source)
		if !ok || job.State != StateRunning {
			return job, ok
		}
		select {
		case <-time.After(pollEvery):
		case <-ctx.Done():
			return job, ok
		}
	}
}

// pollEvery is how often Wait reads a backfill another process runs.
const pollEvery = 250 * time.Millisecond

// Stop cancels the running backfills and waits for them to return (and
// their ends to be written).
func (j *Jobs) Stop() {
	j.cancel()
	j.wg.Wait()
}
