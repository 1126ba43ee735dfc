// Package bench is `anyhook bench`: it runs a gateway in a process of its
// own (this executable, SQLite in a temporary directory or a given
// PostgreSQL database) with a local sink as its destination(s), drives
// pre-built events through real HTTP over loopback, and reports ingest
// throughput and latency, end-to-end delivery throughput and latency, the
// gateway process's own CPU per event and peak RSS — next to the same load
// against a bare net/http server and a non-durable relay, the ceilings on
// this machine.
package bench

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/anyhook/anyhook/internal/cli"
	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/testkit/syncio"
)

const usageText = `usage: anyhook bench [flags]

Runs a gateway (in a process of its own) against a local sink and measures
it, next to the same load against a bare net/http server and a non-durable
relay that forwards from memory (the ceilings on this machine).

flags:
  --database DSN        sqlite:PATH or postgres://… (default: SQLite in a temporary directory)
  --provider P          the source's provider: stripe (signed) or generic (no signature) (default stripe)
  --events N            events in the timed run (default 20000)
  --body-size SIZE      body size: 1KiB, 64KiB, 512 (default 1KiB)
  --concurrency C       client connections (default 64)
  --destinations D      destinations per event, 0..5 (default 1; 0 measures ingest alone)
  --duplicates K        duplicate storm: also send N new events K times each, concurrently (default 1: off)
  --sink-delay D        the sink answers after D, e.g. 50ms (default 0)
  --max-in-flight M     max_in_flight of each destination (default: the config default)
  --rate R              rate of each destination, requests/s (default: unlimited)
  --filter EXPR         a filter (CEL) on every destination; it must accept the bench's
                        events (Stripe's: type "charge.succeeded", data.object.amount 2000),
                        e.g. 'type.startsWith("charge.") && body.data.object.amount > 1000'
  --warmup N            untimed events first, and before the durable floor's open loop
                        (default 500)
  --drain-timeout D     how long to wait for deliveries after ingest (default 2m)
  --ingest-rate R       after the closed-loop run, an open-loop one: requests sent on
                        schedule at R per second, or at a share of the capacity the
                        closed-loop run measured (50%, 200%; events/s taken and
                        delivered: the lower of ingest and delivery), whether or not earlier
                        ones were answered; latency from when each was due (no
                        coordinated omission: a server that stalls is not sent
                        less), client timeout 10s; reports p50/p90/p99/p99.9/max,
                        the longest stall (no answer while one was outstanding),
                        what was shed and how fast, the gateway's CPU per event,
                        and that every accepted event was delivered; then, once the
                        gateway stopped, the same rate and count against the
                        durable floor (see --no-floor). Run it for a minute, three
                        times: a short run on a busy machine can put either one
                        above the other
  --duration D          length of the open-loop run (default 60s)
  --max-queue-wait D    the gateway's ingest.max_queue_wait (default: the config default, 50ms)
  --random-ids          event ids in random order, as Stripe's, GitHub's and Shopify's
                        are (default: in order, prefix_00000042): an index on them
                        is then written at a random place, a page per event
  --no-baseline         skip the bare net/http and relay runs
  --no-floor            skip the open loop's durable floor: a server in a process of
                        its own, on the gateway's CPUs, that writes each body to a
                        log file in group commits synced with fsync (as SQLite
                        syncs its WAL), answers, and forwards it to the sink: the
                        same rate's tail on this machine with a synced local
                        commit and a delivery and nothing else (no dedup, no
                        index, no retries, a log it overwrites). Only with
                        --ingest-rate.
  --processes N         run N gateway processes on one PostgreSQL database, the
                        requests spread over them in turn (default 1)
  --gateway-cpus LIST   run the gateway process(es) on these CPUs only (e.g. 0 or 0-1;
                        its GOMAXPROCS follows, but at least 2, as anyhook
                        serve sets it), and this process, the load client
                        and the sink, on the others (Linux)
  --cpuprofile FILE     write a CPU profile of the timed gateway run
  --trace FILE          write a runtime execution trace of the gateway during the
                        open-loop run (go tool trace FILE), to find what a stall waited on
                        (of the first gateway process, with --processes; so are the profiles)
  --open-cpuprofile FILE
                        write a CPU profile of the gateway during the open-loop
                        run (go tool pprof FILE), to see where a rate's CPU goes
                        (the CPU per event it reports then includes the profiler's)
  --json                print the report as JSON

anyhook bench --fill N fills a store with N events and times the read side
instead (anyhook bench --fill 0 --help).
`

