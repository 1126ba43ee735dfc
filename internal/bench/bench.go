// Package bench is `anyhook bench`: it runs a gateway in-process (SQLite in
// a temporary directory, or a given PostgreSQL database) with a local sink
// as its destination(s), drives pre-signed Stripe events through real HTTP
// over loopback, and reports ingest throughput and latency, end-to-end
// delivery throughput and latency, CPU per 1,000 events and peak RSS —
// next to the same load against a bare net/http server, the ceiling on
// this machine.
package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"

	"github.com/anyhook/anyhook/internal/cli"
	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/store"
)

const usageText = `usage: anyhook bench [flags]

Runs a gateway in-process against a local sink and measures it, next to a
bare net/http server under the same load (the ceiling on this machine).

flags:
  --database DSN        sqlite:PATH or postgres://… (default: SQLite in a temporary directory)
  --events N            events in the timed run (default 20000)
  --body-size SIZE      body size: 1KiB, 64KiB, 512 (default 1KiB)
  --concurrency C       client connections (default 64)
  --destinations D      destinations per event, 0..5 (default 1; 0 measures ingest alone)
  --duplicates K        duplicate storm: also send N new events K times each, concurrently (default 1: off)
  --sink-delay D        the sink answers after D, e.g. 50ms (default 0)
  --max-in-flight M     max_in_flight of each destination (default: the config default)
  --rate R              rate of each destination, requests/s (default: unlimited)
  --filter EXPR         a filter (CEL) on every destination; it must accept the bench's
                        events (type "charge.succeeded", data.object.amount 2000), e.g.
                        'type.startsWith("charge.") && body.data.object.amount > 1000'
  --warmup N            untimed events first (default 500)
  --drain-timeout D     how long to wait for deliveries after ingest (default 2m)
  --no-baseline         skip the bare net/http run
  --cpuprofile FILE     write a CPU profile of the timed gateway run
  --json                print the report as JSON
`

type options struct {
	database     string
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
	cpuprofile   string
	json         bool
}

func parseFlags(args []string) (*options, error) {
	o := &options{}
	fs := cli.NewFlagSet("bench")
	fs.StringVar(&o.database, "database", "", "")
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
	fs.StringVar(&o.cpuprofile, "cpuprofile", "", "")
	fs.BoolVar(&o.json, "json", false, "")
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	n, err := parseSize(*size)
	if err != nil {
		return nil, fmt.Errorf("--body-size: %w", err)
	}
	o.bodySize = n
	switch {
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
	rep := &Report{Machine: machine(), Events: o.events, BodySize: o.bodySize, Concurrency: o.concurrency,
		Destinations: o.destinations, Filter: o.filter, Duplicates: o.duplicates, SinkDelayMS: ms(o.sinkDelay), Database: "sqlite"}
	if strings.HasPrefix(o.database, "postgres") {
		rep.Database = "postgres"
	}
	// Ids unique to this run, so that a reused PostgreSQL database holds
	// no duplicates of them.
	runID := strconv.FormatInt(time.Now().UnixNano()/1e6, 36)
	now := time.Now()
	say("signing %d requests of %d bytes", o.events, o.bodySize)
	reqs, err := makeRequests("evt_"+runID+"n", o.events, 1, o.bodySize, secret, now)
	if err != nil {
		return nil, err
	}
	client := newClient(o.concurrency)
	defer client.CloseIdleConnections()

	if !o.noBaseline {
		say("bare net/http: %d requests at concurrency %d", len(reqs), o.concurrency)
		srv, url, err := bareServer()
		if err != nil {
			return nil, err
		}
		warm, _ := makeRequests("evt_"+runID+"w", min(o.warmup, o.events), 1, o.bodySize, secret, now)
		drive(ctx, client, url, warm, len(warm), o.concurrency)
		cpu0, _ := usage()
		lr := drive(ctx, client, url, reqs, o.events, o.concurrency)
		cpu1, _ := usage()
		rep.Baseline = phase(lr, o.events, cpu1-cpu0)
		client.CloseIdleConnections()
		srv.Close()
	}

	sk, err := newSink(o.destinations, o.sinkDelay)
	if err != nil {
		return nil, err
	}
	defer sk.srv.Close()
	dir, err := os.MkdirTemp("", "anyhook-bench")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cfg, err := benchConfig(dir, o, sk.url)
	if err != nil {
		return nil, err
	}
	g, err := gateway.New(ctx, gateway.Options{Config: cfg})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		g.Stop(context.Background())
		return nil, err
	}
	g.Start(ctx, ln)
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		g.Stop(sctx)
	}()
	url := "http://" + ln.Addr().String() + "/webhooks/stripe"

	if o.warmup > 0 {
		n := min(o.warmup, o.events)
		say("warm-up: %d events", n)
		warm, _ := makeRequests("evt_"+runID+"w", n, 1, o.bodySize, secret, now)
		wr := sk.expect("evt_"+runID+"w", n)
		drive(ctx, client, url, warm, n, o.concurrency)
		if err := wait(ctx, wr, o.drainTimeout); err != nil {
			return rep, fmt.Errorf("warm-up: %w", err)
		}
	}

	if o.cpuprofile != "" {
		f, err := os.Create(o.cpuprofile)
		if err != nil {
			return rep, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return rep, err
		}
		defer pprof.StopCPUProfile()
	}

	say("anyhook (%s): %d events at concurrency %d, %d destination(s)", rep.Database, o.events, o.concurrency, o.destinations)
	rep.Ingest, rep.Delivery, err = timed(ctx, client, url, sk, "evt_"+runID+"n", reqs, o)
	if err != nil {
		rep.Failures = append(rep.Failures, err.Error())
	}
	if rep.Baseline != nil && rep.Baseline.EventsPerSec > 0 {
		rep.RatioToBare = rep.Ingest.EventsPerSec / rep.Baseline.EventsPerSec
	}
	rep.check("ingest", rep.Ingest, o.events)

	if o.duplicates > 1 {
		prefix := "evt_" + runID + "s"
		say("duplicate storm: %d events × %d copies", o.events, o.duplicates)
		storm, err := makeRequests(prefix, o.events, o.duplicates, o.bodySize, secret, now)
		if err != nil {
			return rep, err
		}
		st, dl, err := timed(ctx, client, url, sk, prefix, storm, o)
		rep.Storm, rep.StormDelivery = st, dl
		if err != nil {
			rep.Failures = append(rep.Failures, "storm: "+err.Error())
		}
		rep.check("storm", st, o.events)
		if st.Accepted != o.events || st.Duplicate != o.events*(o.duplicates-1) {
			rep.Failures = append(rep.Failures, fmt.Sprintf("storm: %d accepted and %d duplicate answers, want %d and %d",
				st.Accepted, st.Duplicate, o.events, o.events*(o.duplicates-1)))
		}
		if rep.Ingest.CPUSeconds > 0 {
			// What the duplicates added, per duplicate request, against
			// the cost of a new event in the first run.
			dups := float64(o.events * (o.duplicates - 1))
			rep.DuplicateCPUPer1k = 1000 * (st.CPUSeconds - rep.Ingest.CPUSeconds) / dups
		}
		say("checking: one event per id, %d duplicates counted on each", o.duplicates-1)
		if msg := checkOnce(ctx, g.Store(), prefix, o.events, o.duplicates-1); msg != "" {
			rep.Failures = append(rep.Failures, "storm: "+msg)
		}
	}
	_, rss := usage()
	rep.PeakRSSMiB = float64(rss) / (1 << 20)
	return rep, nil
}

