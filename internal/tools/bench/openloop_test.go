package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
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

// Without the floor, with the open loop's CPU profile and trace.
func TestBenchNoFloor(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	prof, tr := filepath.Join(dir, "open.prof"), filepath.Join(dir, "open.trace")
	rep := runBench(t, "--provider", "generic", "--events", "10", "--concurrency", "2", "--warmup", "0", "--no-baseline",
		"--ingest-rate", "50", "--duration", "200ms", "--no-floor", "--max-queue-wait", "0s",
		"--open-cpuprofile", prof, "--trace", tr)
	if rep.OpenLoop == nil || rep.OpenLoop.Accepted != 10 || rep.OpenLoopFloor != nil || rep.MaxQueueWait != "0s" {
		t.Errorf("open loop %+v, floor %+v, max_queue_wait %q", rep.OpenLoop, rep.OpenLoopFloor, rep.MaxQueueWait)
	}
	// A CPU profile is gzipped; a trace starts with its version header.
	for path, magic := range map[string]string{prof: "\x1f\x8b", tr: "go 1."} {
		if b, err := os.ReadFile(path); err != nil || !bytes.HasPrefix(b, []byte(magic)) {
			t.Errorf("%s: %d bytes, %v; want it to start with %q", path, len(b), err, magic)
		}
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

// The floor's process (its flags, its commands): every body answered is
// in its log, once, and reached the sink.
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
	var stderr syncio.Buffer
	fl, err := startProcess(t.Context(), exe, []string{floorCommand, "--sink", sk.url, "--dir", dir, "--queue", "20"}, nil, &stderr)
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
	got := readFloorLog(data)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("the log holds %d bodies:\n%q\nwant %d:\n%q", len(got), got, len(want), want)
	}
}

// readFloorLog is the bodies in a floor's log, from its start to the
// first zero length.
func readFloorLog(data []byte) []string {
	var got []string
	for {
		size, k := binary.Uvarint(data)
		if k <= 0 || size == 0 || k+int(size) > len(data) {
			return got
		}
		got = append(got, string(data[k:k+int(size)]))
		data = data[k+int(size):]
	}
}

// startTestFloor is a floor in this process, its log of size bytes synced
// with sync, forwarding to a sink of its own.
func startTestFloor(t *testing.T, size int64, sync func(*os.File) error) (*floor, *sink, string) {
	t.Helper()
	sk, err := newSink(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sk.srv.Close() })
	path := filepath.Join(t.TempDir(), "floor.log")
	fl, err := startFloor(t.Context(), path, size, sync, sk.url, 1, 100)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fl.close(context.Background()) })
	return fl, sk, path
}

func postBody(t *testing.T, url, body string) int {
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A body is answered 200 only once the sync of the commit that holds it
// has returned: the sync below is slow, and records what the log held
// when it returned.
func TestFloorAnswersAfterTheSync(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	synced := map[string]bool{}
	slow := func(f *os.File) error {
		time.Sleep(5 * time.Millisecond)
		if err := f.Sync(); err != nil {
			return err
		}
		data, err := os.ReadFile(f.Name())
		mu.Lock()
		defer mu.Unlock()
		for _, b := range readFloorLog(data) {
			synced[b] = true
		}
		return err
	}
	fl, sk, _ := startTestFloor(t, 1<<20, slow)
	const n = 30
	sr := sk.expect("evt_sync", n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			b := fmt.Sprintf(`{"id":"evt_sync_%08d"}`, i)
			if code := postBody(t, fl.url, b); code != http.StatusOK {
				t.Errorf("%s: HTTP %d", b, code)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if !synced[b] {
				t.Errorf("%s answered 200 before a sync that held it returned", b)
			}
		})
	}
	wg.Wait()
	select {
	case <-sr.done:
	case <-time.After(time.Minute):
		t.Fatalf("%d of %d bodies reached the sink", sr.count.Load(), n)
	}
}

// A failed sync fails its batch: 503, and nothing forwarded.
func TestFloorFailedSync(t *testing.T) {
	t.Parallel()
	fl, sk, _ := startTestFloor(t, 1<<20, func(*os.File) error { return errors.New("the disk is gone") })
	sk.expect("evt_fail", 1)
	if code := postBody(t, fl.url, `{"id":"evt_fail_00000000"}`); code != http.StatusServiceUnavailable {
		t.Errorf("HTTP %d after a failed sync, want 503", code)
	}
	time.Sleep(100 * time.Millisecond) // a forward would have reached the sink by now
	if n := sk.run.Load().count.Load(); n != 0 {
		t.Errorf("%d bodies forwarded after a failed sync", n)
	}
}

// The log keeps its size: it starts again from its start when the next
// batch would pass its end, and refuses a batch larger than itself.
func TestFloorLogWraps(t *testing.T) {
	t.Parallel()
	const size = 4096
	fl, sk, path := startTestFloor(t, size, (*os.File).Sync)
	var bodies []string
	for i := range 12 { // one at a time: a commit each, four fit
		b := fmt.Sprintf(`{"id":"evt_wrap_%08d","pad":"%s"}`, i, strings.Repeat("x", 960))
		bodies = append(bodies, b)
		if code := postBody(t, fl.url, b); code != http.StatusOK {
			t.Fatalf("body %d: HTTP %d", i, code)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) != size {
		t.Errorf("log of %d bytes, want %d", len(data), size)
	}
	if got := readFloorLog(data); !slices.Equal(got, bodies[8:]) {
		t.Errorf("log holds %d bodies, want the last four", len(got))
	}
	sk.expect("evt_big", 1)
	if code := postBody(t, fl.url, `{"id":"evt_big_00000000","pad":"`+strings.Repeat("x", size)+`"}`); code != http.StatusServiceUnavailable {
		t.Errorf("HTTP %d for a body larger than the log, want 503", code)
	}
}
