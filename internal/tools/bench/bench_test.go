package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/testkit/pgtest"
	"github.com/anyhook/anyhook/internal/testkit/syncio"
)

// TestMain lets this test binary be the gateway process too: the bench
// runs its own executable as `… bench _gateway --config FILE`, and here
// that executable is the test binary (the same code as anyhook's).
func TestMain(m *testing.M) {
	if len(os.Args) > 2 && os.Args[1] == "bench" && (os.Args[2] == childCommand || os.Args[2] == floorCommand) {
		os.Exit(Main(context.Background(), os.Args[2:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// runBench runs Main and decodes its --json report. No figure is checked
// against a threshold: timings belong to the machine, not to the tests.
func runBench(t *testing.T, args ...string) *Report {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(t.Context(), append(args, "--json"), &out, &errOut)
	var rep Report
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("exit %d, report %q: %v\n%s", code, out.String(), err, errOut.String())
	}
	if code != 0 || len(rep.Failures) > 0 {
		t.Fatalf("exit %d, failures %q\n%s", code, rep.Failures, errOut.String())
	}
	return &rep
}

func TestBenchSQLiteStormAndSlowSink(t *testing.T) {
	t.Parallel()
	rep := runBench(t, "--events", "60", "--concurrency", "8", "--destinations", "2", "--duplicates", "3",
		"--sink-delay", "2ms", "--warmup", "10", "--body-size", "2KiB")
	if rep.Database != "sqlite" || rep.Provider != "stripe" || rep.Baseline == nil || rep.Baseline.Requests != 60 {
		t.Errorf("report = %+v", rep)
	}
	// The relay answered every request and forwarded each event to both
	// destinations once.
	if rep.Relay == nil || rep.Relay.Accepted != 60 || rep.Relay.Failed != 0 || rep.Relay.GatewayCPUSeconds != 0 {
		t.Errorf("relay = %+v", rep.Relay)
	}
	if d := rep.RelayDelivery; d == nil || d.Deliveries != 120 || d.Redeliveries != 0 || d.DeliveredAtIngestEnd+d.BacklogAtIngestEnd != 120 {
		t.Errorf("relay delivery = %+v", d)
	}
	if rep.RatioToBare <= 0 || rep.RatioToRelay <= 0 {
		t.Errorf("ratios to bare %v and to the relay %v", rep.RatioToBare, rep.RatioToRelay)
	}
	if rep.Ingest.Accepted != 60 || rep.Ingest.Duplicate != 0 || rep.Ingest.P50MS <= 0 || rep.Ingest.MaxMS < rep.Ingest.P99MS {
		t.Errorf("ingest = %+v", rep.Ingest)
	}
	if d := rep.Delivery; d.Deliveries != 120 || d.PerSec <= 0 || d.DeliveredAtIngestEnd+d.BacklogAtIngestEnd != 120 {
		t.Errorf("delivery = %+v", d)
	}
	// The gateway's CPU is its own process's, measured over the window.
	if rep.Ingest.GatewayCPUSeconds <= 0 || rep.Ingest.GatewayCPUPerEventUS <= 0 || rep.Ingest.GatewayCores <= 0 || rep.Storm.GatewayCPUSeconds <= 0 {
		t.Errorf("gateway CPU: ingest %+v, storm %+v", rep.Ingest, rep.Storm)
	}
	// Every event three times at once: one accepted, two duplicates each.
	if rep.Storm == nil || rep.Storm.Requests != 180 || rep.Storm.Accepted != 60 || rep.Storm.Duplicate != 120 {
		t.Errorf("storm = %+v", rep.Storm)
	}
	if rep.StormDelivery == nil || rep.StormDelivery.Deliveries != 120 || rep.StormDelivery.Redeliveries != 0 {
		t.Errorf("storm delivery = %+v", rep.StormDelivery)
	}
	if rep.PeakRSSMiB <= 0 || rep.BenchPeakRSSMiB <= 0 || rep.Machine.CPUs <= 0 {
		t.Errorf("machine = %+v, peak RSS %v (gateway) and %v (bench)", rep.Machine, rep.PeakRSSMiB, rep.BenchPeakRSSMiB)
	}
}

func TestBenchPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	rep := runBench(t, "--database", dsn, "--events", "40", "--concurrency", "8", "--warmup", "5", "--no-baseline", "--duplicates", "2")
	if rep.Database != "postgres" || rep.Ingest.Accepted != 40 || rep.Delivery.Deliveries != 40 || rep.Storm.Duplicate != 40 {
		t.Errorf("report = %+v", rep)
	}
	if rep.Relay != nil || rep.Ingest.GatewayCPUSeconds <= 0 {
		t.Errorf("relay %+v with --no-baseline; gateway CPU %v", rep.Relay, rep.Ingest.GatewayCPUSeconds)
	}
	// The server's CPU is measured when it runs on this host (finely
	// enough for 40 events where /proc has schedstat).
	_, serr := os.Stat("/proc/self/schedstat")
	if u, err := url.Parse(dsn); err == nil && serr == nil && (u.Hostname() == "127.0.0.1" || u.Hostname() == "localhost") {
		if rep.Ingest.DatabaseCPUSeconds <= 0 || rep.Ingest.DatabaseCPUPerEventUS <= 0 {
			t.Errorf("database CPU %v s, %v µs per event; want it measured for a server on this host", rep.Ingest.DatabaseCPUSeconds, rep.Ingest.DatabaseCPUPerEventUS)
		}
	}
}

// The measurement: a generic source without signature, with the
// bare server and the relay, on both stores.
func TestBenchGenericProvider(t *testing.T) {
	t.Parallel()
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			t.Parallel()
			args := []string{"--provider", "generic", "--events", "50", "--concurrency", "8", "--warmup", "10", "--duplicates", "2"}
			// Event ids in random order on SQLite, in order on
			// PostgreSQL: the sink and the storm's check read both.
			if db == "postgres" {
				args = append(args, "--database", pgtest.DSN(t))
			} else {
				args = append(args, "--random-ids")
			}
			rep := runBench(t, args...)
			if rep.Provider != "generic" || rep.Database != db || rep.RandomIDs != (db == "sqlite") {
				t.Errorf("provider %q, database %q, random ids %v", rep.Provider, rep.Database, rep.RandomIDs)
			}
			if rep.Relay.Accepted != 50 || rep.RelayDelivery.Deliveries != 50 || rep.RelayDelivery.Redeliveries != 0 {
				t.Errorf("relay = %+v, %+v", rep.Relay, rep.RelayDelivery)
			}
			// The dedup key is the body's id: each id once, one duplicate.
			if rep.Ingest.Accepted != 50 || rep.Delivery.Deliveries != 50 || rep.Storm.Accepted != 50 || rep.Storm.Duplicate != 50 ||
				rep.StormDelivery.Deliveries != 50 || rep.StormDelivery.Redeliveries != 0 {
				t.Errorf("ingest %+v, delivery %+v, storm %+v, %+v", rep.Ingest, rep.Delivery, rep.Storm, rep.StormDelivery)
			}
			if rep.Ingest.GatewayCPUPerEventUS <= 0 || rep.RatioToRelay <= 0 {
				t.Errorf("gateway CPU per event %v, ratio to relay %v", rep.Ingest.GatewayCPUPerEventUS, rep.RatioToRelay)
			}
		})
	}
}