// timed drives reqs against the gateway and waits until every event
// reached every destination.
func timed(ctx context.Context, client *http.Client, url string, sk *sink, prefix string, reqs []request, o *options) (*Phase, *Delivery, error) {
	sr := sk.expect(prefix, o.events)
	cpu0, _ := usage()
	lr := drive(ctx, client, url, reqs, o.events, o.concurrency)
	backlog := sr.want - sr.count.Load()
	werr := wait(ctx, sr, o.drainTimeout)
	cpu1, _ := usage()
	p := phase(lr, o.events, cpu1-cpu0)
	d := delivery(lr, sr)
	d.BacklogAtIngestEnd = int(backlog)
	return p, d, werr
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

// checkOnce asserts that each event of the storm exists once with dups
// duplicates counted.
func checkOnce(ctx context.Context, st store.Store, prefix string, events, dups int) string {
	bad := 0
	var first string
	for i := range events {
		id := eventID(prefix, i)
		evs, _, err := st.ListEvents(ctx, store.EventFilter{Source: "stripe", Q: id, Limit: 5})
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

// benchConfig is the gateway's configuration for a run.
func benchConfig(dir string, o *options, sinkURL string) (*config.Config, error) {
	db := o.database
	if db == "" {
		db = "sqlite:" + filepath.Join(dir, "bench.db")
	}
	var b strings.Builder
	fmt.Fprintf(&b, "listen: 127.0.0.1:0\ndatabase: %q\nadmin_token: bench\n", db)
	fmt.Fprintf(&b, "sources:\n  stripe:\n    provider: stripe\n    secrets: [%s]\n    tolerance: 1h\n    max_body: %d\n", secret, max(2*o.bodySize, 1<<20))
	if o.destinations > 0 {
		b.WriteString("destinations:\n")
	}
	for d := range o.destinations {
		fmt.Fprintf(&b, "  d%d:\n    url: %s/d%d\n    sources: [stripe]\n    timeout: 30s\n", d, sinkURL, d)
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
	return config.Parse(filepath.Join(dir, "anyhook.yaml"), []byte(b.String()), func(string) (string, bool) { return "", false })
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
