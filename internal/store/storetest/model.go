package storetest

// The model test: random interleavings of the store operations the gateway
// uses, each checked against a small reference model of the delivery state
// machine kept here in Go. See docs/reliability.md ("The delivery state
// machine against a model") for what it checks and how to run it long.

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

const (
	// modelSeedEnv runs one seed (to reproduce a failure); modelStepsEnv
	// sets the number of steps: of that seed's run, or, without a seed, in
	// all (split into runs of at most modelRunSteps, each with a fresh
	// seed and a fresh store).
	modelSeedEnv  = "ANYHOOK_MODEL_SEED"
	modelStepsEnv = "ANYHOOK_MODEL_STEPS"

	modelCISteps   = 80   // per CI seed
	modelRunSteps  = 2000 // the longest run of a long session
	modelFullEvery = 40   // steps between checks of every event
)

var modelCISeeds = []uint64{1, 2, 3}

// The universe the model draws from: small, so that keys repeat
// (duplicates), objects repeat (staleness) and destinations collide.
var (
	// stripe has dedup keys; shop has keys and ordering hints; demo has
	// neither (every request is new).
	modelSources = []string{"stripe", "shop", "demo"}
	modelDests   = []string{"billing", "audit", "charges", "crm"}
	modelObjects = []string{"order-1", "order-2"}
	modelHeader  = http.Header{"Content-Type": {"application/json"}}
	// hundredYears is a retry delay that never comes due during a run.
	hundredYears = 100 * 365 * 24 * time.Hour
)

type modelRun struct {
	seed  uint64
	steps int
}

// modelPlan reads the environment: no variables, the CI seeds; a seed,
// that seed alone; steps alone, that many steps in runs with fresh seeds.
func modelPlan(t *testing.T) []modelRun {
	steps := modelCISteps
	if v := os.Getenv(modelStepsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("%s=%q: want a positive number of steps", modelStepsEnv, v)
		}
		steps = n
	}
	if v := os.Getenv(modelSeedEnv); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: want an unsigned integer", modelSeedEnv, v)
		}
		return []modelRun{{seed, steps}}
	}
	var runs []modelRun
	if os.Getenv(modelStepsEnv) == "" {
		for _, seed := range modelCISeeds {
			runs = append(runs, modelRun{seed, steps})
		}
		return runs
	}
	for left := steps; left > 0; left -= modelRunSteps {
		runs = append(runs, modelRun{rand.Uint64(), min(left, modelRunSteps)})
	}
	return runs
}

// testModel runs the model against fresh stores, one per run.
func testModel(t *testing.T, open Open) {
	for _, mr := range modelPlan(t) {
		t.Run("seed="+strconv.FormatUint(mr.seed, 10), func(t *testing.T) {
			t.Parallel()
			runModel(t, open(t), mr.seed, mr.steps)
		})
	}
}

// mEvent is the model of one event.
type mEvent struct {
	name                             string // e1, e2 … in the order the model learned of them
	id, source, key, object, version string
	body                             []byte
	stale                            bool
	duplicates                       int64
	deliveries                       []*mDelivery
	actions                          []mAction // the audit trail, oldest first
}

// mAction is an action the model expects in an event's audit trail.
type mAction struct {
	kind string
	d    *mDelivery // acted on; for a replay, the one it created
	by   store.Actor
}

// mDelivery is the model of one delivery.
type mDelivery struct {
	name          string // d1, d2 …
	id            string // "" until the store's id is learned (at the step's check)
	ev            *mEvent
	dest          string
	status        anyhook.DeliveryStatus
	replay, stale bool
	attempts      int
	due           bool // pending and its next attempt has come
	expired       bool // delivering and its lease has run out
	rows          map[int]mAttempt
	claimedAt     time.Time // as the latest claim returned it
	// How a person took it out of the held or dead queue, if one did.
	res        string // anyhook.Resolved*
	resBy      store.Actor
	replayedBy *mDelivery
	// Since the store last showed it: claims, releases and operator
	// actions.
	claims, releases, resolves int
}

func (d *mDelivery) String() string {
	return fmt.Sprintf("%s (%s, %s to %s, %s, attempt %d)", d.name, d.id, d.ev.name, d.dest, d.status, d.attempts)
}

// mAttempt is the attempt row the model expects.
type mAttempt struct {
	unknown bool      // recorded by a rescue: outcome unknown
	started time.Time // when it started (an unknown one: when it was claimed)
	code    int
	err     string
}

// mClaim is a claim a worker holds (or held): its outcome can be sent
// while it is live, after it was rescued (a zombie) or twice.
type mClaim struct {
	d       *mDelivery
	attempt int
	done    bool // an outcome was sent
}

type srcKey struct{ source, key string }

type model struct {
	events     []*mEvent
	byKey      map[srcKey]*mEvent
	marks      map[srcKey]string // (source, object) → highest version
	deliveries []*mDelivery
	byID       map[string]*mDelivery
	paused     map[string]bool
	rules      map[string]store.StaleRule // the config: a destination absent is unknown
	claims     []*mClaim
}

func (m *model) newDelivery(ev *mEvent, dest string, status anyhook.DeliveryStatus, replay, stale bool) *mDelivery {
	d := &mDelivery{name: "d" + strconv.Itoa(len(m.deliveries)+1), ev: ev, dest: dest, status: status, replay: replay, stale: stale,
		due: status == anyhook.StatusPending, rows: map[int]mAttempt{}}
	m.deliveries = append(m.deliveries, d)
	ev.deliveries = append(ev.deliveries, d)
	return d
}

// shown is d's status as the store shows it: a pending delivery of a
// paused destination is paused (the model, like the store, keeps it
// pending: docs/design.md, "Pause").
func (m *model) shown(d *mDelivery) anyhook.DeliveryStatus {
	if d.status == anyhook.StatusPending && m.paused[d.dest] {
		return anyhook.StatusPaused
	}
	if d.status == anyhook.StatusPending && d.attempts > 0 {
		return anyhook.StatusRetrying // an attempt behind it failed
	}
	return d.status
}

func (m *model) counts() map[anyhook.DeliveryStatus]int {
	c := map[anyhook.DeliveryStatus]int{}
	for _, d := range m.deliveries {
		c[m.shown(d)]++
	}
	return c
}

// resolveReplayed applies a replay of ev to dest by the new delivery nd:
// every held or dead delivery of the pair is resolved.
func (m *model) resolveReplayed(ev *mEvent, dest string, nd *mDelivery, by store.Actor) int {
	n := 0
	for _, d := range ev.deliveries {
		if d.dest == dest && d != nd && (d.status == anyhook.StatusHeld || d.status == anyhook.StatusDead) {
			d.status, d.due, d.res, d.resBy, d.replayedBy = anyhook.StatusResolved, false, anyhook.ResolvedReplayed, by, nd
			d.resolves++
			n++
		}
	}
	ev.actions = append(ev.actions, mAction{kind: store.ActionReplay, d: nd, by: by})
	return n
}

// modelActors are who the model's replays and resolves are by.
var modelActors = []store.Actor{{Name: "api"}, {Name: "cli", Reason: "after the outage"},
	{Name: "dashboard session 0a1b2c3d", Reason: "INC-42: the charge went through"}, {}}

// modelCompare orders two versions: the model's versions are small
// integers.
func modelCompare(a, b string) int {
	x, _ := strconv.Atoi(a)
	y, _ := strconv.Atoi(b)
	return cmp.Compare(x, y)
}

// run is one seeded run against one store.
type run struct {
	t     *testing.T
	s     store.Store
	seed  uint64
	steps int
	rng   *rand.Rand
	m     *model

	step  int
	op    string   // what the current step does, for the failure message
	trail []string // the last steps

	touched map[*mEvent]bool // what the current step changed

	fresh int                         // the last new dedup key made
	seen  map[string]anyhook.Delivery // every delivery as last observed
	tally map[string]int              // how often each case came up, for the log
}