// Both kinds of event id give back their index, and random ones do not
// sort in its order.
func TestEventID(t *testing.T) {
	var ids []string
	for i := range 100 {
		for _, random := range []bool{false, true} {
			id := eventID("evt_r", i, random)
			rest, ok := strings.CutPrefix(id, "evt_r_")
			if n, err := eventIndex(rest); !ok || err != nil || n != i {
				t.Errorf("eventID(%d, %v) = %q: index %d, %v", i, random, id, n, err)
			}
			if random {
				ids = append(ids, id)
			}
		}
	}
	if slices.IsSorted(ids) {
		t.Errorf("random ids sort in order: %q", ids[:5])
	}
}

func TestJSONID(t *testing.T) {
	t.Parallel()
	for body, want := range map[string]string{
		`{"id":"evt_1","x":1}`: "evt_1",
		`{"a":{"id":"in"}}`:    "in",
		`{"id":7}`:             "",
		`{"id":"unterminated`:  "",
		``:                     "",
	} {
		if got := jsonID([]byte(body)); got != want {
			t.Errorf("jsonID(%s) = %q, want %q", body, got, want)
		}
	}
}

// The gateway process answers its protocol and reports what is wrong.
func TestChildProtocol(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	o := &options{provider: "generic", bodySize: 1024, destinations: 0}
	cfg, err := writeConfig(dir, o, "http://127.0.0.1:1")
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var stderr syncio.Buffer
	c, err := startChild(t.Context(), exe, cfg, nil, &stderr)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	cpu, rss, err := c.usage()
	if err != nil || cpu <= 0 || rss <= 0 {
		t.Errorf("usage: %v, %v, %v", cpu, rss, err)
	}
	for line, want := range map[string]string{
		"nonsense":               `unknown command "nonsense"`,
		"check generic p x 0":    "want check SOURCE PREFIX N DUPS [random]",
		"check generic nope 1 0": "nope_00000000: 0 events",
		"profile " + dir:         "is a directory",
	} {
		if _, err := c.call(line); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", line, err, want)
		}
	}
	if _, err := c.call("check generic nope 0 0"); err != nil {
		t.Errorf("check of no events: %v", err)
	}
	if err := c.stop(time.Minute); err != nil {
		t.Errorf("stop: %v\n%s", err, stderr.String())
	}
}

