// Package soak is `anyhook soak`: a fault-injection soak of the real
// binary. It runs `anyhook serve` processes (this executable) on SQLite or
// PostgreSQL, sends a mixed load of signed Stripe, GitHub, Shopify and
// Standard Webhooks events with duplicates and reordering, and meanwhile
// kills gateways with SIGKILL and restarts them, makes the destinations
// fail, hang and recover, and (PostgreSQL) cuts the database connections
// through a TCP proxy it controls, or stalls them (holds the database's
// replies, the connections open) for longer than a claim's lease. At the
// end it reconciles what the providers were told (2xx) with what the
// destinations received:
//
//   - lost: an acknowledged event a destination never got, unless its
//     delivery is held (on_stale_claim: hold) or legitimately skipped as
//     stale (an event of the same object with a higher version exists);
//   - unexplained duplicates: a destination answered 2xx twice for one
//     X-AnyHook-Delivery without the store showing a reclaimed attempt
//     ("outcome unknown"), or one provider event arrived under two AnyHook
//     ids (a dedup failure), or a re-sent event was acknowledged with
//     another id;
//   - overlaps and inversions, seen by the destinations as they happen
//     (deliverytest.InFlight): two attempts of one delivery in flight at
//     once (an attempt that outlived its lease), and at the destination
//     with order: per_object two deliveries of one object in flight at
//     once or a lower version delivered after a higher one without
//     X-AnyHook-Stale.
//
// Next to that load, bursts about one hot Stripe object send each event as
// identical requests to every gateway at once (stress.go), and every
// ingest answer is timed and classed as inside or outside a fault window
// (answers.go): a 5xx, a missing answer or one slower than --slow outside
// every window is a defect. On PostgreSQL it also reads the database's
// deadlock count before and after (pg_stat_database).
//
// Then it stops the gateways and runs `anyhook log verify`. Exit 0 when
// nothing was lost or doubled, nothing overlapped or went backwards in
// order, no answer outside a fault window was a 5xx,
// missing or slow, PostgreSQL detected no deadlock and the log verifies
// (or verification is not available); 1 otherwise, 2 for bad flags.
package soak

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anyhook/anyhook/internal/cli"
	"github.com/anyhook/anyhook/internal/testkit/faultnet"
)

const usageText = `usage: anyhook soak [flags]

Runs 'anyhook serve' processes under a mixed provider load, with bursts of
identical requests about one hot object to every process at once, while
injecting faults (kill -9 and restart, destination errors and hangs,
PostgreSQL connection cuts and stalls longer than a lease), then
reconciles: nothing acknowledged is lost, nothing is delivered twice
except reclaims after a crash, no two attempts of one delivery (or, in
order, two deliveries of one object) were in flight at once, no version
was delivered after a higher one unflagged, no ingest answer outside a
fault window was a 5xx, missing or slow, PostgreSQL detected no deadlock,
and the log verifies.

flags:
  --duration D     how long to run the load and the faults (default 2m)
  --database DSN   postgres://… to soak PostgreSQL (default: SQLite in the work directory)
  --gateways N     gateway processes (default 1 on SQLite, 2 on PostgreSQL)
  --rate R         new events per second (default 40)
  --fault-every D  mean time between faults (default 4s)
  --seed N         random seed (default: from the clock)
  --dir DIR        work directory, kept afterwards (default: a temporary one, removed)
  --binary PATH    the anyhook binary to run (default: this executable)
  --stress D       mean time between hot-object bursts: identical requests to
                   every gateway at once, overlapping events of one object
                   (default 1s; 0: none)
  --slow D         an ingest answer slower than this outside a fault window
                   fails the soak (default 2s; 0: no limit)
`

type options struct {
	duration   time.Duration
	database   string
	gateways   int
	rate       int
	faultEvery time.Duration
	seed       uint64
	dir        string
	binary     string
	stress     time.Duration
	slow       time.Duration
}

// Main runs `anyhook soak` with args (without the command name).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, err := parse(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usageText)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "anyhook soak: %v\n", err)
		return 2
	}
	s, err := newSoak(o, stdout)
	if err != nil {
		fmt.Fprintf(stderr, "anyhook soak: %v\n", err)
		return 2
	}
	defer s.cleanup()
	rep, err := s.run(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "anyhook soak: %v\n", err)
		s.dumpLogs(stderr)
		return 1
	}
	rep.print(stdout)
	if !rep.ok() {
		s.dumpLogs(stderr)
		return 1
	}
	return 0
}

