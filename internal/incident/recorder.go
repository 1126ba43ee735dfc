package incident

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/lifecycle"
	"github.com/anyhook/anyhook/internal/store"
)

// The recorder's bounds.
const (
	// maxQueue bounds the attempts waiting to be written; beyond it an
	// attempt is dropped (counted in the log): incidents must never hold
	// up a delivery.
	maxQueue = 8192
	// maxBatch bounds the attempts of one write.
	maxBatch = 512
	// DefaultInterval is how often the recorder writes what came and
	// sweeps (resolves, escalates by time).
	DefaultInterval = time.Second
)

// Store is what the recorder needs of the store.
type Store interface {
	RecordIncidents(ctx context.Context, as []store.IncidentAttempt, p store.IncidentPolicy) ([]store.IncidentChange, error)
	SweepIncidents(ctx context.Context, now time.Time, p store.IncidentPolicy) ([]store.IncidentChange, error)
}

// Options configure a Recorder.
type Options struct {
	Store  Store
	Policy store.IncidentPolicy
	// OnChange is told of each change the store reports (alerts); it is
	// called from the recorder's goroutine and must not block long.
	OnChange func(store.IncidentChange)
	Now      func() time.Time // the sweep's clock; default time.Now
	Logger   *slog.Logger
	Interval time.Duration // default DefaultInterval
}

// Recorder batches the engine's attempts into the store. Attempted never
// blocks: it appends to a bounded buffer that the recorder's goroutine
// writes every Interval (or sooner, once a batch is full).
type Recorder struct {
	opt Options
	run lifecycle.Runner

	mu      sync.Mutex
	buf     []store.IncidentAttempt
	dropped int
	full    chan struct{}
}

// New returns a recorder; Start runs it.
func New(opt Options) *Recorder {
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Interval <= 0 {
		opt.Interval = DefaultInterval
	}
	return &Recorder{opt: opt, full: make(chan struct{}, 1)}
}

// Attempted records one attempt whose outcome the engine recorded: a
// success (ok) clears its destination's incidents after the resolve
// window; a failure counts on the incident of its kind.
func (r *Recorder) Attempted(destination, eventID string, ok bool, a anyhook.Attempt) {
	ia := store.IncidentAttempt{Destination: destination, EventID: eventID, At: a.StartedAt.Add(a.Duration)}
	if !ok {
		ia.Kind, ia.Error = KindOf(a), a.Error
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.buf) >= maxQueue {
		r.dropped++
		return
	}
	r.buf = append(r.buf, ia)
	if len(r.buf) == maxBatch {
		select {
		case r.full <- struct{}{}:
		default:
		}
	}
}

// Start runs the writer until Stop (which writes what is left) or ctx
// ends.
func (r *Recorder) Start(ctx context.Context) {
	r.run.Start(ctx, func(ctx context.Context) {
		t := time.NewTicker(r.opt.Interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				if lifecycle.Stopped(ctx) {
					r.Flush(context.WithoutCancel(ctx))
				}
				return
			case <-r.full:
			case <-t.C:
			}
			r.Flush(ctx)
		}
	})
}

// Stop writes what is buffered and stops the writer. Idempotent.
func (r *Recorder) Stop() { r.run.Stop() }

// Flush writes what is buffered, then sweeps at the clock's now, and
// tells OnChange of each change. A batch the store refused is logged and
// dropped: the next attempts of its destinations count again.
func (r *Recorder) Flush(ctx context.Context) {
	for {
		r.mu.Lock()
		batch := r.buf
		if len(batch) > maxBatch {
			batch = batch[:maxBatch:maxBatch]
			r.buf = r.buf[maxBatch:]
		} else {
			r.buf = nil
		}
		dropped := r.dropped
		r.dropped = 0
		r.mu.Unlock()
		if dropped > 0 {
			r.opt.Logger.Warn("incidents: attempts dropped, the recorder's queue was full", "dropped", dropped)
		}
		if len(batch) == 0 {
			break
		}
		cs, err := r.opt.Store.RecordIncidents(ctx, batch, r.opt.Policy)
		if err != nil {
			r.opt.Logger.Error("incidents: recording attempts failed", "attempts", len(batch), "err", err)
			break
		}
		r.tell(cs)
	}
	cs, err := r.opt.Store.SweepIncidents(ctx, r.opt.Now(), r.opt.Policy)
	if err != nil {
		r.opt.Logger.Error("incidents: sweep failed", "err", err)
		return
	}
	r.tell(cs)
}

func (r *Recorder) tell(cs []store.IncidentChange) {
	for _, c := range cs {
		i := c.Incident
		r.opt.Logger.Info("incident "+c.Change, "incident_id", i.ID, "destination", i.Destination, "kind", i.Kind,
			"attempts", i.Attempts, "events", i.Events)
		if r.opt.OnChange != nil {
			r.opt.OnChange(c)
		}
	}
}
