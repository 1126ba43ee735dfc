package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/redirect"
	"github.com/anyhook/anyhook/internal/store"
)

// Defaults.
const (
	DefaultCheckpointInterval = 10 * time.Second
	// PruneEvery is how often the checkpointer prunes old bodies and
	// the activity rollup's old minutes.
	PruneEvery = 10 * time.Minute
	// pruneBatch bounds one pruning transaction, so that ingest never
	// waits long behind it (BENCHMARKS.md, "The read side at scale").
	pruneBatch = 100
	// activityBatch bounds one transaction of PruneActivity: its rows are
	// a few dozen bytes each, deleted by a range of their primary key.
	activityBatch = 1000
)

// CheckpointerOptions configure a Checkpointer.
type CheckpointerOptions struct {
	Key      *Key   // required
	Origin   string // checkpoint origin line; default Key.Name()
	Interval time.Duration
	// PushURL, when set, receives each new signed checkpoint as a POST
	// (Content-Type: text/plain; charset=utf-8).
	PushURL string
	// Client is for PushURL; default a client with a 10 s timeout. Its
	// redirect policy is replaced: a redirect is followed only when it
	// keeps the POST (307, 308) on push_url's scheme and host.
	Client *http.Client
	// Retention, when > 0, empties the bodies of logged events received
	// longer ago than this (their hashes stay in the ledger).
	Retention time.Duration
	// Incidents, when set with IncidentRetention > 0, deletes the
	// incidents resolved longer ago than that (incidents.retention), in
	// the same round as the bodies.
	Incidents         store.IncidentPruner
	IncidentRetention time.Duration
	Logger            *slog.Logger
	// OnFailure is called when the self-check finds the stored log no longer
	// matches the last checkpoint or its events: a verification failure.
	OnFailure func(err error)
	// Now is the clock: the signing time each checkpoint states (its
	// "time" line), and when to prune. Default time.Now.
	Now func() time.Time
}

// Checkpointer signs and stores checkpoints, pushes them, prunes old
// bodies, and checks the ledger against the previous checkpoint each round.
type Checkpointer struct {
	st  store.Ledger
	opt CheckpointerOptions
	loop

	mu        sync.Mutex
	lastPrune time.Time
	// seen is the largest checkpoint this checkpointer signed or checked,
	// kept outside the database: a ledger that no longer extends it was
	// rewritten behind the process's back (checkpoints deleted, entries
	// rebuilt), and it signs nothing over it.
	seen *Tree
	// unpushed is the latest checkpoint whose push failed (a witness
	// down, or a push cut off by shutdown): the next round pushes it
	// again unless a newer checkpoint supersedes it.
	unpushed []byte
}

// NewCheckpointer returns a checkpointer over st; Start runs it.
func NewCheckpointer(st store.Ledger, opt CheckpointerOptions) *Checkpointer {
	if opt.Origin == "" {
		opt.Origin = opt.Key.Name()
	}
	if opt.Interval <= 0 {
		opt.Interval = DefaultCheckpointInterval
	}
	if opt.Client == nil {
		opt.Client = &http.Client{Timeout: 10 * time.Second}
	}
	// The caller's client is copied, not changed: its redirect policy is
	// replaced by redirect.AnswerOtherwise.
	hc := *opt.Client
	hc.CheckRedirect = redirect.AnswerOtherwise
	opt.Client = &hc
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	c := &Checkpointer{st: st, opt: opt}
	c.loop = newLoop(opt.Interval, func(ctx context.Context) {
		_, fresh, err := c.Once(ctx)
		if !fresh {
			c.pushAgain(ctx)
		}
		if err != nil && ctx.Err() == nil {
			var vf *VerificationError
			if errors.As(err, &vf) {
				c.opt.Logger.Error("ledger: log verification failed", "err", err)
				if c.opt.OnFailure != nil {
					c.opt.OnFailure(err)
				}
			} else {
				c.opt.Logger.Warn("ledger: checkpoint failed", "err", err)
			}
		}
		c.prune(ctx)
	})
	return c
}