func runModel(t *testing.T, s store.Store, seed uint64, steps int) {
	r := &run{
		t: t, s: s, seed: seed, steps: steps,
		rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		m: &model{
			byKey: map[srcKey]*mEvent{}, marks: map[srcKey]string{}, byID: map[string]*mDelivery{}, paused: map[string]bool{},
			// crm is in no config at the start: its claims are orphans.
			rules: map[string]store.StaleRule{
				"billing": {Policy: anyhook.Reclaim, MaxAttempts: 3},
				"audit":   {Policy: anyhook.Reclaim},
				"charges": {Policy: anyhook.Hold, MaxAttempts: 5},
			},
		},
		seen: map[string]anyhook.Delivery{}, tally: map[string]int{},
	}
	ops := []struct {
		weight int
		fn     func()
	}{
		{18, r.opIngest},
		{22, r.opClaim},
		{20, r.opFinish},
		{8, r.opRescue},
		{5, r.opRelease},
		{4, r.opRaceLateOutcome},
		{3, r.opRaceRescuers},
		{5, r.opReplay},
		{3, r.opReplayDeliveries},
		{12, r.opResolve},
		{5, r.opPause},
		{4, r.opConfig},
	}
	total := 0
	for _, o := range ops {
		total += o.weight
	}
	start := time.Now()
	for r.step = 1; r.step <= steps; r.step++ {
		r.begin()
		n := r.rng.IntN(total)
		for _, o := range ops {
			if n -= o.weight; n < 0 {
				o.fn()
				break
			}
		}
		r.end(r.step%modelFullEvery == 0)
	}
	r.step = steps + 1
	r.begin()
	r.drain()
	r.end(true)
	var cases []string
	for _, k := range slices.Sorted(maps.Keys(r.tally)) {
		cases = append(cases, fmt.Sprintf("%s %d", k, r.tally[k]))
	}
	t.Logf("seed %d: %d steps in %v: %d events, %d deliveries %v; cases: %s",
		seed, steps, time.Since(start).Round(time.Millisecond), len(r.m.events), len(r.m.deliveries), r.m.counts(), strings.Join(cases, ", "))
}

func (r *run) begin() {
	r.op = ""
	r.touched = map[*mEvent]bool{}
}

func (r *run) end(full bool) {
	r.trail = append(r.trail, fmt.Sprintf("%d: %s", r.step, r.op))
	if len(r.trail) > 15 {
		r.trail = r.trail[1:]
	}
	r.check(full)
}

func (r *run) fatalf(format string, args ...any) {
	r.t.Helper()
	trail := r.trail
	if len(trail) == 0 || !strings.HasPrefix(trail[len(trail)-1], strconv.Itoa(r.step)+": ") {
		trail = append(slices.Clone(trail), fmt.Sprintf("%d: %s", r.step, r.op))
	}
	r.t.Fatalf("model seed %d, step %d: %s\nlast steps:\n  %s\nreproduce: %s=%d %s=%d go test -race -run 'TestConformance/Model/' ./internal/store/...",
		r.seed, r.step, fmt.Sprintf(format, args...), strings.Join(trail, "\n  "), modelSeedEnv, r.seed, modelStepsEnv, r.steps)
}

func (r *run) logf(format string, args ...any) {
	if r.op != "" {
		r.op += "; "
	}
	r.op += fmt.Sprintf(format, args...)
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

// destSubset returns between lo and hi distinct destinations, shuffled.
func (r *run) destSubset(lo, hi int) []string {
	ds := slices.Clone(modelDests)
	r.rng.Shuffle(len(ds), func(i, j int) { ds[i], ds[j] = ds[j], ds[i] })
	return ds[:lo+r.rng.IntN(hi-lo+1)]
}

// ---- Ingest ----

func (r *run) newItem() store.NewEvent {
	src := pick(r.rng, []string{"stripe", "shop", "shop", "demo"})
	key := ""
	switch {
	case src == "demo":
	case r.rng.IntN(2) == 0:
		key = "k" + strconv.Itoa(r.rng.IntN(12)) // a key seen before, often
	default:
		r.fresh++
		key = "n" + strconv.Itoa(r.fresh)
	}
	lo := 1
	if r.rng.IntN(20) == 0 {
		lo = 0 // an event no destination wants
	}
	ne := store.NewEvent{
		Event: anyhook.Event{
			ID: store.NewID(), Source: src, DedupKey: key, ReceivedAt: received, Method: "POST", Path: "/webhooks/" + src,
			Header: modelHeader, Body: fmt.Appendf(nil, `{"id":%q,"step":%d}`, key, r.step),
		},
		Destinations: r.destSubset(lo, 3),
	}
	if src == "shop" && r.rng.IntN(4) != 0 {
		ne.Event.Object, ne.Event.Version = pick(r.rng, modelObjects), r.version()
		ne.StaleSkip = r.rng.IntN(2) == 0
	}
	return ne
}

// version is an object's version: rising with the steps, with enough
// jitter that some events arrive older than what was seen (stale).
func (r *run) version() string {
	return strconv.Itoa(r.step/4 + r.rng.IntN(8))
}

func (r *run) opIngest() {
	n := 1 + r.rng.IntN(3)
	if r.rng.IntN(6) == 0 {
		n = 4
	}
	evs := make([]store.NewEvent, n)
	for i := range evs {
		if i > 0 && r.rng.IntN(4) == 0 {
			// Another request with the key of a batch-mate (a provider
			// retry arriving in the same group commit), possibly with
			// another version and other destinations.
			evs[i] = evs[r.rng.IntN(i)]
			evs[i].Event.ID = store.NewID()
			evs[i].Destinations = r.destSubset(1, 2)
			if evs[i].Event.Object != "" {
				evs[i].Event.Version = r.version()
			}
			continue
		}
		evs[i] = r.newItem()
	}
	var desc []string
	for _, ne := range evs {
		e := ne.Event
		s := e.Source + "/" + cmp.Or(e.DedupKey, "-")
		if e.Object != "" {
			s += fmt.Sprintf(" %s v%s skip=%v", e.Object, e.Version, ne.StaleSkip)
		}
		desc = append(desc, s+" → "+strings.Join(ne.Destinations, ","))
	}
	r.logf("ingest [%s]", strings.Join(desc, "; "))

	res, err := r.s.Ingest(ctx(r.t), evs)
	if err := ingestFailure(res, err, len(evs)); err != nil {
		r.fatalf("Ingest: %v", err)
	}
	orders := batchOrders(evs)
	var order []int
	for _, o := range orders {
		if sameResults(res, r.m.predictIngest(evs, o)) {
			order = o
			break
		}
	}
	if order == nil {
		r.fatalf("Ingest results %s, want %s (recorded in the batch's order; no other order of it explains them either)",
			fmtResults(res), fmtResults(r.m.predictIngest(evs, orders[0])))
	}
	if !slices.IsSorted(order) {
		r.tally["batch judged in another order"]++
	}
	r.applyIngest(evs, order, res)
}

// batchOrders lists the orders in which a batch's items could have been
// recorded: the batch's own first, then the other permutations that keep
// items with one (source, dedup key) in their batch order (so the first of
// them is the event and the others its duplicates, as the contract says).
// The contract does not say in which order a batch's events are judged
// stale; see docs/reliability.md.
func batchOrders(evs []store.NewEvent) [][]int {
	var out [][]int
	var perm func(prefix []int, rest []int)
	perm = func(prefix, rest []int) {
		if len(rest) == 0 {
			out = append(out, slices.Clone(prefix))
			return
		}
		for i, x := range rest {
			ok := true
			for _, y := range rest {
				if y < x && evs[y].Event.DedupKey != "" && evs[y].Event.Source == evs[x].Event.Source && evs[y].Event.DedupKey == evs[x].Event.DedupKey {
					ok = false // an earlier copy of x's key comes first
				}
			}
			if ok {
				perm(append(prefix, x), append(slices.Clone(rest[:i]), rest[i+1:]...))
			}
		}
	}
	idx := make([]int, len(evs))
	for i := range idx {
		idx[i] = i
	}
	perm(nil, idx)
	return out
}

// predictIngest is what recording evs in order does to the model.
func (m *model) predictIngest(evs []store.NewEvent, order []int) []store.IngestResult {
	keys := map[srcKey]string{}
	marks := map[srcKey]string{}
	res := make([]store.IngestResult, len(evs))
	for _, i := range order {
		e := evs[i].Event
		k := srcKey{e.Source, e.DedupKey}
		if e.DedupKey != "" {
			if id, ok := keys[k]; ok {
				res[i] = store.IngestResult{ID: id, Duplicate: true}
				continue
			}
			if orig := m.byKey[k]; orig != nil {
				res[i] = store.IngestResult{ID: orig.id, Duplicate: true}
				continue
			}
			keys[k] = e.ID
		}
		stale := false
		if e.Object != "" {
			ok := srcKey{e.Source, e.Object}
			mark, have := marks[ok]
			if !have {
				mark, have = m.marks[ok]
			}
			switch {
			case have && modelCompare(e.Version, mark) < 0:
				stale = true
			case !have || modelCompare(e.Version, mark) > 0:
				marks[ok] = e.Version
			}
		}
		res[i] = store.IngestResult{ID: e.ID, Stale: stale}
	}
	return res
}

// sameResults compares results; a duplicate's Stale is not part of the
// contract.
func sameResults(got, want []store.IngestResult) bool {
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.Duplicate != w.Duplicate || (!w.Duplicate && g.Stale != w.Stale) {
			return false
		}
	}
	return true
}

