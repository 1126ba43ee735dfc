package backfill

import (
	"context"
	"errors"
	"sync"
	"time"
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

// Jobs runs backfills in the background, at most one per source at a
// time, and keeps the latest job of each source.
type Jobs struct {
	ctx    context.Context
	cancel context.CancelFunc
	run    RunFunc
	now    func() time.Time
	wg     sync.WaitGroup

	mu   sync.Mutex
	jobs map[string]*Job
	done map[string]chan struct{}
}

// ErrRunning refuses a backfill of a source while one runs.
var ErrRunning = errors.New("a backfill of this source is running; wait for it to finish")

// NewJobs returns a Jobs that runs each backfill with run.
func NewJobs(run RunFunc, now func() time.Time) *Jobs {
	ctx, cancel := context.WithCancel(context.Background())
	return &Jobs{ctx: ctx, cancel: cancel, run: run, now: now, jobs: map[string]*Job{}, done: map[string]chan struct{}{}}
}

// Start starts a backfill of source and returns it as it starts.
func (j *Jobs) Start(source string, from, to time.Time, dryRun bool, by string) (Job, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if cur := j.jobs[source]; cur != nil && cur.State == StateRunning {
		return *cur, ErrRunning
	}
	job := &Job{Source: source, From: from, To: to, DryRun: dryRun, By: by, State: StateRunning, StartedAt: j.now()}
	j.jobs[source] = job
	done := make(chan struct{})
	j.done[source] = done
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		defer close(done)
		p, err := j.run(j.ctx, source, from, to, dryRun, func(p Progress) {
			j.mu.Lock()
			job.Progress = p
			j.mu.Unlock()
		})
		j.mu.Lock()
		defer j.mu.Unlock()
		job.Progress, job.FinishedAt, job.State = p, j.now(), StateDone
		if err != nil {
			job.State, job.Error = StateFailed, err.Error()
		}
	}()
	return *job, nil
}

// Get returns the latest backfill of source.
func (j *Jobs) Get(source string) (Job, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	job := j.jobs[source]
	if job == nil {
		return Job{}, false
	}
	return *job, true
}

// Wait waits until the latest backfill of source has finished, or ctx is
// done, and returns it.
func (j *Jobs) Wait(ctx context.Context, source string) (Job, bool) {
	j.mu.Lock()
	done := j.done[source]
	j.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	return j.Get(source)
}

// Stop cancels the running backfills and waits for them to return.
func (j *Jobs) Stop() {
	j.cancel()
	j.wg.Wait()
}
