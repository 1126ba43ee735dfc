package groupcommit

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/testkit/testclock"
)

// recorder is a commit function over string items that records each
// batch. Its first commit blocks until gate is closed (entered is closed
// when it begins), so that a test can queue items behind it. A batch
// holding "bad" fails as a whole; a batch holding "short" answers one
// result too few. Each result is "ok:" and the item.
type recorder struct {
	gate    chan struct{}
	entered chan struct{}
	mu      sync.Mutex
	calls   [][]string
}

func newRecorder() *recorder {
	return &recorder{gate: make(chan struct{}), entered: make(chan struct{})}
}

func (r *recorder) commit(_ context.Context, items []string) ([]string, error) {
	r.mu.Lock()
	first := len(r.calls) == 0
	r.calls = append(r.calls, slices.Clone(items))
	r.mu.Unlock()
	if first {
		close(r.entered)
		<-r.gate
	}
	if slices.Contains(items, "bad") {
		return nil, errors.New("constraint failed")
	}
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = "ok:" + it
	}
	if slices.Contains(items, "short") {
		out = out[1:]
	}
	return out, nil
}

func (r *recorder) batches() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// queued starts c, submits "first" (whose commit blocks), queues items
// behind it in order, opens the gate and returns each item's answer.
func queued(t *testing.T, r *recorder, c *Committer[string, string], items ...string) []answer {
	t.Helper()
	c.Start(t.Context())
	t.Cleanup(c.Stop)
	first := make(chan error, 1)
	go func() {
		_, err := c.Submit(t.Context(), "first")
		first <- err
	}()
	<-r.entered
	ps := queue(t, c, items...)
	close(r.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	var out []answer
	for _, p := range ps {
		res, err := p.Wait(t.Context())
		out = append(out, answer{res, err})
	}
	return out
}

type answer struct {
	res string
	err error
}

func TestAnswerOnlyAfterCommit(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	c := New(r.commit, Options[string]{})
	c.Start(t.Context())
	defer c.Stop()
	answered := make(chan answer, 1)
	go func() {
		res, err := c.Submit(t.Context(), "a")
		answered <- answer{res, err}
	}()
	<-r.entered // the commit holding "a" has begun and blocks
	select {
	case a := <-answered:
		t.Fatalf("answered %+v while its commit was in progress", a)
	default:
	}
	close(r.gate)
	if a := <-answered; a.res != "ok:a" || a.err != nil {
		t.Errorf("answer = %+v, want ok:a", a)
	}
}

func TestBatchesFormWhileACommitIsInProgress(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	weight := func(s string) int { return len(s) }
	c := New(r.commit, Options[string]{Max: 4, Weight: weight})
	got := queued(t, r, c, "a", "bc", "d", "e", "fghij", "k")
	want := [][]string{{"first"}, {"a", "bc", "d"}, {"e"}, {"fghij"}, {"k"}}
	if b := r.batches(); !slices.EqualFunc(b, want, slices.Equal) {
		t.Errorf("batches = %q, want %q (bounded by Max; a heavier item alone)", b, want)
	}
	for i, it := range []string{"a", "bc", "d", "e", "fghij", "k"} {
		if got[i] != (answer{"ok:" + it, nil}) {
			t.Errorf("item %s: %+v", it, got[i])
		}
	}
}

func TestABadItemFailsAlone(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	c := New(r.commit, Options[string]{})
	got := queued(t, r, c, "a", "bad", "c")
	want := [][]string{{"first"}, {"a", "bad", "c"}, {"a"}, {"bad"}, {"c"}}
	if b := r.batches(); !slices.EqualFunc(b, want, slices.Equal) {
		t.Errorf("batches = %q, want %q (the failed batch committed again item by item)", b, want)
	}
	if got[0] != (answer{"ok:a", nil}) || got[1].err == nil || got[2] != (answer{"ok:c", nil}) {
		t.Errorf("answers = %+v", got)
	}
}

func TestShortResultIsNotCommittedAgain(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	c := New(r.commit, Options[string]{})
	got := queued(t, r, c, "a", "short")
	want := [][]string{{"first"}, {"a", "short"}}
	if b := r.batches(); !slices.EqualFunc(b, want, slices.Equal) {
		t.Errorf("batches = %q, want %q", b, want)
	}
	for _, a := range got {
		if !errors.Is(a.err, ErrShortResult) {
			t.Errorf("answer %+v, want ErrShortResult", a)
		}
	}
}

func TestApartKeepsOrder(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	c := New(r.commit, Options[string]{Apart: func(s string) string { k, _, _ := strings.Cut(s, ":"); return k }})
	queued(t, r, c, "a:1", "b:1", "a:2", "c:1", ":x", ":y")
	want := [][]string{{"first"}, {"a:1", "b:1"}, {"a:2", "c:1", ":x", ":y"}}
	if b := r.batches(); !slices.EqualFunc(b, want, slices.Equal) {
		t.Errorf("batches = %q, want %q (a batch ends before a key it holds; no key, no constraint)", b, want)
	}
}

// Many callers, few keys, several writers: no batch ever holds one key
// twice, and every caller gets its own result.
func TestApartUnderConcurrency(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var shared []string
	batches, multi := 0, 0
	commit := func(_ context.Context, items []string) ([]string, error) {
		runtime.Gosched() // let callers queue behind this batch
		seen := map[string]bool{}
		for _, it := range items {
			k, _, _ := strings.Cut(it, ":")
			if seen[k] {
				mu.Lock()
				shared = append(shared, strings.Join(items, ","))
				mu.Unlock()
			}
			seen[k] = true
		}
		mu.Lock()
		batches++
		if len(items) > 1 {
			multi++
		}
		mu.Unlock()
		out := make([]string, len(items))
		for i, it := range items {
			out[i] = "ok:" + it
		}
		return out, nil
	}
	key := func(s string) string { k, _, _ := strings.Cut(s, ":"); return k }
	c := New(commit, Options[string]{Max: 16, Writers: 2, Apart: key,
		Lane: func(s string) int { n, _ := strconv.Atoi(key(s)); return n }})
	c.Start(t.Context())
	defer c.Stop()
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Go(func() {
			for i := range 50 {
				it := strconv.Itoa((g+i)%5) + ":" + strconv.Itoa(g) + "." + strconv.Itoa(i)
				res, err := c.Submit(t.Context(), it)
				if err != nil || res != "ok:"+it {
					t.Errorf("%s: %q, %v", it, res, err)
				}
			}
		})
	}
	wg.Wait()
	if len(shared) > 0 {
		t.Errorf("batches sharing a key: %q", shared)
	}
	t.Logf("%d batches, %d of more than one item", batches, multi)
}

