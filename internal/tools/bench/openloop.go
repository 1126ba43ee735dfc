package bench

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// An open-loop run sends requests on a fixed schedule, as providers do,
// whether or not earlier ones were answered: a closed loop (each client
// waits for its answer before it sends again) sends less while the server
// stalls, and so hides the stall from its own figures (coordinated
// omission). Each latency is measured from when the request was due to be
// sent, not from when it was sent.

// clientTimeout is how long a provider waits for an answer (GitHub's 10
// s; Slack's 3 s and Shopify's 5 s are shorter).
const clientTimeout = 10 * time.Second

// parseRate reads --ingest-rate: requests per second, or a percentage of
// the capacity measured closed-loop in the same run ("50%").
func parseRate(s string) (rate, share float64, err error) {
	if s == "" {
		return 0, 0, nil
	}
	if v, ok := strings.CutSuffix(s, "%"); ok {
		share, err = strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || share <= 0 || share > 1000 {
			return 0, 0, fmt.Errorf("--ingest-rate %q: want requests per second or a share of capacity such as 50%%", s)
		}
		return 0, share / 100, nil
	}
	rate, err = strconv.ParseFloat(s, 64)
	if err != nil || rate <= 0 {
		return 0, 0, fmt.Errorf("--ingest-rate %q: want requests per second or a share of capacity such as 50%%", s)
	}
	return rate, 0, nil
}

// OpenLoop is what an open-loop run measured.
type OpenLoop struct {
	Rate        float64 `json:"rate"`         // requests per second, as scheduled
	CapacityPct float64 `json:"capacity_pct"` // Rate over the gateway's closed-loop capacity, % (the floor's run too)
	Seconds     float64 `json:"seconds"`
	Sent        int     `json:"sent"`
	Accepted    int     `json:"accepted"` // 200 answers
	Shed        int     `json:"shed"`     // 503 answers with Retry-After
	Failed      int     `json:"failed"`   // other answers
	TimedOut    int     `json:"timed_out"`
	Errors      int     `json:"errors"` // transport errors
	FirstError  string  `json:"first_error,omitempty"`
	// Latency of the accepted requests from when each was due, ms.
	P50MS  float64 `json:"p50_ms"`
	P90MS  float64 `json:"p90_ms"`
	P99MS  float64 `json:"p99_ms"`
	P999MS float64 `json:"p99_9_ms"`
	MaxMS  float64 `json:"max_ms"`
	// ShedP99MS is how fast the shed ones were refused.
	ShedP99MS float64 `json:"shed_p99_ms,omitempty"`
	// LagP99MS and LagMaxMS: how late the client sent the requests
	// (from when each was due to when it was handed to the transport),
	// which the latencies include; ConnP99MS: how long a request then
	// waited for its connection (a new one waits for the server's
	// accept), p99.
	LagP99MS  float64 `json:"client_lag_p99_ms"`
	LagMaxMS  float64 `json:"client_lag_max_ms"`
	ConnP99MS float64 `json:"conn_wait_p99_ms"`
	// LongestStallMS is the longest time in which no answer came back
	// while a request was outstanding; StallAtS when it began, seconds
	// into the run.
	LongestStallMS float64 `json:"longest_stall_ms"`
	StallAtS       float64 `json:"stall_at_s"`
	// Delivered is how many of the accepted events reached the sink.
	Delivered int `json:"delivered"`
	// ServerCPUPerEventUS is the server's process's CPU (user + system),
	// the gateway's or the floor's, from the first request until the last
	// delivery, per accepted event.
	ServerCPUPerEventUS float64 `json:"server_cpu_us_per_event"`
}

// sent is one request of an open-loop run.
type sent struct {
	due, done  time.Duration // since the run's start
	sent, conn time.Duration // when the client sent it; when it had a connection
	code       int
	retry      bool // Retry-After was set
	err        error
}

// openLoop sends reqs to urls (the i-th to urls[i%len(urls)]) at rate per second and waits for every
// answer (at most clientTimeout each).
func openLoop(ctx context.Context, urls []string, reqs []request, rate float64) ([]sent, time.Duration) {
	// One connection per request in flight, as many providers' senders
	// are: the schedule must never wait for a free connection.
	tr := &http.Transport{
		DialContext:         (&net.Dialer{Timeout: clientTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 4096,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: clientTimeout}
	out := make([]sent, len(reqs))
	interval := time.Duration(float64(time.Second) / rate)
	var wg sync.WaitGroup
	start := time.Now()
	for i := range reqs {
		due := time.Duration(i) * interval
		if d := time.Until(start.Add(due)); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				wg.Wait()
				return out[:i], time.Since(start)
			}
		}
		wg.Go(func() {
			rq := &reqs[i]
			s := &out[i]
			s.due = due
			s.sent = time.Since(start)
			tctx := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(httptrace.GotConnInfo) { s.conn = time.Since(start) }})
			req, err := http.NewRequestWithContext(tctx, http.MethodPost, urls[i%len(urls)], bytes.NewReader(rq.body))
			if err == nil {
				req.Header = rq.header
				var resp *http.Response
				if resp, err = client.Do(req); err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					s.code, s.retry = resp.StatusCode, resp.Header.Get("Retry-After") != ""
				}
			}
			s.err = err
			s.done = time.Since(start)
		})
	}
	wg.Wait()
	return out, time.Since(start)
}