type options struct {
	database     string
	provider     string
	events       int
	bodySize     int
	concurrency  int
	destinations int
	duplicates   int
	sinkDelay    time.Duration
	maxInFlight  int
	rate         float64
	filter       string
	warmup       int
	drainTimeout time.Duration
	noBaseline   bool
	noFloor      bool
	randomIDs    bool
	ingestRate   float64 // requests per second, or
	ingestShare  float64 // a share of the measured capacity
	duration     time.Duration
	maxQueueWait string
	gatewayCPUs  []int
	processes    int
	cpuprofile   string
	// openCPUProfile is --open-cpuprofile: a CPU profile of the open loop.
	openCPUProfile string
	trace          string
	json           bool
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := cli.NewFlagSet("bench")
	fs.StringVar(&o.database, "database", "", "")
	fs.StringVar(&o.provider, "provider", "stripe", "")
	fs.IntVar(&o.events, "events", 20000, "")
	size := fs.String("body-size", "1KiB", "")
	fs.IntVar(&o.concurrency, "concurrency", 64, "")
	fs.IntVar(&o.destinations, "destinations", 1, "")
	fs.IntVar(&o.duplicates, "duplicates", 1, "")
	fs.DurationVar(&o.sinkDelay, "sink-delay", 0, "")
	fs.IntVar(&o.maxInFlight, "max-in-flight", 0, "")
	fs.Float64Var(&o.rate, "rate", 0, "")
	fs.StringVar(&o.filter, "filter", "", "")
	fs.IntVar(&o.warmup, "warmup", 500, "")
	fs.DurationVar(&o.drainTimeout, "drain-timeout", 2*time.Minute, "")
	fs.BoolVar(&o.noBaseline, "no-baseline", false, "")
	fs.BoolVar(&o.noFloor, "no-floor", false, "")
	fs.BoolVar(&o.randomIDs, "random-ids", false, "")
	rate := fs.String("ingest-rate", "", "")
	fs.DurationVar(&o.duration, "duration", time.Minute, "")
	fs.StringVar(&o.maxQueueWait, "max-queue-wait", "", "")
	cpus := fs.String("gateway-cpus", "", "")
	fs.IntVar(&o.processes, "processes", 1, "")
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "")
	fs.StringVar(&o.trace, "trace", "", "")
	fs.StringVar(&o.openCPUProfile, "open-cpuprofile", "", "")
	fs.BoolVar(&o.json, "json", false, "")
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	n, err := parseSize(*size)
	if err != nil {
		return nil, fmt.Errorf("--body-size: %w", err)
	}
	o.bodySize = n
	if o.gatewayCPUs, err = parseCPUs(*cpus); err != nil {
		return nil, fmt.Errorf("--gateway-cpus: %w", err)
	}
	switch {
	case o.processes < 1 || o.processes > 16:
		return nil, errors.New("--processes must be 1..16")
	case o.processes > 1 && !strings.HasPrefix(o.database, "postgres"):
		return nil, errors.New("--processes above 1 needs --database postgres://…: a SQLite file has one process")
	}
	if o.ingestRate, o.ingestShare, err = parseRate(*rate); err != nil {
		return nil, err
	}
	if err := distinctFiles(map[string]string{"--cpuprofile": o.cpuprofile, "--open-cpuprofile": o.openCPUProfile, "--trace": o.trace}); err != nil {
		return nil, err
	}
	if o.maxQueueWait != "" {
		if d, err := time.ParseDuration(o.maxQueueWait); err != nil || d < 0 || d > config.MaxMaxQueueWait {
			return nil, fmt.Errorf("--max-queue-wait %q: want a duration from 0 (never shed) to %s, such as 50ms", o.maxQueueWait, config.MaxMaxQueueWait)
		}
	}
	switch {
	case o.trace != "" && o.ingestRate == 0 && o.ingestShare == 0:
		return nil, errors.New("--trace traces the open-loop run: give --ingest-rate too")
	case o.openCPUProfile != "" && o.ingestRate == 0 && o.ingestShare == 0:
		return nil, errors.New("--open-cpuprofile profiles the open-loop run: give --ingest-rate too")
	case o.duration <= 0:
		return nil, errors.New("--duration must be greater than 0")
	case o.provider != "stripe" && o.provider != "generic":
		return nil, fmt.Errorf("--provider %q: want stripe or generic", o.provider)
	case o.events < 1:
		return nil, errors.New("--events must be at least 1")
	case o.bodySize < 256 || o.bodySize > 64<<20:
		return nil, errors.New("--body-size must be between 256 bytes and 64MiB")
	case o.concurrency < 1:
		return nil, errors.New("--concurrency must be at least 1")
	case o.destinations < 0 || o.destinations > 5:
		return nil, errors.New("--destinations must be 0..5")
	case o.duplicates < 1:
		return nil, errors.New("--duplicates must be at least 1")
	case o.maxInFlight < 0, o.rate < 0, o.warmup < 0, o.sinkDelay < 0:
		return nil, errors.New("--max-in-flight, --rate, --warmup and --sink-delay cannot be negative")
	case o.database != "" && !strings.HasPrefix(o.database, "sqlite:") && !strings.HasPrefix(o.database, "postgres://") && !strings.HasPrefix(o.database, "postgresql://"):
		return nil, fmt.Errorf("--database %q is neither sqlite:PATH nor postgres://…", o.database)
	}
	return o, nil
}