func parse(args []string, stderr io.Writer) (*options, error) {
	fs := cli.NewFlagSet("soak")
	o := &options{}
	fs.DurationVar(&o.duration, "duration", 2*time.Minute, "")
	fs.StringVar(&o.database, "database", "", "")
	fs.IntVar(&o.gateways, "gateways", 0, "")
	fs.IntVar(&o.rate, "rate", 40, "")
	fs.DurationVar(&o.faultEvery, "fault-every", 4*time.Second, "")
	fs.Uint64Var(&o.seed, "seed", 0, "")
	fs.StringVar(&o.dir, "dir", "", "")
	fs.StringVar(&o.binary, "binary", "", "")
	fs.DurationVar(&o.stress, "stress", time.Second, "")
	fs.DurationVar(&o.slow, "slow", 2*time.Second, "")
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	switch {
	case o.duration <= 0:
		return nil, errors.New("--duration must be positive")
	case o.rate < 1:
		return nil, errors.New("--rate must be at least 1")
	case o.faultEvery <= 0:
		return nil, errors.New("--fault-every must be positive")
	case o.gateways < 0:
		return nil, errors.New("--gateways must not be negative")
	case o.stress < 0:
		return nil, errors.New("--stress must not be negative")
	case o.slow < 0:
		return nil, errors.New("--slow must not be negative")
	case o.database != "" && !strings.HasPrefix(o.database, "postgres://") && !strings.HasPrefix(o.database, "postgresql://"):
		return nil, errors.New("--database must be postgres://… (SQLite is the default)")
	}
	if o.gateways == 0 {
		o.gateways = 1
		if o.database != "" {
			o.gateways = 2
		}
	}
	if o.seed == 0 {
		o.seed = uint64(time.Now().UnixNano())
	}
	if o.binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("cannot find this executable (pass --binary): %v", err)
		}
		o.binary = exe
	}
	return o, nil
}

// soak is one run.
type soak struct {
	o       *options
	out     io.Writer
	dir     string
	keepDir bool
	rng     *rand.Rand
	rngMu   sync.Mutex

	proxy    *faultnet.Proxy // PostgreSQL only
	dests    map[string]*sink
	gws      []*gateway
	cfgPath  string
	load     *load
	faults   map[string]int
	faultsMu sync.Mutex
	released atomic.Int64 // claims the gateways released (countReleases)
	windows  windows
	answers  *answers
}

func newSoak(o *options, out io.Writer) (*soak, error) {
	s := &soak{o: o, out: out, rng: rand.New(rand.NewPCG(o.seed, o.seed>>1|1)), faults: map[string]int{}}
	s.answers = newAnswers(&s.windows, o.slow)
	if o.dir != "" {
		if err := os.MkdirAll(o.dir, 0o700); err != nil {
			return nil, err
		}
		s.dir, s.keepDir = o.dir, true
	} else {
		d, err := os.MkdirTemp("", "anyhook-soak")
		if err != nil {
			return nil, err
		}
		s.dir = d
	}
	return s, nil
}

func (s *soak) cleanup() {
	for _, g := range s.gws {
		g.kill()
	}
	for _, d := range s.dests {
		d.close()
	}
	if s.proxy != nil {
		s.proxy.Close()
	}
	if !s.keepDir {
		os.RemoveAll(s.dir)
	}
}

func (s *soak) float() float64 {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.Float64()
}

func (s *soak) intn(n int) int {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.IntN(n)
}

func (s *soak) fault(kind string) {
	s.faultsMu.Lock()
	s.faults[kind]++
	s.faultsMu.Unlock()
	s.logf("fault: %s", kind)
}