// summarize turns an open-loop run's requests into its figures.
func summarize(rs []sent, elapsed time.Duration) *OpenLoop {
	ol := &OpenLoop{Sent: len(rs), Seconds: elapsed.Seconds()}
	var ok, shed, lag, conn []time.Duration
	for _, s := range rs {
		lat := s.done - s.due
		lag = append(lag, s.sent-s.due)
		if s.conn > 0 {
			conn = append(conn, s.conn-s.sent)
		}
		switch {
		case s.err != nil:
			ol.Errors++
			if ne, isNet := s.err.(net.Error); isNet && ne.Timeout() || strings.Contains(s.err.Error(), "Client.Timeout") {
				ol.TimedOut++
			}
			if ol.FirstError == "" {
				ol.FirstError = s.err.Error()
			}
		case s.code == http.StatusOK:
			ol.Accepted++
			ok = append(ok, lat)
		case s.code == http.StatusServiceUnavailable && s.retry:
			ol.Shed++
			shed = append(shed, lat)
		default:
			ol.Failed++
			if ol.FirstError == "" {
				ol.FirstError = fmt.Sprintf("HTTP %d", s.code)
			}
		}
	}
	slices.Sort(ok)
	slices.Sort(shed)
	ol.P50MS, ol.P90MS, ol.P99MS = ms(percentile(ok, 50)), ms(percentile(ok, 90)), ms(percentile(ok, 99))
	ol.P999MS = ms(percentile(ok, 99.9))
	if len(ok) > 0 {
		ol.MaxMS = ms(ok[len(ok)-1])
	}
	if len(shed) > 0 {
		ol.ShedP99MS = ms(percentile(shed, 99))
	}
	slices.Sort(lag)
	slices.Sort(conn)
	ol.LagP99MS, ol.ConnP99MS = ms(percentile(lag, 99)), ms(percentile(conn, 99))
	if len(lag) > 0 {
		ol.LagMaxMS = ms(lag[len(lag)-1])
	}
	stall, at := longestStall(rs)
	ol.LongestStallMS, ol.StallAtS = ms(stall), at.Seconds()
	return ol
}

// longestStall is the longest time in which no answer came back while a
// request was outstanding (due, and not yet answered), and when it began.
func longestStall(rs []sent) (time.Duration, time.Duration) {
	byDone := slices.Clone(rs)
	slices.SortFunc(byDone, func(a, b sent) int { return int(a.done - b.done) })
	// firstDue[k]: the earliest due time among the answers from k on.
	firstDue := make([]time.Duration, len(byDone)+1)
	firstDue[len(byDone)] = 1<<63 - 1
	for k := len(byDone) - 1; k >= 0; k-- {
		firstDue[k] = min(firstDue[k+1], byDone[k].due)
	}
	var longest, at, prev time.Duration
	for k, s := range byDone {
		// Before this answer, since the previous one, something was
		// outstanding from the earliest due of those answered from here.
		from := max(prev, firstDue[k])
		if gap := s.done - from; gap > longest {
			longest, at = gap, from
		}
		prev = s.done
	}
	return longest, at
}

// runOpenLoop sends events at the --ingest-rate (capacity is what the
// closed-loop run took and delivered, in events per second) for --duration, then
// waits until every accepted event reached every destination.
func runOpenLoop(ctx context.Context, o *options, urls []string, sk *sink, prefix string, now time.Time, capacity float64, gw gateways, say func(string, ...any)) (*OpenLoop, error) {
	rate := o.ingestRate
	if o.ingestShare > 0 {
		rate = o.ingestShare * capacity
	}
	if rate <= 0 {
		return nil, fmt.Errorf("no capacity measured to take %.0f%% of", 100*o.ingestShare)
	}
	say("open loop: %.0f requests/s for %s (%.0f%% of the %.0f events/s taken and delivered closed-loop)", rate, o.duration, 100*rate/capacity, capacity)
	ol, err := openLoopAt(ctx, o, urls, sk, prefix, now, rate, max(1, int(rate*o.duration.Seconds())), gw, captures{trace: o.trace, cpu: o.openCPUProfile})
	if ol != nil && capacity > 0 {
		ol.CapacityPct = 100 * rate / capacity
	}
	return ol, err
}

