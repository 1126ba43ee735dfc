package bench

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/testkit/syncio"
)

// The open loop, and the durable floor on the same schedule beside it:
// every request answered and every accepted event delivered, by both.
func TestBenchOpenLoopAndFloor(t *testing.T) {
	t.Parallel()
	rep := runBench(t, "--provider", "generic", "--events", "30", "--concurrency", "4", "--warmup", "0", "--no-baseline",
		"--ingest-rate", "100", "--duration", "1s", "--max-queue-wait", "0s")
	for name, ol := range map[string]*OpenLoop{"gateway": rep.OpenLoop, "floor": rep.OpenLoopFloor} {
		if ol == nil {
			t.Fatalf("%s: no open-loop figures", name)
		}
		if ol.Sent != 100 || ol.Accepted != 100 || ol.Delivered != 100 || ol.Errors != 0 || ol.Rate != 100 {
			t.Errorf("%s: %+v, want 100 sent, accepted and delivered at 100/s", name, ol)
		}
		if ol.P50MS <= 0 || ol.MaxMS < ol.P99MS || ol.ServerCPUPerEventUS <= 0 {
			t.Errorf("%s: figures %+v", name, ol)
		}
	}
}

func TestBenchNoFloor(t *testing.T) {
	t.Parallel()
	rep := runBench(t, "--provider", "generic", "--events", "10", "--concurrency", "2", "--warmup", "0", "--no-baseline",
		"--ingest-rate", "50", "--duration", "200ms", "--no-floor", "--max-queue-wait", "0s")
	if rep.OpenLoop == nil || rep.OpenLoop.Accepted != 10 || rep.OpenLoopFloor != nil {
		t.Errorf("open loop %+v, floor %+v", rep.OpenLoop, rep.OpenLoopFloor)
	}
}

// A stall is measured while something is outstanding: from the later of
// the previous answer and the earliest due of what is still unanswered.
func TestLongestStall(t *testing.T) {
	ms := time.Millisecond
	rs := []sent{
		{due: 0, done: 2 * ms},
		{due: 10 * ms, done: 11 * ms},
		// Due at 20 and 30, answered at 45 and 44: nothing came back
		// from 20 to 44.
		{due: 20 * ms, done: 45 * ms},
		{due: 30 * ms, done: 44 * ms},
		{due: 50 * ms, done: 51 * ms},
	}
	got, at := longestStall(rs)
	if got != 24*ms || at != 20*ms {
		t.Errorf("longestStall = %v at %v, want 24ms at 20ms", got, at)
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string][2]float64{"": {0, 0}, "655": {655, 0}, "50%": {0, 0.5}, "200 %": {0, 2}} {
		r, s, err := parseRate(in)
		if err != nil || r != want[0] || s != want[1] {
			t.Errorf("parseRate(%q) = %v, %v, %v; want %v", in, r, s, err, want)
		}
	}
	for _, in := range []string{"x", "0", "-5", "0%", "2000%", "%"} {
		if _, _, err := parseRate(in); err == nil {
			t.Errorf("parseRate(%q) took it", in)
		}
	}
}

// The floor answers 200 only for a body it wrote and synced: every body
// answered is in its log, once, and reached the sink.
func TestFloorLogsEveryBody(t *testing.T) {
	t.Parallel()
	sk, err := newSink(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer sk.srv.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var stderr bytes.Buffer
	fl, err := startProcess(t.Context(), exe, []string{floorCommand, "--sink", sk.url, "--dir", dir, "--queue", "20"}, nil, &syncio.Writer{W: &stderr})
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	const n = 20
	sr := sk.expect("evt_floor", n)
	var want []string
	for i := range n {
		want = append(want, fmt.Sprintf(`{"id":"evt_floor_%08d","n":%d}`, i, i))
	}
	var wg sync.WaitGroup
	for _, b := range want { // at once, so that commits hold several
		wg.Go(func() {
			resp, err := http.Post("http://"+fl.addr+"/", "application/json", strings.NewReader(b))
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("%s: HTTP %d", b, resp.StatusCode)
			}
		})
	}
	wg.Wait()
	select {
	case <-sr.done:
	case <-time.After(time.Minute):
		t.Fatalf("%d of %d bodies reached the sink", sr.count.Load(), n)
	}
	if err := fl.stop(time.Minute); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	data, err := os.ReadFile(filepath.Join(dir, "floor.log"))
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != floorLogSize {
		t.Errorf("log of %d bytes, want %d written before the run", len(data), floorLogSize)
	}
	var got []string
	for {
		size, k := binary.Uvarint(data)
		if k <= 0 || size == 0 {
			break
		}
		got = append(got, string(data[k:k+int(size)]))
		data = data[k+int(size):]
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the log holds %d bodies:\n%q\nwant %d:\n%q", len(got), got, len(want), want)
	}
}