func (s *soak) logf(format string, args ...any) {
	fmt.Fprintf(s.out, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
}

// Destinations: receipts (every source, reclaim), charges (Stripe and
// Shopify, hold) and ledger (Stripe and Shopify, reclaim, order:
// per_object).
var destPolicy = map[string]string{"receipts": "reclaim", "charges": "hold", "ledger": "reclaim"}

// destNames are the destinations in the order the report lists them.
var destNames = []string{"receipts", "charges", "ledger"}

// ordered is the destination with order: per_object.
const ordered = "ledger"

var routes = map[string][]string{
	"stripe":   {"receipts", "charges", "ledger"},
	"github":   {"receipts"},
	"shopify":  {"receipts", "charges", "ledger"},
	"standard": {"receipts"},
}

// A claim's lease is destTimeout + deliveryGrace (4 s); a stall lasts
// longer, so claims whose answer it holds come back after their lease.
const (
	adminToken     = "soak-admin-token"
	destTimeout    = 3 * time.Second
	deliveryGrace  = time.Second
	stallFor       = destTimeout + deliveryGrace + time.Second
	settleTimeout  = 3 * time.Minute
	resendInterval = 100 * time.Millisecond
)

func (s *soak) writeConfig(database string) error {
	cfg := fmt.Sprintf(`# written by anyhook soak
listen: 127.0.0.1:0
database: %q
admin_token: %s
delivery: {poll_interval: 100ms, grace: %s, shutdown: 1s}
log: {checkpoint_interval: 1s}
sources:
  stripe: {provider: stripe, secrets: [%s]}
  github: {provider: github, secrets: [%s]}
  shopify: {provider: shopify, secrets: [%s], ordering: {stale: skip}} # stripe delivers its stale events (the default); shopify skips them
  standard: {provider: standard, secrets: [%s]}
destinations:
  receipts:
    url: %s/receipts
    sources: [stripe, github, shopify, standard]
    timeout: %s
    max_attempts: 100000
    backoff: {initial: 50ms, max: 1s}
    on_stale_claim: reclaim
  charges:
    url: %s/charges
    sources: [stripe, shopify]
    timeout: %s
    max_attempts: 100000
    backoff: {initial: 50ms, max: 1s}
    on_stale_claim: hold
  ledger:
    url: %s/ledger
    sources: [stripe, shopify]
    timeout: %s
    max_attempts: 100000
    backoff: {initial: 50ms, max: 1s}
    on_stale_claim: reclaim
    order: per_object
`, database, adminToken, deliveryGrace, secrets["stripe"], secrets["github"], secrets["shopify"], secrets["standard"],
		s.dests["receipts"].url, destTimeout, s.dests["charges"].url, destTimeout, s.dests["ledger"].url, destTimeout)
	s.cfgPath = filepath.Join(s.dir, "anyhook.yaml")
	return os.WriteFile(s.cfgPath, []byte(cfg), 0o600)
}

// run is the whole soak: set up, load with faults, settle, reconcile.
func (s *soak) run(ctx context.Context) (*report, error) {
	start := time.Now()
	s.dests = map[string]*sink{}
	for name := range destPolicy {
		d, err := newSink(name, name == ordered)
		if err != nil {
			return nil, err
		}
		s.dests[name] = d
	}
	database := "sqlite:anyhook.db"
	engine := "SQLite"
	if s.o.database != "" {
		engine = "PostgreSQL"
		u, err := url.Parse(s.o.database)
		if err != nil {
			return nil, errors.New("--database: not a valid URL")
		}
		p, err := faultnet.NewProxy(u.Host)
		if err != nil {
			return nil, err
		}
		s.proxy = p
		u.Host = p.Addr()
		database = u.String()
	}
	if err := s.writeConfig(database); err != nil {
		return nil, err
	}
	var deadlocksBefore int64
	if s.o.database != "" {
		n, err := deadlocks(ctx, s.o.database, false)
		if err != nil {
			return nil, err
		}
		deadlocksBefore = n
	}
	stress := "no hot-object bursts"
	if s.o.stress > 0 {
		stress = fmt.Sprintf("a hot-object burst every ~%s", s.o.stress)
	}
	s.logf("soak: %s on %s, %d gateway(s), %d events/s, a fault every ~%s, %s, seed %d, work dir %s",
		s.o.duration, engine, s.o.gateways, s.o.rate, s.o.faultEvery, stress, s.o.seed, s.dir)
	for i := range s.o.gateways {
		g := &gateway{n: i, binary: s.o.binary, cfg: s.cfgPath, dir: s.dir}
		if err := g.start(ctx); err != nil {
			return nil, err
		}
		s.gws = append(s.gws, g)
	}
	s.load = newLoad(s)

	loadCtx, stopLoad := context.WithTimeout(ctx, s.o.duration)
	defer stopLoad()
	var wg sync.WaitGroup
	wg.Go(func() { s.load.run(loadCtx) })
	wg.Go(func() { s.injectFaults(loadCtx) })
	if s.o.stress > 0 {
		wg.Go(func() { s.load.stress(loadCtx) })
	}
	<-loadCtx.Done()
	if ctx.Err() != nil {
		wg.Wait()
		return nil, ctx.Err()
	}
	wg.Wait()
	s.logf("load and faults stopped; restoring everything and settling")

	// Everything back to health, then let the providers' retries finish.
	for _, d := range s.dests {
		d.setMode(modeOK)
	}
	if s.proxy != nil {
		s.proxy.ReleaseReplies()
		s.proxy.Restore()
	}
	for _, g := range s.gws {
		if !g.running() {
			if err := g.start(ctx); err != nil {
				return nil, err
			}
		}
	}
	if err := s.load.drain(ctx, settleTimeout); err != nil {
		return nil, err
	}
	rep, err := s.reconcile(ctx)
	if err != nil {
		return nil, err
	}
	rep.engine, rep.gateways, rep.duration = engine, s.o.gateways, s.o.duration
	s.faultsMu.Lock()
	rep.faults = s.faults
	s.faultsMu.Unlock()
	rep.answers = s.answers.report()
	st := &s.load.stressed
	rep.bursts, rep.burstEvents, rep.burstRequests = st.bursts.Load(), st.events.Load(), st.requests.Load()

	// Stop the gateways gracefully, then verify the log offline.
	for _, g := range s.gws {
		if a := g.addr(); a != "" {
			s.countReleases(ctx, a)
		}
		g.stop()
	}
	rep.released = s.released.Load()
	if s.o.database != "" {
		n, err := deadlocks(ctx, s.o.database, true)
		if err != nil {
			return nil, err
		}
		rep.deadlocks = n - deadlocksBefore
		rep.deadlocksRead = true
	}
	rep.logVerify, rep.logVerifyOK = s.verifyLog(ctx)
	rep.took = time.Since(start)
	return rep, nil
}

// injectFaults injects one fault at a time, at random intervals around
// --fault-every, until ctx ends.
func (s *soak) injectFaults(ctx context.Context) {
	kinds := []string{faultKill, "destination 500s", "destination hangs"}
	if s.proxy != nil {
		// The stall first, so that even a short soak has it.
		kinds = append([]string{faultStall}, append(kinds, faultCut)...)
	}
	for i := 0; ; i++ {
		wait := time.Duration((0.5 + s.float()) * float64(s.o.faultEvery))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		// Every kind once first, so that even a short soak has them all;
		// then mostly in turn, sometimes at random.
		kind := kinds[i%len(kinds)]
		if i >= len(kinds) && s.float() < 0.3 {
			kind = kinds[s.intn(len(kinds))]
		}
		// A fault lasts a fraction of the interval, so the system also
		// runs healthy between faults.
		hold := time.Duration((0.2 + 0.4*s.float()) * float64(s.o.faultEvery))
		s.fault(kind)
		switch kind {
		case faultKill:
			end := s.windows.open(kind)
			g := s.gws[s.intn(len(s.gws))]
			if a := g.addr(); a != "" {
				s.countReleases(ctx, a)
			}
			g.kill()
			sleep(ctx, time.Duration(s.float()*float64(time.Second)))
			if err := g.start(context.WithoutCancel(ctx)); err != nil {
				s.logf("restart of gateway %d failed: %v (retrying)", g.n, err)
				for g.start(context.WithoutCancel(ctx)) != nil {
					time.Sleep(time.Second)
				}
			}
			end()
		case "destination 500s", "destination hangs":
			mode := modeFail
			if kind == "destination hangs" {
				mode = modeHang
			}
			d := s.dests["receipts"]
			if s.float() < 0.5 {
				d = s.dests["charges"]
			}
			d.setMode(mode)
			sleep(ctx, hold)
			d.setMode(modeOK)
		case faultCut:
			end := s.windows.open(kind)
			s.proxy.Cut()
			sleep(ctx, hold)
			s.proxy.Restore()
			end()
		case faultStall:
			// Longer than a lease, whatever --fault-every: claims
			// answered after it must not be sent.
			end := s.windows.open(kind)
			s.proxy.HoldReplies()
			sleep(ctx, stallFor)
			s.proxy.ReleaseReplies()
			end()
		}
	}
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

func (s *soak) dumpLogs(w io.Writer) {
	for _, g := range s.gws {
		g.dumpLog(w)
	}
}