// ErrKeyRetired: the checkpointer's key is no longer the ledger's key in
// force (the key was rotated while this process ran); it signs nothing.
var ErrKeyRetired = errors.New("ledger: log key retired")

// VerificationError is a finding of the self-check: the stored log does
// not match what was signed or what is stored.
type VerificationError struct {
	EventID string // "" when it concerns the tree, not one event
	Msg     string
}

func (e *VerificationError) Error() string {
	if e.EventID != "" {
		return "event " + e.EventID + ": " + e.Msg
	}
	return e.Msg
}

// HashReader reads the stored tree of st.
func HashReader(ctx context.Context, st store.Ledger) tlog.HashReader {
	return tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		hs, err := st.ReadHashes(ctx, idx)
		if err != nil {
			return nil, err
		}
		out := make([]tlog.Hash, len(hs))
		for i, h := range hs {
			out[i] = h
		}
		return out, nil
	})
}

// Once makes a checkpoint when the ledger grew since the last one, after
// checking that the stored tree still extends that checkpoint and that
// the entries added since match their events. It returns the latest
// checkpoint and whether it is new.
func (c *Checkpointer) Once(ctx context.Context) (store.Checkpoint, bool, error) {
	size, err := c.st.LedgerSize(ctx)
	if err != nil {
		return store.Checkpoint{}, false, err
	}
	r := HashReader(ctx, c.st)
	prev, err := c.st.LatestCheckpoint(ctx)
	havePrev := err == nil
	if err != nil && !errors.Is(err, anyhook.ErrNotFound) {
		return prev, false, err
	}
	if err := c.checkSeen(ctx, prev, havePrev, size, r); err != nil {
		return prev, false, err
	}
	if havePrev {
		t, err := c.selfCheck(ctx, prev, size, r)
		if err != nil {
			return prev, false, err
		}
		c.see(t)
		if size == prev.Size {
			return prev, false, nil
		}
	} else if size == 0 {
		return prev, false, nil
	}
	if keys, err := c.st.LedgerKeys(ctx); err != nil {
		return prev, false, err
	} else if n := len(keys); n > 0 && keys[n-1] != c.opt.Key.VerifierKey {
		return prev, false, fmt.Errorf("%w: this process's log key %s is not the log's key %s (anyhook log rotate-key): it signs nothing; restart it with the log's log.key_file",
			ErrKeyRetired, KeyID(c.opt.Key.VerifierKey), KeyID(keys[n-1]))
	}
	root, err := tlog.TreeHash(size, r)
	if err != nil {
		return prev, false, fmt.Errorf("ledger: tree hash: %w", err)
	}
	signed := Tree{Origin: c.opt.Origin, Size: size, Root: root, Time: c.opt.Now()}
	msg, err := SignCheckpoint(c.opt.Key, signed)
	if err != nil {
		return prev, false, fmt.Errorf("ledger: sign: %w", err)
	}
	if err := c.st.SaveCheckpoint(ctx, store.Checkpoint{Size: size, Root: root, Note: msg}); err != nil {
		return prev, false, err
	}
	c.see(signed)
	c.opt.Logger.Debug("ledger: checkpoint", "size", size)
	if c.opt.PushURL != "" {
		err := c.push(ctx, msg)
		if err != nil {
			c.opt.Logger.Warn("ledger: pushing the checkpoint failed", "size", size, "err", err)
		}
		c.mu.Lock()
		c.unpushed = nil
		if err != nil {
			c.unpushed = msg
		}
		c.mu.Unlock()
	}
	cp, err := c.st.LatestCheckpoint(ctx)
	return cp, true, err
}

// see remembers t when it is larger than the largest checkpoint seen.
func (c *Checkpointer) see(t Tree) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil || t.Size > c.seen.Size {
		c.seen = &t
	}
}