// parseSize reads 512, 1KiB or 2MiB.
func parseSize(s string) (int, error) {
	mult := 1
	num := s
	for suffix, m := range map[string]int{"KiB": 1 << 10, "MiB": 1 << 20} {
		if v, ok := strings.CutSuffix(s, suffix); ok {
			num, mult = v, m
		}
	}
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a size such as 512, 1KiB or 2MiB", s)
	}
	return n * mult, nil
}

// Main runs `anyhook bench` with args (without the command names).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == childCommand {
		return childMain(ctx, args[1:], os.Stdin, stdout, stderr)
	}
	if len(args) > 0 && args[0] == floorCommand {
		return floorMain(ctx, args[1:], os.Stdin, stdout, stderr)
	}
	if isFill(args) {
		return fillMain(ctx, args, stdout, stderr)
	}
	// The gateway process writes its errors to stderr too: one write at a
	// time, from the bench and from the copy of the process's stderr.
	stderr = &syncio.Writer{W: stderr}
	o, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, usageText)
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "anyhook bench: %v\n", err)
		return 2
	}
	rep, err := run(ctx, o, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "anyhook bench: %s\n", strings.ReplaceAll(err.Error(), "\n", "; "))
		if rep == nil {
			return 2
		}
	}
	if o.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(rep)
	} else {
		rep.print(stdout)
	}
	if err != nil || len(rep.Failures) > 0 {
		return 1
	}
	return 0
}

const secret = "whsec_bench_secret"

// progress writes a line to stderr unless the output is JSON-only.
type progress struct{ w io.Writer }

func (p progress) say(format string, args ...any) { fmt.Fprintf(p.w, "bench: "+format+"\n", args...) }

