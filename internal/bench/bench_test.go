package bench

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/anyhook/anyhook/internal/pgtest"
)

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
	if rep.Database != "sqlite" || rep.Baseline == nil || rep.Baseline.Requests != 60 {
		t.Errorf("report = %+v", rep)
	}
	if rep.Ingest.Accepted != 60 || rep.Ingest.Duplicate != 0 || rep.Ingest.P50MS <= 0 || rep.Ingest.MaxMS < rep.Ingest.P99MS {
		t.Errorf("ingest = %+v", rep.Ingest)
	}
	if rep.Delivery.Deliveries != 120 || rep.Delivery.PerSec <= 0 {
		t.Errorf("delivery = %+v", rep.Delivery)
	}
	// Every event three times at once: one accepted, two duplicates each.
	if rep.Storm == nil || rep.Storm.Requests != 180 || rep.Storm.Accepted != 60 || rep.Storm.Duplicate != 120 {
		t.Errorf("storm = %+v", rep.Storm)
	}
	if rep.StormDelivery == nil || rep.StormDelivery.Deliveries != 120 || rep.StormDelivery.Redeliveries != 0 {
		t.Errorf("storm delivery = %+v", rep.StormDelivery)
	}
	if rep.PeakRSSMiB <= 0 || rep.Machine.CPUs <= 0 {
		t.Errorf("machine = %+v, peak RSS %v", rep.Machine, rep.PeakRSSMiB)
	}
}

func TestBenchPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	rep := runBench(t, "--database", dsn, "--events", "40", "--concurrency", "8", "--warmup", "5", "--no-baseline", "--duplicates", "2")
	if rep.Database != "postgres" || rep.Ingest.Accepted != 40 || rep.Delivery.Deliveries != 40 || rep.Storm.Duplicate != 40 {
		t.Errorf("report = %+v", rep)
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
	for _, want := range []string{"bare net/http", "anyhook ingest", "delivery (e2e)", "ingest / bare net/http", "peak RSS", "checks:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out.String())
		}
	}
}

func TestBenchBadFlags(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--destinations", "6"}, {"--events", "0"}, {"--body-size", "big"}, {"--database", "mysql://x"}, {"--duplicates", "0"}, {"extra"},
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