// checkSeen checks the stored log against the largest checkpoint this
// checkpointer signed or checked (kept in memory, out of the database's
// reach): the latest stored checkpoint is not older than it, and the
// stored tree extends it. Without this, whoever can write the database
// (no key needed) could delete the checkpoints after an older one, rebuild
// the ledger entries after it over edited events, and have this very process
// sign the rewritten log (a fork of what it signed before), which log
// verify then finds intact without a witness's checkpoint.
func (c *Checkpointer) checkSeen(ctx context.Context, prev store.Checkpoint, havePrev bool, size int64, r tlog.HashReader) error {
	c.mu.Lock()
	seen := c.seen
	c.mu.Unlock()
	if seen == nil {
		return nil
	}
	if !havePrev || prev.Size < seen.Size {
		return &VerificationError{Msg: fmt.Sprintf("the latest stored checkpoint is older than the one of size %d this process signed or checked: checkpoints were deleted", seen.Size)}
	}
	if size < seen.Size {
		return &VerificationError{Msg: fmt.Sprintf("the log has %d entries, fewer than the %d of a checkpoint this process signed or checked", size, seen.Size)}
	}
	root, err := tlog.TreeHash(size, r)
	if err != nil {
		return fmt.Errorf("ledger: tree hash: %w", err)
	}
	proof, err := tlog.ProveTree(size, seen.Size, r)
	if err == nil {
		err = tlog.CheckTree(proof, size, root, seen.Size, seen.Root)
	}
	if err != nil {
		return &VerificationError{Msg: fmt.Sprintf("the stored tree no longer extends the checkpoint of size %d this process signed or checked: the log was rewritten: %v", seen.Size, err)}
	}
	return nil
}

// selfCheck checks the stored log against the previous checkpoint prev:
// its signature, that the tree of size entries extends it, and that the
// entries added since are the leaves of their events. It returns prev's
// tree.
func (c *Checkpointer) selfCheck(ctx context.Context, prev store.Checkpoint, size int64, r tlog.HashReader) (Tree, error) {
	t, err := OpenCheckpoint(prev.Note, c.opt.Key.Verifier)
	if err != nil {
		return t, &VerificationError{Msg: "the latest stored checkpoint does not verify: " + err.Error()}
	}
	if size < t.Size {
		return t, &VerificationError{Msg: fmt.Sprintf("the log has %d entries, fewer than the %d of its latest checkpoint", size, t.Size)}
	}
	root, err := tlog.TreeHash(size, r)
	if err != nil {
		return t, fmt.Errorf("ledger: tree hash: %w", err)
	}
	proof, err := tlog.ProveTree(size, t.Size, r)
	if err == nil {
		err = tlog.CheckTree(proof, size, root, t.Size, t.Root)
	}
	if err != nil {
		return t, &VerificationError{Msg: fmt.Sprintf("the stored tree no longer extends the checkpoint of size %d: %v", t.Size, err)}
	}
	for from := t.Size; from < size; {
		recs, err := c.st.LedgerRecords(ctx, from, 500)
		if err != nil {
			return t, err
		}
		if len(recs) == 0 {
			break
		}
		for _, rec := range recs {
			if _, p := checkRecord(rec); p != nil {
				return t, &VerificationError{EventID: p.EventID, Msg: p.Kind + ": " + p.Detail}
			}
		}
		from = recs[len(recs)-1].Entry.Index + 1
	}
	return t, nil
}

func (c *Checkpointer) push(ctx context.Context, msg []byte) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.opt.PushURL, bytes.NewReader(msg))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	req.Header.Set("User-Agent", "AnyHook-Log")
	resp, err := c.opt.Client.Do(req)
	if err != nil {
		var uerr interface{ Unwrap() error } // *url.Error carries the URL: drop it
		if errors.As(err, &uerr) && uerr.Unwrap() != nil {
			err = uerr.Unwrap()
		}
		return err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("push_url answered %s", resp.Status)
	}
	return nil
}

// pushAgain pushes the latest checkpoint again if its push failed.
func (c *Checkpointer) pushAgain(ctx context.Context) {
	c.mu.Lock()
	msg := c.unpushed
	c.mu.Unlock()
	if msg == nil {
		return
	}
	if err := c.push(ctx, msg); err != nil {
		c.opt.Logger.Warn("ledger: pushing the checkpoint again failed", "err", err)
		return
	}
	c.mu.Lock()
	if bytes.Equal(c.unpushed, msg) {
		c.unpushed = nil
	}
	c.mu.Unlock()
}