func run(ctx context.Context, o *options, stderr io.Writer) (*Report, error) {
	say := progress{stderr}.say
	rep := &Report{Machine: machine(), Provider: o.provider, Events: o.events, BodySize: o.bodySize, Concurrency: o.concurrency,
		Destinations: o.destinations, Filter: o.filter, Duplicates: o.duplicates, SinkDelayMS: ms(o.sinkDelay), Database: "sqlite",
		Processes: o.processes, GatewayCPUs: o.gatewayCPUs, MaxQueueWait: cmp.Or(o.maxQueueWait, config.DefaultMaxQueueWait.String()),
		RandomIDs: o.randomIDs}
	if strings.HasPrefix(o.database, "postgres") {
		rep.Database = "postgres"
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot find this executable to run the gateway process: %w", err)
	}
	// Ids unique to this run, so that a reused PostgreSQL database holds
	// no duplicates of them.
	runID := strconv.FormatInt(time.Now().UnixNano()/1e6, 36)
	now := time.Now()
	say("preparing %d %s requests of %d bytes", o.events, o.provider, o.bodySize)
	prefix, warmPrefix := "evt_"+runID+"n", "evt_"+runID+"w"
	reqs, err := makeRequests(o.provider, prefix, o.events, 1, o.bodySize, o.randomIDs, secret, now)
	if err != nil {
		return nil, err
	}
	nwarm := min(o.warmup, o.events)
	warm, err := makeRequests(o.provider, warmPrefix, nwarm, 1, o.bodySize, o.randomIDs, secret, now)
	if err != nil {
		return nil, err
	}
	client := newClient(o.concurrency)
	defer client.CloseIdleConnections()
	sk, err := newSink(o.destinations, o.sinkDelay)
	if err != nil {
		return nil, err
	}
	defer sk.srv.Close()
	// warmUp sends the warm-up events to url and waits for their
	// deliveries, if the server delivers.
	warmUp := func(url string, delivers bool) error {
		if nwarm == 0 {
			return nil
		}
		wr := sk.expect(warmPrefix, nwarm)
		lr := drive(ctx, client, []string{url}, warm, nwarm, o.concurrency)
		if !delivers {
			return nil
		}
		// What was shed (503) is never delivered: wait for what was taken.
		if err := waitTaken(ctx, wr, lr.Taken, o.drainTimeout); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
		return nil
	}

	if !o.noBaseline {
		say("bare net/http: %d requests at concurrency %d", len(reqs), o.concurrency)
		srv, url, err := bareServer()
		if err != nil {
			return nil, err
		}
		warmUp(url, false)
		cpu0, _ := usage()
		lr := drive(ctx, client, []string{url}, reqs, o.events, o.concurrency)
		cpu1, _ := usage()
		rep.Baseline = phase(lr, o.events, cpu1-cpu0)
		client.CloseIdleConnections()
		srv.Close()

		say("non-durable relay: %d requests at concurrency %d, %d forwarding workers", len(reqs), o.concurrency, relayWorkers)
		rl, err := newRelay(sk.url, o.destinations, (nwarm+o.events)*o.destinations, nil)
		if err != nil {
			return nil, err
		}
		err = warmUp(rl.url, true)
		if err == nil {
			rep.Relay, rep.RelayDelivery, err = timed(ctx, client, []string{rl.url}, sk, prefix, reqs, o, nil, nil)
		}
		client.CloseIdleConnections()
		if cerr := rl.close(ctx); err == nil {
			err = cerr
		}
		if err != nil {
			rep.Failures = append(rep.Failures, "relay: "+err.Error())
		}
		rep.check("relay", rep.Relay, o.events)
	}

	dir, err := os.MkdirTemp("", "anyhook-bench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfgPath, err := writeConfig(dir, o, sk.url)
	if err != nil {
		return nil, err
	}
	say("starting %d gateway process(es) (%s)", o.processes, rep.Database)
	if len(o.gatewayCPUs) > 0 {
		if err := pinSelf(o.gatewayCPUs); err != nil {
			return nil, err
		}
		say("the gateway runs on CPUs %v, this process on the others", o.gatewayCPUs)
	}
	var gw gateways
	stopped := false
	defer func() {
		if !stopped {
			gw.stop(time.Minute)
		}
	}()
	var urls []string
	for range o.processes {
		c, err := startChild(ctx, exe, cfgPath, o.gatewayCPUs, stderr)
		if err != nil {
			return nil, err
		}
		gw = append(gw, c)
		urls = append(urls, "http://"+c.addr+"/webhooks/"+o.provider)
	}
	url := urls[0]
	if rep.GatewayProcs, err = gw[0].procs(); err != nil {
		return rep, err
	}

	say("warm-up: %d events", nwarm)
	if err := warmUp(url, true); err != nil {
		return rep, err
	}
	if o.cpuprofile != "" {
		path, err := filepath.Abs(o.cpuprofile)
		if err == nil {
			_, err = gw.call("profile " + path)
		}
		if err != nil {
			return rep, fmt.Errorf("--cpuprofile: %w", err)
		}
	}
	var db *dbServer
	if rep.Database == "postgres" {
		if db, err = findServer(ctx, o.database); err != nil {
			say("the database server's CPU is not measured: %v", err)
		}
	}
	say("anyhook (%s): %d events at concurrency %d, %d destination(s)", rep.Database, o.events, o.concurrency, o.destinations)
	rep.Ingest, rep.Delivery, err = timed(ctx, client, urls, sk, prefix, reqs, o, gw, db)
	if err != nil {
		rep.Failures = append(rep.Failures, err.Error())
	}
	if o.cpuprofile != "" {
		if _, err := gw.call("profile-stop"); err != nil {
			rep.Failures = append(rep.Failures, "--cpuprofile: "+err.Error())
		}
	}
	if rep.Baseline != nil && rep.Baseline.EventsPerSec > 0 {
		rep.RatioToBare = rep.Ingest.EventsPerSec / rep.Baseline.EventsPerSec
	}
	if rep.Relay != nil && rep.Relay.EventsPerSec > 0 {
		rep.RatioToRelay = rep.Ingest.EventsPerSec / rep.Relay.EventsPerSec
	}
	rep.check("ingest", rep.Ingest, o.events)

	floor := false // the open loop's durable floor, once the gateway has stopped
	if o.ingestRate > 0 || o.ingestShare > 0 {
		ol, err := runOpenLoop(ctx, o, urls, sk, "evt_"+runID+"o", now, capacity(rep, o.destinations), gw, say)
		rep.OpenLoop = ol
		if err != nil {
			rep.Failures = append(rep.Failures, "open loop: "+err.Error())
		}
		floor = err == nil && !o.noFloor
	}

	if o.duplicates > 1 {
		prefix := "evt_" + runID + "s"
		say("duplicate storm: %d events × %d copies", o.events, o.duplicates)
		storm, err := makeRequests(o.provider, prefix, o.events, o.duplicates, o.bodySize, o.randomIDs, secret, now)
		if err != nil {
			return rep, err
		}
		st, dl, err := timed(ctx, client, urls, sk, prefix, storm, o, gw, db)
		rep.Storm, rep.StormDelivery = st, dl
		if err != nil {
			rep.Failures = append(rep.Failures, "storm: "+err.Error())
		}
		rep.check("storm", st, o.events)
		if st.Accepted != o.events || st.Duplicate != o.events*(o.duplicates-1) {
			rep.Failures = append(rep.Failures, fmt.Sprintf("storm: %d accepted and %d duplicate answers, want %d and %d",
				st.Accepted, st.Duplicate, o.events, o.events*(o.duplicates-1)))
		}
		if rep.Ingest.GatewayCPUSeconds > 0 {
			// What the duplicates added, per duplicate request, against
			// the cost of a new event in the first run.
			dups := float64(o.events * (o.duplicates - 1))
			rep.DuplicateCPUPer1k = 1000 * (st.GatewayCPUSeconds - rep.Ingest.GatewayCPUSeconds) / dups
		}
		say("checking: one event per id, %d duplicates counted on each", o.duplicates-1)
		check := fmt.Sprintf("check %s %s %d %d", o.provider, prefix, o.events, o.duplicates-1)
		if o.randomIDs {
			check += " random"
		}
		if _, err := gw.call(check); err != nil {
			rep.Failures = append(rep.Failures, "storm: "+err.Error())
		}
	}
	if _, rss, err := gw.usage(); err == nil {
		rep.PeakRSSMiB = float64(rss) / (1 << 20)
	} else {
		rep.Failures = append(rep.Failures, err.Error())
	}
	_, rss := usage()
	rep.BenchPeakRSSMiB = float64(rss) / (1 << 20)
	stopped = true
	if err := gw.stop(time.Minute); err != nil {
		rep.Failures = append(rep.Failures, err.Error())
	}
	if floor {
		// After the gateway stopped: its background work (the log's
		// sequencer, the WAL's copy) would otherwise share the CPUs.
		fl, err := runFloor(ctx, o, exe, dir, sk, "evt_"+runID+"f", now, rep.OpenLoop.Rate, stderr, say)
		if fl != nil {
			fl.CapacityPct = rep.OpenLoop.CapacityPct
		}
		if err != nil {
			// Its figures would read as a finished run's.
			rep.Failures = append(rep.Failures, "open loop, durable floor: "+err.Error())
		} else {
			rep.OpenLoopFloor = fl
		}
	}
	return rep, nil
}

// capacity is what the closed-loop run took and delivered, events/s: its
// ingest rate, or its delivery rate when that was lower. Ingest goes
// first for the SQLite writer, so a closed loop can take events faster
// than it delivers them, leaving a backlog; a share of that ingest rate
// alone would be past what the gateway sustains.
func capacity(rep *Report, destinations int) float64 {
	c := rep.Ingest.EventsPerSec
	if d := rep.Delivery; destinations > 0 && d != nil && d.PerSec > 0 {
		c = min(c, d.PerSec/float64(destinations))
	}
	return c
}

// timed drives reqs against url and waits until every event reached every
// destination. gw, when not empty, is the server's processes: their own
// CPU in the same window is the gateway's; db, when not nil, the database
// server's processes, whose CPU in the window is the database's.
func timed(ctx context.Context, client *http.Client, urls []string, sk *sink, prefix string, reqs []request, o *options, gw gateways, db *dbServer) (*Phase, *Delivery, error) {
	sr := sk.expect(prefix, o.events)
	var g0, g1 time.Duration
	var d0, d1 cpuUse
	var gerr, derr error
	if len(gw) > 0 {
		g0, _, gerr = gw.usage()
	}
	if db != nil {
		d0, derr = db.cpu()
	}
	cpu0, _ := usage()
	lr := drive(ctx, client, urls, reqs, o.events, o.concurrency)
	backlog := sr.want - sr.count.Load()
	var werr error
	if lr.Failed > 0 {
		// A refused request's event never arrives (a shed source's 503:
		// --max-queue-wait, or more connections than a batch holds), and
		// the report counts the refusals: wait for the events taken.
		werr = waitTaken(ctx, sr, lr.Taken, o.drainTimeout)
	} else {
		werr = wait(ctx, sr, o.drainTimeout)
	}
	cpu1, _ := usage()
	window := time.Since(lr.Start)
	if len(gw) > 0 && gerr == nil {
		g1, _, gerr = gw.usage()
	}
	if db != nil && derr == nil {
		d1, derr = db.cpu()
	}
	p := phase(lr, o.events, cpu1-cpu0)
	if len(gw) > 0 && gerr == nil {
		p.gateway(g1-g0, window, o.events)
	}
	if db != nil && derr == nil {
		d := d1.since(d0)
		p.DatabaseCPUSeconds = d.Seconds()
		p.DatabaseCPUPerEventUS = float64(d.Microseconds()) / float64(o.events)
	}
	d := delivery(lr, sr)
	d.BacklogAtIngestEnd = int(backlog)
	d.DeliveredAtIngestEnd = int(sr.want - backlog)
	return p, d, errors.Join(werr, gerr)
}

func wait(ctx context.Context, sr *sinkRun, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-sr.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("%d of %d deliveries arrived within %v", sr.count.Load(), sr.want, timeout)
	}
}