func TestBenchIngestAlone(t *testing.T) {
	t.Parallel()
	rep := runBench(t, "--events", "30", "--concurrency", "4", "--destinations", "0", "--warmup", "0", "--no-baseline")
	if rep.Ingest.Accepted != 30 || rep.Delivery.Deliveries != 0 {
		t.Errorf("report = %+v, %+v", rep.Ingest, rep.Delivery)
	}
}

func TestBenchTable(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	if code := Main(t.Context(), []string{"--events", "20", "--concurrency", "4", "--warmup", "0"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	for _, want := range []string{"bare net/http", "relay (keeps nothing)", "anyhook ingest", "delivery (e2e)", "anyhook / bare net/http", "anyhook / relay",
		"gateway CPU per event", "peak RSS", "checks:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBenchBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--destinations", "6"}, {"--events", "0"}, {"--provider", "github"}, {"--body-size", "big"}, {"--database", "mysql://x"}, {"--duplicates", "0"}, {"extra"},
		{"--open-cpuprofile", "x.prof"}, {"--ingest-rate", "10", "--cpuprofile", "x.prof", "--open-cpuprofile", "./x.prof"},
		{"--ingest-rate", "10", "--trace", "x", "--open-cpuprofile", "x"},
		{"--max-queue-wait", "11s"}, {"--max-queue-wait", "-1ms"}, {"--max-queue-wait", "soon"},
	} {
		var out, errOut bytes.Buffer
		if code := Main(t.Context(), args, &out, &errOut); code != 2 || !strings.HasPrefix(errOut.String(), "anyhook bench: ") {
			t.Errorf("%q: exit %d, stderr %q", args, code, errOut.String())
		}
	}
	var out bytes.Buffer
	if code := Main(t.Context(), []string{"-h"}, &out, &out); code != 0 || !strings.Contains(out.String(), "--sink-delay") {
		t.Errorf("-h: exit %d, %q", code, out.String())
	}
}

func TestParseCPUs(t *testing.T) {
	for in, want := range map[string][]int{"": nil, "0": {0}, "0-2": {0, 1, 2}, "1,3": {1, 3}, "0-1,3": {0, 1, 3}} {
		got, err := parseCPUs(in)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("parseCPUs(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"x", "2-1", "-1", "0,", "1-"} {
		if _, err := parseCPUs(in); err == nil {
			t.Errorf("parseCPUs(%q) took it", in)
		}
	}
}