// prune empties old bodies (when log.retention is set) and drops the
// activity rollup's minutes older than store.ActivityKept, at most every
// PruneEvery.
func (c *Checkpointer) prune(ctx context.Context) {
	now := c.opt.Now()
	c.mu.Lock()
	due := now.Sub(c.lastPrune) >= PruneEvery
	if due {
		c.lastPrune = now
	}
	c.mu.Unlock()
	if !due {
		return
	}
	if c.opt.Retention > 0 {
		if _, err := Prune(ctx, c.st, now.Add(-c.opt.Retention)); err != nil && ctx.Err() == nil {
			c.opt.Logger.Warn("ledger: pruning bodies failed", "err", err)
		}
	}
	if _, err := PruneActivity(ctx, c.st, now.Add(-store.ActivityKept)); err != nil && ctx.Err() == nil {
		c.opt.Logger.Warn("ledger: pruning the activity rollup failed", "err", err)
	}
	if c.opt.Incidents != nil && c.opt.IncidentRetention > 0 {
		if _, err := PruneIncidents(ctx, c.opt.Incidents, now.Add(-c.opt.IncidentRetention)); err != nil && ctx.Err() == nil {
			c.opt.Logger.Warn("ledger: pruning old incidents failed", "err", err)
		}
	}
}

// incidentBatch is how many incidents one transaction of PruneIncidents
// deletes: each takes its events (at most a few hundred rows) along.
const incidentBatch = 100

// PruneIncidents deletes the incidents resolved before cutoff, and their
// events, a batch at a time; it returns how many.
func PruneIncidents(ctx context.Context, st store.IncidentPruner, cutoff time.Time) (int, error) {
	return inBatches(ctx, incidentBatch, func(limit int) (int, error) { return st.PruneIncidents(ctx, cutoff, limit) })
}

// Prune empties the bodies of logged events received before cutoff whose
// deliveries are all finished, keeping their hashes; it returns how many.
//
// It walks the log's entries whose bodies are kept in index order,
// pruneBatch to a transaction, and stops at the first batch in which no
// event was received before cutoff: past it the log holds what arrived
// since. Each pass starts at the front again, to take the events whose
// deliveries have finished since (a dead one replayed, discarded). The log
// is in the order of receipt but for stragglers (an event logged long
// after it was received, as a copy of another store's), which wait for
// the events logged around them to be pruned. Walking to the end of the
// log instead held the writer for every entry whose body is kept: 42 s
// with 5.7 million entries in retention (BENCHMARKS.md, "Pruning").
func Prune(ctx context.Context, st store.Ledger, cutoff time.Time) (int, error) {
	total, after := 0, int64(-1)
	for {
		t0 := time.Now()
		step, err := st.PruneBodies(ctx, cutoff, after, pruneBatch)
		total += step.Pruned
		if err != nil || step.Examined < pruneBatch || step.Old == 0 {
			return total, err
		}
		after = step.Last
		if err := rest(ctx, time.Since(t0)); err != nil {
			return total, err
		}
	}
}

// PruneActivity deletes the activity rollup's minutes before cutoff (the
// counters of what happened then); it returns how many rows.
func PruneActivity(ctx context.Context, st store.Ledger, cutoff time.Time) (int, error) {
	return inBatches(ctx, activityBatch, func(limit int) (int, error) { return st.PruneActivity(ctx, cutoff, limit) })
}

// inBatches calls step until it does less than batch. It rests between two
// calls as long as the last one took, so that ingest and delivery get the
// writer at least half the time while a backlog is pruned.
func inBatches(ctx context.Context, batch int, step func(limit int) (int, error)) (int, error) {
	total := 0
	for {
		t0 := time.Now()
		n, err := step(batch)
		total += n
		if err != nil || n < batch {
			return total, err
		}
		if err := rest(ctx, time.Since(t0)); err != nil {
			return total, err
		}
	}
}

// rest waits d, or until ctx ends.
func rest(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