// waitTaken waits until every event of taken has arrived at every
// destination of sr.
func waitTaken(ctx context.Context, sr *sinkRun, taken []atomic.Bool, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		missing := 0
		for d := range sr.arrived {
			for i := range taken {
				if taken[i].Load() && sr.arrived[d][i].Load() == 0 {
					missing++
				}
			}
		}
		if missing == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d deliveries of accepted events did not arrive within %v", missing, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// checkOnce asserts that each event of the storm exists once with dups
// duplicates counted.
func checkOnce(ctx context.Context, st store.Store, source, prefix string, events, dups int, random bool) string {
	bad := 0
	var first string
	for i := range events {
		id := eventID(prefix, i, random)
		evs, _, err := st.ListEvents(ctx, store.EventFilter{Source: source, Q: id, Limit: 5})
		if err != nil {
			return err.Error()
		}
		if len(evs) != 1 || evs[0].Duplicates != int64(dups) {
			bad++
			if first == "" {
				n := -1
				if len(evs) > 0 {
					n = int(evs[0].Duplicates)
				}
				first = fmt.Sprintf("%s: %d events, %d duplicates counted", id, len(evs), n)
			}
		}
	}
	if bad > 0 {
		return fmt.Sprintf("%d of %d ids not recorded exactly once with %d duplicates (first: %s)", bad, events, dups, first)
	}
	return ""
}

// writeConfig writes the gateway's configuration for a run to dir and
// returns its path. The source is named after its provider: stripe (signed,
// tolerance 1h so that pre-signed requests stay valid) or generic (no
// signature, the dedup key from the body's id).
func writeConfig(dir string, o *options, sinkURL string) (string, error) {
	db := o.database
	if db == "" {
		db = "sqlite:" + filepath.Join(dir, "bench.db")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\ndatabase: %q\nadmin_token: bench\n", db)
	if o.maxQueueWait != "" {
		fmt.Fprintf(&b, "ingest: {max_queue_wait: %s}\n", o.maxQueueWait)
	}
	switch o.provider {
	case "stripe":
		fmt.Fprintf(&b, "sources:\n  stripe:\n    provider: stripe\n    secrets: [%s]\n    tolerance: 1h\n", secret)
	case "generic":
		// Shed like a provider that retries: the bench measures overload.
		b.WriteString("sources:\n  generic:\n    provider: generic\n    signature: none\n    id: json:id\n    overload: shed\n")
	}
	fmt.Fprintf(&b, "    max_body: %d\n", max(2*o.bodySize, 1<<20))
	if o.destinations > 0 {
		b.WriteString("destinations:\n")
	}
	for d := range o.destinations {
		fmt.Fprintf(&b, "  d%d:\n    url: %s/d%d\n    sources: [%s]\n    timeout: 30s\n", d, sinkURL, d, o.provider)
		if o.maxInFlight > 0 {
			fmt.Fprintf(&b, "    max_in_flight: %d\n", o.maxInFlight)
		}
		if o.rate > 0 {
			fmt.Fprintf(&b, "    rate: %g\n", o.rate)
		}
		if o.filter != "" {
			fmt.Fprintf(&b, "    filter: %s\n", strconv.Quote(o.filter))
		}
	}
	path := filepath.Join(dir, "anyhook.yaml")
	// Parsed here first, so that a mistake is reported as such rather
	// than as a gateway process that did not start.
	if _, err := config.Parse(path, []byte(b.String()), func(string) (string, bool) { return "", false }); err != nil {
		return "", err
	}
	return path, os.WriteFile(path, []byte(b.String()), 0o600)
}

// Machine describes where the figures were measured.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	GoVersion string `json:"go_version"`
	OS        string `json:"os"`
}

func machine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// parseCPUs reads a CPU list: numbers and ranges, comma-separated ("0",
// "0-1", "0,2").
func parseCPUs(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var cpus []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		b := a
		if err == nil && isRange {
			b, err = strconv.Atoi(hi)
		}
		if err != nil || a < 0 || b < a || b >= 1024 {
			return nil, fmt.Errorf("%q is not a CPU list (like 0 or 0-1 or 0,2)", s)
		}
		for c := a; c <= b; c++ {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

// distinctFiles refuses two flags that name one file: each would write
// over the other.
func distinctFiles(files map[string]string) error {
	seen := map[string]string{}
	for _, flag := range slices.Sorted(maps.Keys(files)) {
		if files[flag] == "" {
			continue
		}
		abs, err := filepath.Abs(files[flag])
		if err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
		if other, ok := seen[abs]; ok {
			return fmt.Errorf("%s and %s name the same file", other, flag)
		}
		seen[abs] = flag
	}
	return nil
}