func TestLanes(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	// "slow" goes to lane 0, everything else to lane 1.
	lane := func(s string) int {
		if s == "slow" {
			return 0
		}
		return 1
	}
	c := New(r.commit, Options[string]{Writers: 2, Lane: lane})
	c.Start(t.Context())
	defer c.Stop()
	slow := make(chan answer, 1)
	go func() {
		res, err := c.Submit(t.Context(), "slow")
		slow <- answer{res, err}
	}()
	<-r.entered
	// Lane 0's writer is stuck in its commit; lane 1's takes these.
	for _, it := range []string{"a", "b", "c"} {
		if res, err := c.Submit(t.Context(), it); res != "ok:"+it || err != nil {
			t.Fatalf("%s: %q, %v", it, res, err)
		}
	}
	select {
	case a := <-slow:
		t.Fatalf("the slow item was answered (%+v) before its commit ended", a)
	default:
	}
	close(r.gate)
	if a := <-slow; a.res != "ok:slow" {
		t.Errorf("slow: %+v", a)
	}
	for _, b := range r.batches() {
		if len(b) > 1 && slices.Contains(b, "slow") {
			t.Errorf("batch %q mixes lanes", b)
		}
	}
}

func TestWithdrawnWhileQueued(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	c := New(r.commit, Options[string]{})
	c.Start(t.Context())
	defer c.Stop()
	go c.Submit(t.Context(), "first")
	<-r.entered
	ctx, cancel := context.WithCancel(t.Context())
	p, err := c.Add("gone")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, err := p.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v, want context.Canceled", err)
	}
	close(r.gate)
	if res, err := c.Submit(t.Context(), "next"); res != "ok:next" || err != nil {
		t.Fatalf("next: %q, %v", res, err)
	}
	want := [][]string{{"first"}, {"next"}}
	if b := r.batches(); !slices.EqualFunc(b, want, slices.Equal) {
		t.Errorf("batches = %q, want %q (the withdrawn item never committed)", b, want)
	}
}