func fmtResults(rs []store.IngestResult) string {
	var s []string
	for _, x := range rs {
		switch {
		case x.Duplicate:
			s = append(s, "duplicate of "+x.ID)
		case x.Stale:
			s = append(s, "new stale "+x.ID)
		default:
			s = append(s, "new "+x.ID)
		}
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func (r *run) applyIngest(evs []store.NewEvent, order []int, res []store.IngestResult) {
	m := r.m
	for _, i := range order {
		ne := evs[i]
		e := ne.Event
		if res[i].Duplicate {
			orig := m.byKey[srcKey{e.Source, e.DedupKey}]
			orig.duplicates++
			r.tally["duplicate"]++
			r.touched[orig] = true
			continue
		}
		ev := &mEvent{name: "e" + strconv.Itoa(len(m.events)+1), id: e.ID, source: e.Source, key: e.DedupKey,
			object: e.Object, version: e.Version, body: e.Body, stale: res[i].Stale}
		m.events = append(m.events, ev)
		if e.DedupKey != "" {
			m.byKey[srcKey{e.Source, e.DedupKey}] = ev
		}
		if e.Object != "" {
			ok := srcKey{e.Source, e.Object}
			if mark, have := m.marks[ok]; !have || modelCompare(e.Version, mark) > 0 {
				m.marks[ok] = e.Version
			}
		}
		status := anyhook.StatusPending
		if ev.stale && ne.StaleSkip {
			status = anyhook.StatusSkipped
		}
		if ev.stale {
			r.tally["stale, skip "+strconv.FormatBool(ne.StaleSkip)]++
		}
		for _, dest := range ne.Destinations {
			m.newDelivery(ev, dest, status, false, ev.stale && !ne.StaleSkip)
		}
		r.touched[ev] = true
		r.logf("%s new %s", ev.name, ev.id)
	}
}

// ---- Claim ----

// due lists the deliveries of dest a claim may take, in model order.
func (m *model) due(dest string) []*mDelivery {
	var ds []*mDelivery
	for _, d := range m.deliveries {
		if d.dest == dest && d.status == anyhook.StatusPending && d.due {
			ds = append(ds, d)
		}
	}
	return ds
}

func (r *run) opClaim() {
	dest := pick(r.rng, modelDests)
	limit := pick(r.rng, []int{-1, 0, 1, 1, 2, 2, 3, 5})
	lease := time.Hour
	if r.rng.IntN(3) == 0 {
		lease = -time.Hour // a worker that crashed: the lease ran out
	}
	r.claim(dest, limit, lease)
}

func (r *run) claim(dest string, limit int, lease time.Duration) []*mClaim {
	r.logf("claim %s limit %d lease %v", dest, limit, lease)
	due := r.m.due(dest)
	want := max(0, min(limit, len(due)))
	if r.m.paused[dest] {
		want = 0
		if len(due) > 0 && limit > 0 {
			r.tally["claim while paused"]++
		}
	}
	cs, err := r.s.Claim(ctx(r.t), dest, limit, lease)
	if err != nil {
		r.fatalf("Claim: %v", err)
	}
	if len(cs) != want {
		r.fatalf("claimed %d, want %d (%d due, paused %v)", len(cs), want, len(due), r.m.paused[dest])
	}
	var got []*mDelivery
	var latest time.Time // the latest next_attempt_at claimed
	for _, c := range cs {
		d := r.m.byID[c.Delivery.ID]
		switch {
		case d == nil:
			r.fatalf("claimed a delivery the model does not know: %+v", c.Delivery)
		case slices.Contains(got, d):
			r.fatalf("one claim returned %s twice", d)
		case d.dest != dest:
			r.fatalf("a claim of %s returned %s", dest, d)
		case d.status != anyhook.StatusPending || !d.due:
			r.fatalf("claimed %s (due %v): only due pending deliveries may be claimed", d, d.due)
		}
		if c.Delivery.Status != anyhook.StatusDelivering || c.Delivery.AttemptCount != d.attempts+1 {
			r.fatalf("claim of %s = %s at attempt %d, want delivering at attempt %d", d, c.Delivery.Status, c.Delivery.AttemptCount, d.attempts+1)
		}
		if c.Delivery.EventID != d.ev.id || c.Delivery.Destination != dest || c.Delivery.LeaseUntil.IsZero() || c.Delivery.ClaimedAt.IsZero() {
			r.fatalf("claim of %s = %+v", d, c.Delivery)
		}
		d.claimedAt = c.Delivery.ClaimedAt
		if e := c.Event; e.ID != d.ev.id || e.Source != d.ev.source || e.DedupKey != d.ev.key || !bytes.Equal(e.Body, d.ev.body) {
			r.fatalf("claim of %s carries event %s %s/%s %q, want %s", d, e.ID, e.Source, e.DedupKey, e.Body, d.ev.id)
		}
		if next := r.seen[d.id].NextAttemptAt; next.After(latest) {
			latest = next
		}
		got = append(got, d)
	}
	// Oldest due first (design.md, "Claim"): nothing left behind was due
	// before something taken.
	for _, d := range due {
		if !slices.Contains(got, d) && r.seen[d.id].NextAttemptAt.Before(latest) {
			r.fatalf("the claim left %s, due at %v, and took one due later, at %v", d, r.seen[d.id].NextAttemptAt, latest)
		}
	}
	var hs []*mClaim
	var names []string
	for _, d := range got {
		d.status, d.attempts, d.expired = anyhook.StatusDelivering, d.attempts+1, lease < 0
		d.claims++
		h := &mClaim{d: d, attempt: d.attempts}
		hs = append(hs, h)
		names = append(names, fmt.Sprintf("%s@%d", d.name, d.attempts))
	}
	r.m.claims = append(r.m.claims, hs...)
	r.logf("claimed [%s]", strings.Join(names, " "))
	return hs
}

// ---- Finish ----

func (r *run) opFinish() {
	m := r.m
	if len(m.claims) == 0 {
		r.opClaim()
		return
	}
	var open []*mClaim
	for _, h := range m.claims {
		if !h.done {
			open = append(open, h)
		}
	}
	var hs []*mClaim
	for range 1 + r.rng.IntN(3) {
		h := pick(r.rng, m.claims)
		if len(open) > 0 && r.rng.IntN(4) != 0 {
			h = pick(r.rng, open)
		}
		// One outcome per delivery in a batch, as the engine sends them.
		if !slices.ContainsFunc(hs, func(x *mClaim) bool { return x.d == h.d }) {
			hs = append(hs, h)
		}
	}
	if r.rng.IntN(10) == 0 {
		// An outcome for an attempt nobody claimed (a confused worker):
		// it must be refused and leave no attempt row behind, or the
		// real attempt of that number could not record its own.
		d := pick(r.rng, m.deliveries)
		if !slices.ContainsFunc(hs, func(x *mClaim) bool { return x.d == d }) {
			hs = append(hs, &mClaim{d: d, attempt: d.attempts + 1, done: true})
			r.tally["outcome of an attempt never claimed"]++
		}
	}
	outs := make([]store.Outcome, len(hs))
	for i, h := range hs {
		outs[i] = r.outcome(h)
	}
	if r.rng.IntN(25) == 0 {
		// A status an outcome cannot have: the call is refused whole.
		i := r.rng.IntN(len(outs))
		outs[i].Status = pick(r.rng, []anyhook.DeliveryStatus{"", anyhook.StatusHeld, anyhook.StatusSkipped, anyhook.StatusDelivering, "sent"})
		r.logf("finish with %s %q: refused", hs[i].d.name, outs[i].Status)
		if lost, err := r.s.Finish(ctx(r.t), outs); !errors.Is(err, anyhook.ErrInvalid) {
			r.fatalf("Finish with an outcome of status %q = %v, %v; want ErrInvalid and nothing recorded", outs[i].Status, lost, err)
		}
		r.tally["finish refused"]++
		for _, h := range hs {
			r.touched[h.d.ev] = true
		}
		return
	}
	r.finish(hs, outs)
	// Forget the oldest finished claims; keep a few for late outcomes.
	for len(m.claims) > 24 {
		i := slices.IndexFunc(m.claims, func(h *mClaim) bool { return h.done })
		if i < 0 {
			break
		}
		m.claims = slices.Delete(m.claims, i, i+1)
	}
}

func (r *run) outcome(h *mClaim) store.Outcome {
	o := store.Outcome{DeliveryID: h.d.id, Attempt: h.attempt,
		Result: anyhook.Attempt{Number: h.attempt, StartedAt: received, Duration: 5 * time.Millisecond}}
	switch r.rng.IntN(3) {
	case 0:
		o.Status, o.Result.StatusCode, o.Result.ResponseBody = anyhook.StatusDelivered, 200, []byte("ok")
	case 1:
		o.Status, o.Result.StatusCode, o.Result.Error = anyhook.StatusPending, 503, "HTTP 503"
		if r.rng.IntN(3) == 0 {
			o.Result.StatusCode, o.Result.Error = 0, "timeout"
		}
		o.RetryIn = pick(r.rng, []time.Duration{0, -time.Minute, hundredYears})
	default:
		o.Status, o.Result.StatusCode, o.Result.Error = anyhook.StatusDead, 422, "HTTP 422"
	}
	return o
}

func (r *run) finish(hs []*mClaim, outs []store.Outcome) {
	lost, err := r.s.Finish(ctx(r.t), outs)
	r.finishCheck(hs, outs, lost, err)
}

// finishCheck checks Finish's answer against the model and applies it.
func (r *run) finishCheck(hs []*mClaim, outs []store.Outcome, lost []string, err error) {
	var desc, wantLost []string
	for i, h := range hs {
		d := h.d
		live := d.status == anyhook.StatusDelivering && d.attempts == h.attempt
		s := fmt.Sprintf("%s@%d %s", d.name, h.attempt, outs[i].Status)
		if outs[i].Status == anyhook.StatusPending {
			s += fmt.Sprintf(" in %v", outs[i].RetryIn)
		}
		switch {
		case live && d.expired:
			r.tally["outcome of an expired claim not yet rescued"]++
		case !live && d.status == anyhook.StatusDelivering:
			r.tally["outcome lost to a newer claim"]++
		case !live && h.attempt > d.attempts:
		case !live && h.done:
			r.tally["outcome sent twice"]++
		case !live:
			r.tally["outcome lost to a rescue"]++
		}
		if !live {
			s += " (lost)"
			wantLost = append(wantLost, d.id)
		}
		desc = append(desc, s)
	}
	r.logf("finish [%s]", strings.Join(desc, ", "))
	if err != nil {
		r.fatalf("Finish: %v", err)
	}
	slices.Sort(lost)
	slices.Sort(wantLost)
	if !slices.Equal(lost, wantLost) {
		r.fatalf("Finish reported lost %v, want %v: an outcome is accepted exactly when its attempt still holds the claim", lost, wantLost)
	}
	for i, h := range hs {
		d, o := h.d, outs[i]
		h.done = true
		r.touched[d.ev] = true
		if slices.Contains(wantLost, d.id) {
			continue
		}
		d.status, d.expired = o.Status, false
		d.due = o.Status == anyhook.StatusPending && o.RetryIn <= 0
		d.rows[h.attempt] = mAttempt{code: o.Result.StatusCode, err: o.Result.Error, started: o.Result.StartedAt}
	}
}

// ---- Rescue ----

func (r *run) opRescue() {
	rules := map[string]store.StaleRule{}
	if r.rng.IntN(8) != 0 { // else a process whose config names no destination
		for k, v := range r.m.rules {
			rules[k] = v
		}
	}
	r.rescue(rules)
}

func (r *run) rescue(rules map[string]store.StaleRule) {
	ds, err := r.s.Rescue(ctx(r.t), ruleOf(rules))
	r.rescueCheck(rules, ds, err, false)
}

func ruleOf(rules map[string]store.StaleRule) func(string) (store.StaleRule, bool) {
	return func(dest string) (store.StaleRule, bool) {
		x, ok := rules[dest]
		return x, ok
	}
}

// rescueWant is what a rescuer with rules does to the model's expired
// claims.
func (r *run) rescueWant(rules map[string]store.StaleRule) map[*mDelivery]anyhook.DeliveryStatus {
	want := map[*mDelivery]anyhook.DeliveryStatus{}
	for _, d := range r.m.deliveries {
		x, ok := rules[d.dest]
		if d.status != anyhook.StatusDelivering || !d.expired || !ok {
			continue
		}
		switch {
		case x.Policy == anyhook.Hold:
			want[d] = anyhook.StatusHeld
		case x.MaxAttempts > 0 && d.attempts >= x.MaxAttempts:
			want[d] = anyhook.StatusDead
		default:
			want[d] = anyhook.StatusPending
		}
	}
	return want
}

// rescueCheck checks Rescue's answer against the model and applies it.
// When partial, the rescue may have left expired claims it knows (a
// concurrent rescuer held them).
func (r *run) rescueCheck(rules map[string]store.StaleRule, ds []anyhook.Delivery, err error, partial bool) {
	var known []string
	for _, dest := range modelDests {
		if x, ok := rules[dest]; ok {
			known = append(known, fmt.Sprintf("%s:%s/%d", dest, x.Policy, x.MaxAttempts))
		}
	}
	r.logf("rescue knowing [%s]", strings.Join(known, " "))
	if err != nil {
		r.fatalf("Rescue: %v", err)
	}
	for _, d := range r.m.deliveries {
		if _, ok := rules[d.dest]; !ok && d.status == anyhook.StatusDelivering && d.expired {
			r.tally["rescue leaves an unknown destination"]++
		}
	}
	want := r.rescueWant(rules)
	got := map[*mDelivery]bool{}
	var names []string
	for _, x := range ds {
		d := r.m.byID[x.ID]
		w, ok := want[d]
		switch {
		case d == nil:
			r.fatalf("rescued a delivery the model does not know: %+v", x)
		case got[d]:
			r.fatalf("rescued %s twice", d)
		case !ok:
			r.fatalf("rescued %s, which is not an expired claim of a destination the rescuer knows", d)
		case x.Status != w:
			r.fatalf("rescue made %s %s, want %s (rule %+v)", d, x.Status, w, rules[d.dest])
		case x.AttemptCount != d.attempts || x.EventID != d.ev.id || x.Destination != d.dest || !x.LeaseUntil.IsZero():
			r.fatalf("rescue of %s returned %+v", d, x)
		}
		got[d] = true
		names = append(names, fmt.Sprintf("%s→%s", d.name, x.Status))
	}
	for d := range want {
		if !got[d] && !partial {
			r.fatalf("rescue left %s, an expired claim of a destination it knows", d)
		}
	}
	for d := range got {
		st := want[d]
		r.tally["rescue to "+string(st)]++
		d.status, d.expired, d.due = st, false, st == anyhook.StatusPending
		d.rows[d.attempts] = mAttempt{unknown: true, started: d.claimedAt}
		r.touched[d.ev] = true
	}
	slices.Sort(names)
	r.logf("rescued [%s]", strings.Join(names, " "))
}

// ---- Release ----

// opRelease gives back one to three claims, mostly live ones (a worker
// that found too little of its lease left), sometimes one finished,
// rescued or released already; an expired live one sometimes races with
// a rescuer, of which exactly one acts.
func (r *run) opRelease() {
	m := r.m
	if len(m.claims) == 0 {
		r.opClaim()
		return
	}
	var live []*mClaim
	for _, h := range m.claims {
		if !h.done && h.d.status == anyhook.StatusDelivering && h.d.attempts == h.attempt {
			live = append(live, h)
		}
	}
	var hs []*mClaim
	for range 1 + r.rng.IntN(3) {
		h := pick(r.rng, m.claims)
		if len(live) > 0 && r.rng.IntN(4) != 0 {
			h = pick(r.rng, live)
		}
		if !slices.ContainsFunc(hs, func(x *mClaim) bool { return x.d == h.d }) {
			hs = append(hs, h)
		}
	}
	rs := make([]store.Release, len(hs))
	for i, h := range hs {
		rs[i] = store.Release{DeliveryID: h.d.id, Attempt: h.attempt}
	}
	if len(hs) == 1 && hs[0].d.expired && slices.Contains(live, hs[0]) && r.rng.IntN(2) == 0 {
		h := hs[0]
		rules := maps.Clone(m.rules)
		r.logf("race: release of %s@%d with a rescuer", h.d.name, h.attempt)
		var released []string
		var ds []anyhook.Delivery
		var lerr, rerr error
		concurrently(
			func() { released, lerr = r.s.Release(ctx(r.t), rs) },
			func() { ds, rerr = r.s.Rescue(ctx(r.t), ruleOf(rules)) },
		)
		if lerr == nil && !slices.Contains(released, h.d.id) {
			r.tally["release race won by the rescuer"]++
			r.rescueCheck(rules, ds, rerr, false)
			r.releaseCheck(hs, released, lerr)
			return
		}
		r.tally["release race won by the release"]++
		r.releaseCheck(hs, released, lerr)
		r.rescueCheck(rules, ds, rerr, false)
		return
	}
	released, err := r.s.Release(ctx(r.t), rs)
	r.releaseCheck(hs, released, err)
}

// releaseCheck checks Release's answer against the model and applies it:
// a live claim is released, pending and due as before its claim, its
// attempt not counted, claimed when its previous attempt started; the
// worker forgets it (the next claim has the same attempt number).
func (r *run) releaseCheck(hs []*mClaim, released []string, err error) {
	var desc, want []string
	for _, h := range hs {
		d := h.d
		s := fmt.Sprintf("%s@%d", d.name, h.attempt)
		if d.status == anyhook.StatusDelivering && d.attempts == h.attempt {
			want = append(want, d.id)
			r.tally["release of a live claim"]++
		} else {
			s += " (gone)"
			r.tally["release of a claim gone"]++
		}
		desc = append(desc, s)
	}
	r.logf("release [%s]", strings.Join(desc, ", "))
	if err != nil {
		r.fatalf("Release: %v", err)
	}
	slices.Sort(released)
	slices.Sort(want)
	if !slices.Equal(released, want) {
		r.fatalf("Release released %v, want %v: a claim is released exactly when its attempt still holds it", released, want)
	}
	for _, h := range hs {
		d := h.d
		h.done = true
		r.touched[d.ev] = true
		if !slices.Contains(want, d.id) {
			continue
		}
		d.status, d.due, d.expired = anyhook.StatusPending, true, false
		d.attempts--
		d.releases++
		d.claimedAt = d.rows[d.attempts].started // zero before the first attempt
		r.m.claims = slices.DeleteFunc(r.m.claims, func(x *mClaim) bool { return x == h })
	}
}

// ---- Races ----

// concurrently runs a and b at once.
func concurrently(a, b func()) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	wg.Go(func() { <-start; a() })
	wg.Go(func() { <-start; b() })
	close(start)
	wg.Wait()
}

// opRaceLateOutcome races the outcome of an expired claim with a rescuer:
// the worker was slow, not dead. Either the outcome is recorded and the
// rescuer leaves the delivery, or the rescuer takes it and the outcome is
// reported lost; never both, never neither.
func (r *run) opRaceLateOutcome() {
	var live []*mClaim
	for _, h := range r.m.claims {
		if d := h.d; !h.done && d.status == anyhook.StatusDelivering && d.attempts == h.attempt && d.expired {
			live = append(live, h)
		}
	}
	if len(live) == 0 {
		r.opRescue()
		return
	}
	h := pick(r.rng, live)
	out := r.outcome(h)
	rules := maps.Clone(r.m.rules)
	r.logf("race: outcome of %s@%d with a rescuer", h.d.name, h.attempt)
	var lost []string
	var ds []anyhook.Delivery
	var ferr, rerr error
	concurrently(
		func() { lost, ferr = r.s.Finish(ctx(r.t), []store.Outcome{out}) },
		func() { ds, rerr = r.s.Rescue(ctx(r.t), ruleOf(rules)) },
	)
	if ferr == nil && slices.Contains(lost, h.d.id) {
		r.tally["race won by the rescuer"]++
		r.rescueCheck(rules, ds, rerr, false)
		r.finishCheck([]*mClaim{h}, []store.Outcome{out}, lost, ferr)
		return
	}
	r.tally["race won by the outcome"]++
	r.finishCheck([]*mClaim{h}, []store.Outcome{out}, lost, ferr)
	r.rescueCheck(rules, ds, rerr, false)
}

// opRaceRescuers runs two rescuers at once, as two processes do, the
// second possibly on the other side of a config change (a destination it
// does not know, or another policy). They split the expired claims:
// none is handled twice, and each is handled by one that knows it.
func (r *run) opRaceRescuers() {
	a := maps.Clone(r.m.rules)
	b := maps.Clone(r.m.rules)
	dest := pick(r.rng, modelDests)
	switch x, ok := b[dest]; {
	case !ok:
		b[dest] = store.StaleRule{Policy: anyhook.Hold}
	case r.rng.IntN(2) == 0:
		delete(b, dest)
	case x.Policy == anyhook.Hold:
		x.Policy = anyhook.Reclaim
		b[dest] = x
	default:
		x.Policy = anyhook.Hold
		b[dest] = x
	}
	r.logf("race: two rescuers")
	r.tally["race of two rescuers"]++
	var da, db []anyhook.Delivery
	var ea, eb error
	concurrently(
		func() { da, ea = r.s.Rescue(ctx(r.t), ruleOf(a)) },
		func() { db, eb = r.s.Rescue(ctx(r.t), ruleOf(b)) },
	)
	either := map[*mDelivery]bool{}
	for d := range r.rescueWant(a) {
		either[d] = true
	}
	for d := range r.rescueWant(b) {
		either[d] = true
	}
	// Check each answer as if it came first, then the other; a delivery
	// both took fails the second check.
	first := func(ds []anyhook.Delivery, rules map[string]store.StaleRule) bool {
		want := r.rescueWant(rules)
		for _, x := range ds {
			if _, ok := want[r.m.byID[x.ID]]; !ok {
				return false
			}
		}
		return true
	}
	if first(da, a) {
		r.rescueCheck(a, da, ea, true)
		r.rescueCheck(b, db, eb, true)
	} else {
		r.rescueCheck(b, db, eb, true)
		r.rescueCheck(a, da, ea, true)
	}
	for d := range either {
		if d.status == anyhook.StatusDelivering {
			r.tally["race: a rescuer skipped a claim the other held"]++
			r.fatalf("two rescuers left %s, an expired claim one of them knows", d)
		}
	}
}

// ---- Replay ----

func (r *run) opReplay() {
	dests := r.destSubset(0, 2)
	if len(r.m.events) == 0 || r.rng.IntN(20) == 0 {
		id := store.NewID()
		r.logf("replay unknown event %s to %v", id, dests)
		if _, err := r.s.Replay(ctx(r.t), id, dests, store.Actor{}); !errors.Is(err, anyhook.ErrNotFound) {
			r.fatalf("Replay(unknown event) err = %v, want ErrNotFound", err)
		}
		return
	}
	ev := pick(r.rng, r.m.events)
	by := pick(r.rng, modelActors)
	r.logf("replay %s to %v by %q", ev.name, dests, by.Name)
	ds, err := r.s.Replay(ctx(r.t), ev.id, dests, by)
	if err != nil {
		r.fatalf("Replay: %v", err)
	}
	if len(ds) != len(dests) {
		r.fatalf("Replay made %d deliveries, want %d", len(ds), len(dests))
	}
	for i, x := range ds {
		want := anyhook.StatusPending
		if r.m.paused[dests[i]] {
			want = anyhook.StatusPaused
		}
		if x.ID == "" || r.m.byID[x.ID] != nil || x.EventID != ev.id || x.Destination != dests[i] || !x.Replay ||
			x.Status != want || x.AttemptCount != 0 || x.Stale {
			r.fatalf("replay delivery %d = %+v, want a new %s replay of %s to %s", i, x, want, ev.id, dests[i])
		}
		d := r.m.newDelivery(ev, dests[i], anyhook.StatusPending, true, false)
		d.id = x.ID
		r.m.byID[x.ID] = d
		if n := r.m.resolveReplayed(ev, dests[i], d, by); n > 0 {
			r.tally["replay resolves"]++
		}
	}
	r.touched[ev] = true
}

// matches is DeliveryFilter's selection in the model (no times, no
// cursor), on the shown status.
func (m *model) matches(d *mDelivery, f store.DeliveryFilter) bool {
	return (f.Status == "" || m.shown(d) == f.Status) && (f.Destination == "" || d.dest == f.Destination) && (f.Source == "" || d.ev.source == f.Source)
}

func (r *run) opReplayDeliveries() {
	statuses := []anyhook.DeliveryStatus{anyhook.StatusDead, anyhook.StatusDead, anyhook.StatusHeld, anyhook.StatusDelivered, anyhook.StatusSkipped,
		anyhook.StatusPending, anyhook.StatusDelivering, anyhook.StatusPaused, anyhook.StatusRetrying, anyhook.StatusResolved}
	var f store.DeliveryFilter
	switch r.rng.IntN(4) {
	case 0:
		f.Status = pick(r.rng, statuses)
	case 1:
		f.Status, f.Destination = pick(r.rng, statuses), pick(r.rng, modelDests)
	case 2:
		f.Status, f.Source = pick(r.rng, statuses), pick(r.rng, modelSources)
	default:
		f.Source, f.Destination = pick(r.rng, modelSources), pick(r.rng, modelDests)
	}
	if r.rng.IntN(3) == 0 {
		f.Limit = 1 // ignored
	}
	type pair struct {
		ev   *mEvent
		dest string
	}
	// A pair with a delivery still to send (pending, retrying, paused,
	// delivering) is never replayed: it would be sent twice.
	unfinished := map[pair]bool{}
	for _, d := range r.m.deliveries {
		switch r.m.shown(d) {
		case anyhook.StatusPending, anyhook.StatusRetrying, anyhook.StatusPaused, anyhook.StatusDelivering:
			unfinished[pair{d.ev, d.dest}] = true
		}
	}
	var pairs []pair
	for _, d := range r.m.deliveries {
		// A resolved delivery is never selected: a person dealt with it.
		if p := (pair{d.ev, d.dest}); r.m.matches(d, f) && r.m.shown(d) != anyhook.StatusResolved && !unfinished[p] && !slices.Contains(pairs, p) {
			pairs = append(pairs, p)
		}
	}
	// Replayed in (event, destination) order, as the contract says.
	slices.SortFunc(pairs, func(a, b pair) int { return cmp.Or(cmp.Compare(a.ev.id, b.ev.id), cmp.Compare(a.dest, b.dest)) })
	by := pick(r.rng, modelActors)
	r.logf("replay deliveries %+v by %q: want %d", f, by.Name, len(pairs))
	n, err := bulkCount(r.s.ReplayDeliveries(ctx(r.t), f, by))
	if err != nil {
		r.fatalf("ReplayDeliveries: %v", err)
	}
	if n != len(pairs) {
		r.fatalf("ReplayDeliveries = %d, want %d (one per event and destination selected)", n, len(pairs))
	}
	for _, p := range pairs {
		d := r.m.newDelivery(p.ev, p.dest, anyhook.StatusPending, true, false) // its id is learned at the check
		if n := r.m.resolveReplayed(p.ev, p.dest, d, by); n > 0 {
			r.tally["bulk replay resolves"]++
		}
		r.touched[p.ev] = true
	}
	if f.Status == anyhook.StatusDead || f.Status == anyhook.StatusHeld {
		// The same bulk replay again finds nothing: the first one
		// resolved every delivery it selected.
		if n, err := bulkCount(r.s.ReplayDeliveries(ctx(r.t), f, by)); err != nil || n != 0 {
			r.fatalf("ReplayDeliveries(%+v) again = %d, %v; want 0", f, n, err)
		}
	}
}

// ---- Resolve ----

func (r *run) opResolve() {
	m := r.m
	action := pick(r.rng, []string{store.ActionResend, store.ActionMarkDelivered, store.ActionDiscard})
	if r.rng.IntN(20) == 0 {
		action = "retry" // no such action
	}
	var stuck []*mDelivery
	for _, d := range m.deliveries {
		if d.status == anyhook.StatusHeld || d.status == anyhook.StatusDead {
			stuck = append(stuck, d)
		}
	}
	var d *mDelivery
	switch {
	case len(m.deliveries) == 0 || r.rng.IntN(25) == 0:
		id := store.NewID()
		r.logf("resolve unknown delivery %s %s", id, action)
		if _, err := r.s.Resolve(ctx(r.t), id, action, store.Actor{}); !errors.Is(err, anyhook.ErrNotFound) {
			r.fatalf("Resolve(unknown delivery) err = %v, want ErrNotFound", err)
		}
		return
	case len(stuck) > 0 && r.rng.IntN(4) != 0:
		d = pick(r.rng, stuck)
	default:
		d = pick(r.rng, m.deliveries) // mostly one that must be refused
	}
	by := pick(r.rng, modelActors)
	r.logf("resolve %s %s by %q", d, action, by.Name)
	var want anyhook.DeliveryStatus
	if d.status == anyhook.StatusHeld || d.status == anyhook.StatusDead {
		want = map[string]anyhook.DeliveryStatus{store.ActionResend: anyhook.StatusPending,
			store.ActionMarkDelivered: anyhook.StatusDelivered, store.ActionDiscard: anyhook.StatusResolved}[action]
	}
	x, err := r.s.Resolve(ctx(r.t), d.id, action, by)
	if want == "" {
		if !errors.Is(err, anyhook.ErrInvalid) {
			r.fatalf("Resolve(%s, %s) = %+v, %v; want ErrInvalid: only held or dead deliveries, with a known action", d, action, x, err)
		}
		r.tally["resolve refused"]++
		return
	}
	if err != nil {
		r.fatalf("Resolve(%s, %s): %v", d, action, err)
	}
	shown := want
	if want == anyhook.StatusPending && r.m.paused[d.dest] {
		shown = anyhook.StatusPaused // a resend to a paused destination waits
	} else if want == anyhook.StatusPending && d.attempts > 0 {
		shown = anyhook.StatusRetrying // a resend of a delivery whose attempts failed
	}
	if x.ID != d.id || x.Status != shown || x.Note == "" || x.AttemptCount != d.attempts || !x.LeaseUntil.IsZero() {
		r.fatalf("Resolve(%s, %s) = %+v, want %s with a note", d, action, x, shown)
	}
	r.tally["resolve "+string(d.status)+" "+action]++
	d.status, d.due = want, want == anyhook.StatusPending
	d.res = map[string]string{store.ActionMarkDelivered: anyhook.ResolvedMarkedDelivered, store.ActionDiscard: anyhook.ResolvedDiscarded}[action]
	d.resBy = by
	d.resolves++
	d.ev.actions = append(d.ev.actions, mAction{kind: action, d: d, by: by})
	r.touched[d.ev] = true
}

// ---- Pause and config ----

func (r *run) opPause() {
	dest := pick(r.rng, modelDests)
	p := !r.m.paused[dest]
	if r.rng.IntN(5) == 0 {
		p = !p // again what it is
	}
	r.logf("pause %s %v", dest, p)
	if err := r.s.SetPaused(ctx(r.t), dest, p); err != nil {
		r.fatalf("SetPaused: %v", err)
	}
	r.m.paused[dest] = p
	r.checkPaused()
}

// opConfig changes the config a rescuer knows: a destination is removed
// or added (its claims left for a process that knows it), its policy or
// its max_attempts changes.
func (r *run) opConfig() {
	dest := pick(r.rng, modelDests)
	x, known := r.m.rules[dest]
	switch r.rng.IntN(3) {
	case 0:
		if known {
			delete(r.m.rules, dest)
			r.logf("config: %s removed", dest)
			return
		}
		x = store.StaleRule{Policy: anyhook.Reclaim, MaxAttempts: 3}
	case 1:
		if x.Policy == anyhook.Hold {
			x.Policy = anyhook.Reclaim
		} else {
			x.Policy = anyhook.Hold
		}
	default:
		x.MaxAttempts = pick(r.rng, []int{0, 1, 2, 3, 5})
	}
	if x.Policy == "" {
		x.Policy = anyhook.Reclaim
	}
	r.m.rules[dest] = x
	r.logf("config: %s %s max_attempts %d", dest, x.Policy, x.MaxAttempts)
}

// drain ends a run, one check after each of its steps: every destination
// resumed and known, every expired claim rescued, every due delivery
// claimed and delivered. Nothing due may be left that nobody picks up.
func (r *run) drain() {
	next := func() {
		clear(r.touched) // the last, full check reads their attempt rows
		r.end(false)
		r.step++
		r.begin()
	}
	r.logf("drain: resume and know every destination")
	for _, dest := range modelDests {
		if r.m.paused[dest] {
			if err := r.s.SetPaused(ctx(r.t), dest, false); err != nil {
				r.fatalf("SetPaused: %v", err)
			}
			r.m.paused[dest] = false
		}
		if _, ok := r.m.rules[dest]; !ok {
			r.m.rules[dest] = store.StaleRule{Policy: anyhook.Reclaim}
		}
	}
	r.rescue(r.m.rules)
	for _, dest := range modelDests {
		for {
			next()
			hs := r.claim(dest, 50, time.Hour)
			if len(hs) == 0 {
				break
			}
			outs := make([]store.Outcome, len(hs))
			for i, h := range hs {
				outs[i] = store.Outcome{DeliveryID: h.d.id, Attempt: h.attempt, Status: anyhook.StatusDelivered,
					Result: anyhook.Attempt{Number: h.attempt, StartedAt: received, StatusCode: 200}}
			}
			r.finish(hs, outs)
		}
	}
	for _, d := range r.m.deliveries {
		if d.status == anyhook.StatusPending && d.due {
			r.fatalf("after the drain %s is still due", d)
		}
	}
}

// ---- Checks ----

// listDeliveries reads every delivery the filter selects (see listAll).
func (r *run) listDeliveries(f store.DeliveryFilter) []anyhook.Delivery {
	return listAll(r, fmt.Sprintf("ListDeliveries(%+v)", f), func(cursor string) ([]anyhook.Delivery, string, error) {
		f.Cursor = cursor
		return r.s.ListDeliveries(ctx(r.t), f)
	}, func(d anyhook.Delivery) string { return d.ID })
}

// listEvents reads every event the filter selects (see listAll).
func (r *run) listEvents(f store.EventFilter) []anyhook.Event {
	return listAll(r, fmt.Sprintf("ListEvents(%+v)", f), func(cursor string) ([]anyhook.Event, string, error) {
		f.Cursor = cursor
		return r.s.ListEvents(ctx(r.t), f)
	}, func(e anyhook.Event) string { return e.ID })
}

// listAll reads every row of a paged list (what, in failures), page by
// page from the first cursor, and checks the order (newest first, by id)
// and that no page repeats a row.
func listAll[T any](r *run, what string, list func(cursor string) ([]T, string, error), id func(T) string) []T {
	var all []T
	cursor := ""
	for pages := 0; ; pages++ {
		rows, next, err := list(cursor)
		if err != nil {
			r.fatalf("%s: %v", what, err)
		}
		all = append(all, rows...)
		if next == "" {
			break
		}
		if pages > 10000 {
			r.fatalf("%s: paging does not end", what)
		}
		cursor = next
	}
	for i := 1; i < len(all); i++ {
		if id(all[i]) >= id(all[i-1]) {
			r.fatalf("%s: %s after %s, want newest first without repeats", what, id(all[i]), id(all[i-1]))
		}
	}
	return all
}

// check compares the store with the model after a step: every delivery,
// the counts, and the events whose fields or attempt rows the step may
// have changed (attempt rows are read one event at a time, so the others'
// wait for a full check); when full, everything.
func (r *run) check(full bool) {
	m := r.m
	obs := r.listDeliveries(store.DeliveryFilter{Limit: 500})
	for _, x := range obs {
		r.observe(r.learn(x), x)
	}
	if len(obs) != len(m.deliveries) {
		r.fatalf("the store lists %d deliveries, the model has %d", len(obs), len(m.deliveries))
	}
	if full {
		r.checkAll()
	} else {
		var touched []*mEvent
		for ev := range r.touched {
			touched = append(touched, ev)
		}
		slices.SortFunc(touched, func(a, b *mEvent) int { return cmp.Compare(a.name, b.name) })
		for _, ev := range touched {
			r.checkEvent(ev, nil)
		}
	}
	for _, d := range m.deliveries {
		if d.id == "" {
			r.fatalf("lost: the store has no delivery of %s to %s (replay %v)", d.ev.name, d.dest, d.replay)
		}
	}
	r.checkCounters(obs)
	counts, err := r.s.Counts(ctx(r.t))
	if err != nil {
		r.fatalf("Counts: %v", err)
	}
	want := m.counts()
	for st := range maps.Keys(counts) {
		if counts[st] != want[st] {
			r.fatalf("Counts = %v, want %v", counts, want)
		}
	}
	for st := range maps.Keys(want) {
		if counts[st] != want[st] {
			r.fatalf("Counts = %v, want %v", counts, want)
		}
	}
}

// checkCounters holds the counters the store keeps as it writes (the
// queue's depth per destination and status) to a full count of the
// deliveries it lists.
func (r *run) checkCounters(all []anyhook.Delivery) {
	want := map[string]map[anyhook.DeliveryStatus]int{}
	for _, d := range all {
		if !slices.Contains(store.UnfinishedStatuses, d.Status) {
			continue
		}
		if want[d.Destination] == nil {
			want[d.Destination] = map[anyhook.DeliveryStatus]int{}
		}
		want[d.Destination][d.Status]++
	}
	qs, err := r.s.QueueStats(ctx(r.t), nil)
	if err != nil {
		r.fatalf("QueueStats: %v", err)
	}
	for _, dest := range slices.Sorted(maps.Keys(want)) {
		for _, st := range store.UnfinishedStatuses {
			if got := qs.Depth[dest][st]; got != want[dest][st] {
				r.fatalf("QueueStats depth of %s: %d %s, a full count says %d (depth %v)", dest, got, st, want[dest][st], qs.Depth)
			}
		}
	}
	for dest, byStatus := range qs.Depth {
		for st, n := range byStatus {
			if n != want[dest][st] {
				r.fatalf("QueueStats depth of %s: %d %s, a full count says %d", dest, n, st, want[dest][st])
			}
		}
	}
}

// learn returns the model's delivery for x, giving a delivery the step
// created the id the store chose.
func (r *run) learn(x anyhook.Delivery) *mDelivery {
	m := r.m
	if d := m.byID[x.ID]; d != nil {
		return d
	}
	i := slices.IndexFunc(m.deliveries, func(d *mDelivery) bool {
		return d.id == "" && d.ev.id == x.EventID && d.dest == x.Destination
	})
	if i < 0 {
		r.fatalf("the store has a delivery the model does not expect: %+v", x)
	}
	d := m.deliveries[i]
	d.id = x.ID
	m.byID[x.ID] = d
	return d
}

// observe compares a delivery as the store shows it with the model and
// with its previous observation, and remembers it.
func (r *run) observe(d *mDelivery, x anyhook.Delivery) {
	if x.EventID != d.ev.id || x.Destination != d.dest || x.Status != r.m.shown(d) || x.Replay != d.replay ||
		x.Stale != d.stale || x.AttemptCount != d.attempts {
		r.fatalf("delivery %s (shown %s) in the store: %s, attempt %d, replay %v, stale %v; want replay %v, stale %v",
			d, r.m.shown(d), x.Status, x.AttemptCount, x.Replay, x.Stale, d.replay, d.stale)
	}
	if !x.ClaimedAt.Equal(d.claimedAt) {
		r.fatalf("%s claimed at %v, want %v (its latest claim)", d, x.ClaimedAt, d.claimedAt)
	}
	res := x.Resolution
	switch {
	case res.Kind != d.res:
		r.fatalf("%s has resolution %+v, want %q", d, res, d.res)
	case d.res == "" && res != (anyhook.Resolution{}):
		r.fatalf("%s has resolution %+v, want none", d, res)
	case d.res != "" && (res.By != store.ActorName(d.resBy) || res.Reason != d.resBy.Reason || res.At.IsZero()):
		r.fatalf("%s has resolution %+v, want by %q for %q", d, res, store.ActorName(d.resBy), d.resBy.Reason)
	case d.replayedBy != nil && (d.replayedBy.id == "" || res.ReplayedBy != d.replayedBy.id):
		r.fatalf("%s was replayed by %s (%s), the store says %q", d, d.replayedBy.name, d.replayedBy.id, res.ReplayedBy)
	case d.replayedBy == nil && res.ReplayedBy != "":
		r.fatalf("%s says it was replayed by %s", d, res.ReplayedBy)
	}
	if x.LeaseUntil.IsZero() != (x.Status != anyhook.StatusDelivering) {
		r.fatalf("%s has lease_until %v: a lease exactly while delivering", d, x.LeaseUntil)
	}
	if prev, ok := r.seen[d.id]; ok {
		r.invariants(d, prev, x)
	}
	r.seen[d.id] = x
	d.claims, d.releases, d.resolves = 0, 0, 0
}

// invariants are the promises, checked against the previous observation
// of a delivery independently of the model's bookkeeping: only claims
// raise the attempt count, one each, and only releases lower it; a delivered or skipped delivery never
// changes; only an operator takes a delivery out of held or dead.
func (r *run) invariants(d *mDelivery, prev, cur anyhook.Delivery) {
	switch {
	case cur.AttemptCount < prev.AttemptCount && d.releases == 0:
		r.fatalf("attempts went backwards: %s from %d to %d", d, prev.AttemptCount, cur.AttemptCount)
	case cur.AttemptCount != prev.AttemptCount+d.claims-d.releases:
		r.fatalf("attempts of %s went from %d to %d with %d claims and %d releases in between", d, prev.AttemptCount, cur.AttemptCount, d.claims, d.releases)
	case (prev.Status == anyhook.StatusDelivered || prev.Status == anyhook.StatusSkipped || prev.Status == anyhook.StatusResolved) &&
		(cur.Status != prev.Status || cur.Resolution != prev.Resolution):
		r.fatalf("%s was %s and is now %s: a delivered, skipped or resolved delivery never changes", d, prev.Status, cur.Status)
	case prev.Status == anyhook.StatusHeld && cur.Status != anyhook.StatusHeld && d.resolves == 0:
		r.fatalf("%s was held and is now %s without an operator", d, cur.Status)
	case prev.Status == anyhook.StatusDead && cur.Status != anyhook.StatusDead && d.resolves == 0:
		r.fatalf("%s was dead and is now %s without an operator", d, cur.Status)
	case cur.Status == anyhook.StatusDelivering && prev.Status != anyhook.StatusDelivering && d.claims == 0:
		r.fatalf("%s became delivering without a claim", d)
	}
}

// checkEvent compares one event, its deliveries and their attempt rows
// with the model; got, when set, is the event as a list returned it.
func (r *run) checkEvent(ev *mEvent, listed *anyhook.Event) {
	got, err := r.s.Event(ctx(r.t), ev.id)
	if err != nil {
		r.fatalf("lost: Event(%s %s): %v", ev.name, ev.id, err)
	}
	for _, e := range []anyhook.Event{got, derefOr(listed, got)} {
		if e.ID != ev.id || e.Source != ev.source || e.DedupKey != ev.key || e.Object != ev.object || e.Version != ev.version ||
			e.Stale != ev.stale || e.Duplicates != ev.duplicates || !bytes.Equal(e.Body, ev.body) || !e.ReceivedAt.Equal(received) {
			r.fatalf("event %s in the store: %s/%s %s v%s stale %v duplicates %d body %q; want %s/%s %s v%s stale %v duplicates %d body %q",
				ev.name, e.Source, e.DedupKey, e.Object, e.Version, e.Stale, e.Duplicates, e.Body,
				ev.source, ev.key, ev.object, ev.version, ev.stale, ev.duplicates, ev.body)
		}
	}
	for _, x := range got.Deliveries {
		d := r.learn(x)
		if d.ev != ev {
			r.fatalf("event %s has delivery %+v, which the model gives %s", ev.name, x, d.ev.name)
		}
		r.observe(d, x)
		if len(x.Attempts) != len(d.rows) {
			r.fatalf("%s has %d attempt rows, want %d: every finished attempt and every rescued claim is recorded, nothing else (rows %+v)",
				d, len(x.Attempts), len(d.rows), x.Attempts)
		}
		for _, a := range x.Attempts {
			w, ok := d.rows[a.Number]
			switch {
			case !ok:
				r.fatalf("%s has attempt row %d, which the model does not expect (rows %+v)", d, a.Number, x.Attempts)
			case w.unknown && (a.StatusCode != 0 || a.Error == "" || !a.StartedAt.Equal(w.started) || a.Duration != 0):
				r.fatalf("%s attempt %d = %+v, want outcome unknown (no status code, an error, no duration), started when claimed at %v",
					d, a.Number, a, w.started)
			case !w.unknown && (a.StatusCode != w.code || a.Error != w.err):
				r.fatalf("%s attempt %d = %d %q, want the finished outcome %d %q", d, a.Number, a.StatusCode, a.Error, w.code, w.err)
			}
		}
	}
	if len(got.Deliveries) != len(ev.deliveries) {
		r.fatalf("event %s has %d deliveries, want %d (one per destination it was ingested for, plus replays)", ev.name, len(got.Deliveries), len(ev.deliveries))
	}
	if len(got.Actions) != len(ev.actions) {
		r.fatalf("event %s has %d actions, want %d: %+v", ev.name, len(got.Actions), len(ev.actions), got.Actions)
	}
	for i, a := range got.Actions {
		w := ev.actions[i]
		if a.Kind != w.kind || a.DeliveryID != w.d.id || a.Destination != w.d.dest || a.EventID != ev.id ||
			a.Actor != store.ActorName(w.by) || a.Reason != w.by.Reason || a.At.IsZero() || (i > 0 && a.ID <= got.Actions[i-1].ID) {
			r.fatalf("event %s action %d = %+v, want %s of %s by %q", ev.name, i, a, w.kind, w.d, store.ActorName(w.by))
		}
	}
}

func derefOr[T any](p *T, v T) T {
	if p == nil {
		return v
	}
	return *p
}

func (r *run) checkPaused() {
	got, err := r.s.Paused(ctx(r.t))
	if err != nil {
		r.fatalf("Paused: %v", err)
	}
	for _, dest := range modelDests {
		if got[dest] != r.m.paused[dest] {
			r.fatalf("Paused = %v, want %v", got, r.m.paused)
		}
	}
	if len(got) > len(modelDests) {
		r.fatalf("Paused = %v, want %v", got, r.m.paused)
	}
}

// checkAll compares everything: every event (nothing acknowledged is lost,
// one per (source, dedup key)), every attempt row, the paused set and the
// lists by status, destination and source.
func (r *run) checkAll() {
	m := r.m
	page := 500
	if r.step > r.steps {
		page = 7 // the last check pages through the lists
	}
	evs := r.listEvents(store.EventFilter{Limit: page})
	if len(evs) != len(m.events) {
		r.fatalf("the store lists %d events, the model has %d", len(evs), len(m.events))
	}
	byID := map[string]*mEvent{}
	for _, ev := range m.events {
		byID[ev.id] = ev
	}
	keys := map[srcKey]string{}
	for i := range evs {
		e := &evs[i]
		ev := byID[e.ID]
		if ev == nil {
			r.fatalf("the store has an event the model does not know: %s %s/%s", e.ID, e.Source, e.DedupKey)
		}
		if e.DedupKey != "" {
			k := srcKey{e.Source, e.DedupKey}
			if other, ok := keys[k]; ok {
				r.fatalf("two events with key %s/%s: %s and %s", e.Source, e.DedupKey, other, e.ID)
			}
			keys[k] = e.ID
		}
		r.checkEvent(ev, e)
	}
	r.checkPaused()

	ids := func(ds []anyhook.Delivery) []string {
		var s []string
		for _, d := range ds {
			s = append(s, d.ID)
		}
		slices.Sort(s)
		return s
	}
	wantIDs := func(f store.DeliveryFilter) []string {
		var s []string
		for _, d := range m.deliveries {
			if m.matches(d, f) {
				s = append(s, d.id)
			}
		}
		slices.Sort(s)
		return s
	}
	var filters []store.DeliveryFilter
	for _, st := range []anyhook.DeliveryStatus{anyhook.StatusPending, anyhook.StatusDelivering, anyhook.StatusDelivered,
		anyhook.StatusDead, anyhook.StatusHeld, anyhook.StatusSkipped, anyhook.StatusPaused, anyhook.StatusRetrying, anyhook.StatusResolved} {
		filters = append(filters, store.DeliveryFilter{Status: st})
		var want []string
		for _, ev := range m.events {
			if slices.ContainsFunc(ev.deliveries, func(d *mDelivery) bool { return m.shown(d) == st }) {
				want = append(want, ev.id)
			}
		}
		var got []string
		for _, e := range r.listEvents(store.EventFilter{Status: st, Limit: page}) {
			got = append(got, e.ID)
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			r.fatalf("ListEvents(status %s) = %d events, want %d", st, len(got), len(want))
		}
	}
	for _, dest := range modelDests {
		filters = append(filters, store.DeliveryFilter{Destination: dest, Limit: page})
	}
	for _, src := range modelSources {
		filters = append(filters, store.DeliveryFilter{Source: src, Status: anyhook.StatusPending},
			store.DeliveryFilter{Source: src, Status: anyhook.StatusPaused}, store.DeliveryFilter{Source: src, Status: anyhook.StatusRetrying})
	}
	for _, f := range filters {
		if got, want := ids(r.listDeliveries(f)), wantIDs(f); !slices.Equal(got, want) {
			r.fatalf("ListDeliveries(%+v) = %d deliveries, want %d", f, len(got), len(want))
		}
	}
}