// runFloor runs the durable floor (floorCommand) in a process of its own,
// on the gateway's CPUs, and sends it the open loop's schedule after a
// warm-up at the same rate, as the gateway had one.
func runFloor(ctx context.Context, o *options, exe, dir string, sk *sink, prefix string, now time.Time, rate float64, stderr io.Writer, say func(string, ...any)) (*OpenLoop, error) {
	n := max(1, int(rate*o.duration.Seconds()))
	// The log holds two full batches at least.
	size := max(floorLogSize, 2*floorBatch*(int64(o.bodySize)+binary.MaxVarintLen64))
	fl, err := startProcess(ctx, exe, []string{floorCommand, "--sink", sk.url, "--destinations", strconv.Itoa(o.destinations),
		"--dir", dir, "--queue", strconv.Itoa((o.warmup + n) * max(1, o.destinations)), "--log-size", strconv.FormatInt(size, 10)}, o.gatewayCPUs, stderr)
	if err != nil {
		return nil, err
	}
	urls := []string{"http://" + fl.addr + "/"}
	if o.warmup > 0 {
		say("durable floor: warm-up, %d events", o.warmup)
		if _, err := openLoopAt(ctx, o, urls, sk, prefix+"w", now, rate, o.warmup, gateways{fl}, captures{}); err != nil {
			fl.stop(time.Minute)
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	say("durable floor (net/http, group commits synced with fsync, forwarded): %.0f requests/s for %s", rate, o.duration)
	ol, err := openLoopAt(ctx, o, urls, sk, prefix, now, rate, n, gateways{fl}, captures{})
	if err == nil && ol.Accepted < ol.Sent {
		// The floor never sheds: anything else failed a commit or a
		// connection.
		err = fmt.Errorf("%d of %d requests accepted (%s)", ol.Accepted, ol.Sent, ol.FirstError)
	}
	if serr := fl.stop(time.Minute); err == nil && serr != nil {
		err = serr
	}
	return ol, err
}

// openLoopAt sends n events to urls at rate per second, then waits until
// every accepted event reached every destination; procs are the
// processes that serve urls, whose CPU it measures, and trace, when set,
// a runtime trace of procs[0] over the sending.
func openLoopAt(ctx context.Context, o *options, urls []string, sk *sink, prefix string, now time.Time, rate float64, n int, procs gateways, c captures) (*OpenLoop, error) {
	reqs, err := makeRequests(o.provider, prefix, n, 1, o.bodySize, o.randomIDs, secret, now)
	if err != nil {
		return nil, err
	}
	sr := sk.expect(prefix, n)
	cpu0, _, err := procs.usage()
	if err != nil {
		return nil, err
	}
	if err := c.start(procs); err != nil {
		return nil, err
	}
	rs, elapsed := openLoop(ctx, urls, reqs, rate)
	if err := c.stop(procs); err != nil {
		return nil, err
	}
	ol := summarize(rs, elapsed)
	ol.Rate = rate
	want := int64(ol.Accepted * o.destinations)
	deadline := time.Now().Add(o.drainTimeout)
	for sr.count.Load() < want && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	ol.Delivered = int(sr.count.Load())
	cpu1, _, err := procs.usage()
	if err != nil {
		return ol, err
	}
	if ol.Accepted > 0 {
		ol.ServerCPUPerEventUS = float64((cpu1 - cpu0).Microseconds()) / float64(ol.Accepted)
	}
	if o.destinations > 0 && ol.Delivered < int(want) {
		return ol, fmt.Errorf("%d of the %d accepted events' deliveries arrived within %s", ol.Delivered, want, o.drainTimeout)
	}
	if ol.TimedOut > 0 {
		return ol, fmt.Errorf("%d requests timed out (client timeout %s)", ol.TimedOut, clientTimeout)
	}
	return ol, nil
}

// captures are what the first gateway process records over an open
// loop's sending: a runtime trace, a CPU profile (files; "" for none).
type captures struct{ trace, cpu string }

func (c captures) start(procs gateways) error {
	for _, x := range []struct{ flag, path, cmd string }{
		{"--trace", c.trace, "trace"},
		{"--open-cpuprofile", c.cpu, "profile"},
	} {
		if x.path == "" {
			continue
		}
		path, err := filepath.Abs(x.path)
		if err == nil {
			_, err = procs.call(x.cmd + " " + path)
		}
		if err != nil {
			return errors.Join(fmt.Errorf("%s: %w", x.flag, err), c.stop(procs))
		}
	}
	return nil
}

// stop ends both captures; one that is not running is no error.
func (c captures) stop(procs gateways) error {
	var errs []error
	if c.trace != "" {
		if _, err := procs.call("trace-stop"); err != nil {
			errs = append(errs, fmt.Errorf("--trace: %w", err))
		}
	}
	if c.cpu != "" {
		if _, err := procs.call("profile-stop"); err != nil {
			errs = append(errs, fmt.Errorf("--open-cpuprofile: %w", err))
		}
	}
	return errors.Join(errs...)
}