func TestStopCommitsWhatIsQueued(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	c := New(r.commit, Options[string]{})
	c.Start(t.Context())
	go c.Submit(t.Context(), "first")
	<-r.entered
	p, err := c.Add("queued")
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() { c.Stop(); close(stopped) }()
	close(r.gate)
	<-stopped
	select {
	case <-p.done:
	default:
		t.Fatal("Stop returned before the queued item was answered")
	}
	if p.res != "ok:queued" || p.err != nil {
		t.Errorf("queued: %q, %v", p.res, p.err)
	}
	if _, err := c.Submit(t.Context(), "late"); !errors.Is(err, ErrStopped) {
		t.Errorf("after Stop: %v, want ErrStopped", err)
	}
	c.Stop() // idempotent
}

func TestStopBeforeStart(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	close(r.gate)
	c := New(r.commit, Options[string]{})
	p, err := c.Add("early") // waits in the queue for a Start
	if err != nil {
		t.Fatal(err)
	}
	c.Stop()
	c.Stop()
	if _, err := p.Wait(t.Context()); !errors.Is(err, ErrStopped) {
		t.Errorf("queued before a Stop without Start: %v, want ErrStopped", err)
	}
	c.Start(t.Context()) // does nothing
	if _, err := c.Submit(t.Context(), "late"); !errors.Is(err, ErrStopped) {
		t.Errorf("after Stop: %v, want ErrStopped", err)
	}
	if b := r.batches(); len(b) != 0 {
		t.Errorf("batches = %q, want none", b)
	}
}

func TestParentCancelDrains(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	c := New(r.commit, Options[string]{})
	ctx, cancel := context.WithCancel(t.Context())
	c.Start(ctx)
	defer c.Stop()
	first := make(chan answer, 1)
	go func() {
		res, err := c.Submit(t.Context(), "first")
		first <- answer{res, err}
	}()
	<-r.entered
	p, err := c.Add("queued")
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	close(r.gate)
	if res, err := p.Wait(t.Context()); res != "ok:queued" || err != nil {
		t.Errorf("queued when the parent ended: %q, %v", res, err)
	}
	if a := <-first; a.res != "ok:first" {
		t.Errorf("first: %+v", a)
	}
}

// TestWholeFailureAnsweredAtOnce: an error Whole recognises (a database
// that is down) fails every item of the batch at once, without a retry
// per item.
func TestWholeFailureAnsweredAtOnce(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	c := New(r.commit, Options[string]{Whole: func(error) bool { return true }})
	got := queued(t, r, c, "a", "bad", "c")
	want := [][]string{{"first"}, {"a", "bad", "c"}}
	if b := r.batches(); !slices.EqualFunc(b, want, slices.Equal) {
		t.Errorf("batches = %q, want %q (no retry item by item)", b, want)
	}
	for _, a := range got {
		if a.err == nil {
			t.Errorf("answer %+v, want the batch's error", a)
		}
	}
}

// TestStopRefusesAtOnce: Stop refuses new items as soon as it is called,
// while a commit is still in progress; what was queued before is
// committed.
func TestStopRefusesAtOnce(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	c := New(r.commit, Options[string]{})
	c.Start(t.Context())
	go c.Submit(t.Context(), "first")
	<-r.entered // the writer is inside a commit that waits for the gate
	stopped := make(chan struct{})
	go func() { c.Stop(); close(stopped) }()
	var accepted []*Pending[string, string]
	for i := 0; ; i++ {
		p, err := c.Add("late" + strconv.Itoa(i))
		if errors.Is(err, ErrStopped) {
			break
		}
		if i == 1_000_000 {
			t.Fatal("Stop, called during a commit, still accepts items")
		}
		accepted = append(accepted, p)
		runtime.Gosched()
	}
	close(r.gate)
	<-stopped
	for _, p := range accepted {
		if v, err := p.Wait(t.Context()); err != nil || v != "ok:"+p.item {
			t.Errorf("%s, queued before Stop refused: %q, %v", p.item, v, err)
		}
	}
}

// Backlog is the weight queued over the recent commit rate: it grows
// with what is queued, shrinks when an item is withdrawn or taken, and is
// 0 until a commit was timed and while what is queued fits in one batch.
func TestBacklog(t *testing.T) {
	clock := testclock.New(time.Unix(1_700_000_000, 0))
	gate := make(chan struct{})
	entered := make(chan struct{}, 10)
	commit := func(_ context.Context, items []string) ([]string, error) {
		entered <- struct{}{}
		if items[0] == "slow" {
			<-gate
		}
		clock.Add(time.Duration(len(items)) * 10 * time.Millisecond) // 100 items a second
		return items, nil
	}
	c := New(commit, Options[string]{Max: 2, Now: clock.Now})
	c.Start(t.Context())
	defer c.Stop()
	if b := c.Backlog(); b != 0 {
		t.Fatalf("backlog %v before any commit, want 0", b)
	}
	if _, err := c.Submit(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	slow, _ := c.Add("slow")
	<-entered
	<-entered // "slow" is being committed: what follows queues
	var ps []*Pending[string, string]
	for i := range 2 {
		p, err := c.Add(strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if b := c.Backlog(); b != 0 {
		t.Errorf("backlog %v with one batch queued, want 0", b)
	}
	for i := 2; i < 5; i++ {
		p, err := c.Add(strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if b := c.Backlog(); b != 50*time.Millisecond {
		t.Errorf("backlog %v with 5 queued at 100/s, want 50ms", b)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := ps[4].Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("withdrawn: %v", err)
	}
	if b := c.Backlog(); b != 40*time.Millisecond {
		t.Errorf("backlog %v after one was withdrawn, want 40ms", b)
	}
	close(gate)
	slow.Wait(t.Context())
	for _, p := range ps[:4] {
		p.Wait(t.Context())
	}
	if b := c.Backlog(); b != 0 {
		t.Errorf("backlog %v with nothing queued, want 0", b)
	}
}

// A commit that does not end (a stalled store) makes the backlog at least
// as long as it has taken so far once more than a batch is queued, even
// before any commit was timed.
func TestBacklogOfAStall(t *testing.T) {
	clock := testclock.New(time.Unix(1_700_000_000, 0))
	gate := make(chan struct{})
	entered := make(chan struct{}, 10)
	c := New(func(_ context.Context, items []string) ([]string, error) {
		entered <- struct{}{}
		<-gate
		return items, nil
	}, Options[string]{Max: 2, Now: clock.Now})
	c.Start(t.Context())
	defer c.Stop()
	defer close(gate)
	c.Add("stuck")
	<-entered
	for i := range 3 {
		c.Add(strconv.Itoa(i))
	}
	clock.Add(300 * time.Millisecond)
	if b := c.Backlog(); b != 300*time.Millisecond {
		t.Errorf("backlog %v behind a commit stalled for 300ms, want 300ms", b)
	}
}

// The pace counts what a writer drains while it has work: a commit taken
// straight after another is timed from that one's end, so the time the
// writer waited for a CPU in between is in it. (A writer that was idle is
// timed from its commit's start; no test here can know that the writer
// went idle between two items rather than taking the second at once.)
func TestPaceCountsTheWaitBetweenCommits(t *testing.T) {
	// now is read at each commit's start and then at its end; every read
	// at a start but the first finds 30 ms gone by since the end before
	// (the writer waited for a CPU).
	var mu sync.Mutex
	at := time.Unix(1_700_000_000, 0)
	reads := 0
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		if reads++; reads%2 == 1 && reads > 1 {
			at = at.Add(30 * time.Millisecond)
		}
		return at
	}
	c := New(func(_ context.Context, items []string) ([]string, error) {
		mu.Lock()
		at = at.Add(time.Duration(len(items)) * 10 * time.Millisecond) // 100 items a second
		mu.Unlock()
		return items, nil
	}, Options[string]{Max: 2, Now: now})
	ps := queue(t, c, "a", "b", "c", "d") // before the writer starts: back to back
	c.Start(t.Context())
	for _, p := range ps {
		p.Wait(t.Context())
	}
	c.Stop() // the writer has timed its commits
	// [a b]: 2 in 20 ms, 100/s. [c d]: 2 in 30 + 20 ms, 40/s; the moving
	// average (1/8) makes it 92.5/s.
	if p := c.Pace(); p != 92.5 {
		t.Errorf("pace %v after a commit that waited 30 ms for the writer, want 92.5", p)
	}
}

// queue adds items to c and returns their places.
func queue(t *testing.T, c *Committer[string, string], items ...string) []*Pending[string, string] {
	t.Helper()
	var ps []*Pending[string, string]
	for _, it := range items {
		p, err := c.Add(it)
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	return ps
}

// A pace stands for paceTTL only: one timed in a burst long gone (or
// while the store was slow) must not judge today's load. Drain needs a
// load of at least one timed batch per writer, so that a load the pace
// bounds can always form one.
func TestPaceAgesAndDrainNeedsABatch(t *testing.T) {
	clock := testclock.New(time.Unix(1_700_000_000, 0))
	c := New(func(_ context.Context, items []string) ([]string, error) {
		clock.Add(time.Duration(len(items)) * 10 * time.Millisecond) // 100 items a second
		return items, nil
	}, Options[string]{Max: 8, Now: clock.Now})
	queue(t, c, "a", "b") // one batch of a quarter of Max: timed
	c.Start(t.Context())
	c.Stop()
	if p := c.Pace(); p != 100 {
		t.Fatalf("pace %v, want 100", p)
	}
	if d := c.Drain(3, 2); d != 0 {
		t.Errorf("drain of 3, less than two timed batches: %v, want 0", d)
	}
	if d := c.Drain(5, 2); d != 50*time.Millisecond {
		t.Errorf("drain of 5 at 100/s: %v, want 50ms", d)
	}
	if d := c.Drain(3, 1); d != 30*time.Millisecond {
		t.Errorf("drain of 3, one timed batch or more: %v, want 30ms", d)
	}
	clock.Add(paceTTL + time.Nanosecond)
	if p, d := c.Pace(), c.Drain(5, 2); p != 0 || d != 0 {
		t.Errorf("pace %v, drain %v once no batch was timed for %v; want 0, 0", p, d, paceTTL)
	}
}

// A pace that aged out is not averaged into the next one: a store that
// was slow once (cold, after a start) must not judge it for the next
// eight commits.
func TestPaceStartsOverOnceAged(t *testing.T) {
	clock := testclock.New(time.Unix(1_700_000_000, 0))
	per := 10 * time.Millisecond
	c := New(func(_ context.Context, items []string) ([]string, error) {
		clock.Add(time.Duration(len(items)) * per)
		return items, nil
	}, Options[string]{Max: 2, Now: clock.Now}) // every batch is timed
	c.Start(t.Context())
	defer c.Stop()
	if _, err := c.Submit(t.Context(), "a"); err != nil {
		t.Fatal(err)
	}
	if p := timedPace(t, c); p != 100 {
		t.Fatalf("pace %v, want 100", p)
	}
	clock.Add(paceTTL + time.Nanosecond)
	per = time.Millisecond
	if _, err := c.Submit(t.Context(), "b"); err != nil {
		t.Fatal(err)
	}
	if p := timedPace(t, c); p != 1000 {
		t.Errorf("pace %v after the old one aged out, want 1000 (the new commit's alone)", p)
	}
}

// timedPace waits for c's pace to be known: the writer times a batch
// after answering it.
func timedPace(t *testing.T, c *Committer[string, string]) float64 {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if p := c.Pace(); p != 0 {
			return p
		}
	}
	t.Fatal("no batch was timed")
	return 0
}

// A failed batch (committed again item by item, or failed whole) is not
// timed: its time says nothing of the pace.
func TestFailedBatchIsNotTimed(t *testing.T) {
	clock := testclock.New(time.Unix(1_700_000_000, 0))
	c := New(func(_ context.Context, items []string) ([]string, error) {
		clock.Add(time.Duration(len(items)) * 10 * time.Millisecond)
		return nil, errors.New("the store failed")
	}, Options[string]{Max: 2, Now: clock.Now})
	ps := queue(t, c, "a", "b")
	c.Start(t.Context())
	for _, p := range ps {
		if _, err := p.Wait(t.Context()); err == nil {
			t.Fatal("a failed commit answered nil")
		}
	}
	c.Stop()
	if p := c.Pace(); p != 0 {
		t.Errorf("pace %v after failed commits only, want 0", p)
	}
}
