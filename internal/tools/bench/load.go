package bench

import (
	"bytes"
	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anyhook/anyhook/internal/provider"
)

// request is one pre-built (and for Stripe pre-signed) POST: built before
// the timed loop, so the client's HMAC and JSON work is not counted as the
// server's.
type request struct {
	event  int // index of the event it carries
	body   []byte
	header http.Header
}

// makeBody returns a Stripe-shaped event of about size bytes.
func makeBody(prefix string, i, size int, random bool) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"id":"%s","object":"event","api_version":"2024-06-20","created":%d,"type":"charge.succeeded","livemode":false,"pending_webhooks":1,`+
		`"data":{"object":{"id":"ch_%s_%08d","object":"charge","amount":2000,"currency":"usd","status":"succeeded","paid":true,"metadata":{"pad":"`,
		eventID(prefix, i, random), 1700000000+i, prefix, i)
	const tail = `"}}}}`
	for b.Len() < size-len(tail) {
		b.WriteByte('a' + byte(b.Len()%26))
	}
	b.WriteString(tail)
	return b.Bytes()
}

// eventID is the Stripe event id of event i: prefix_00000042, or with
// random, prefix_<8 hex digits of a hash of i>_00000042, which sorts as
// providers' ids do (Stripe's, GitHub's and Shopify's are random), so
// that an index on them is written at a random place.
func eventID(prefix string, i int, random bool) string {
	if !random {
		return fmt.Sprintf("%s_%08d", prefix, i)
	}
	h := fnv.New32a()
	fmt.Fprintf(h, "%s%d", prefix, i)
	return fmt.Sprintf("%s_%08x_%08d", prefix, h.Sum32(), i)
}

// eventIndex is i of an eventID after its prefix (rest), either kind.
func eventIndex(rest string) (int, error) {
	if _, n, ok := strings.Cut(rest, "_"); ok {
		rest = n
	}
	return strconv.Atoi(rest)
}

// makeRequests builds n events for the provider (stripe: signed; generic:
// unsigned), each repeated copies times back to back (so the copies of one
// event are in flight together).
func makeRequests(prov, prefix string, n, copies, size int, random bool, secret string, now time.Time) ([]request, error) {
	reqs := make([]request, 0, n*copies)
	for i := range n {
		body := makeBody(prefix, i, size, random)
		pr := &provider.Request{Method: http.MethodPost, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
		if prov == "stripe" {
			if err := provider.Sign("stripe", secret, pr, now); err != nil {
				return nil, err
			}
		}
		for range copies {
			reqs = append(reqs, request{event: i, body: body, header: pr.Header})
		}
	}
	return reqs, nil
}

// newClient is the load client: one keep-alive connection per worker.
func newClient(concurrency int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        concurrency,
		MaxIdleConnsPerHost: concurrency,
		MaxConnsPerHost:     concurrency,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}}
}

// loadResult is what one load run measured on the client side.
type loadResult struct {
	Elapsed    time.Duration
	Latencies  []time.Duration // per request, sorted
	OK         int             // 200 answers
	Accepted   int             // answers with status accepted
	Duplicate  int             // answers with status duplicate
	Failed     int             // other answers or transport errors
	FirstError string
	Start      time.Time      // when the first request was sent
	SentAt     []atomic.Int64 // per event: first send, ns after Start
	Taken      []atomic.Bool  // per event: a request carrying it was answered 200
}

// drive sends reqs to urls (the k-th to urls[k%len(urls)]) with
// concurrency workers and waits for all answers.
func drive(ctx context.Context, client *http.Client, urls []string, reqs []request, events, concurrency int) *loadResult {
	res := &loadResult{Latencies: make([]time.Duration, len(reqs)), SentAt: make([]atomic.Int64, events), Taken: make([]atomic.Bool, events)}
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	res.Start = time.Now()
	for range concurrency {
		wg.Go(func() {
			buf := make([]byte, 4096)
			var ok, acc, dup, failed int
			var firstErr string
			for {
				k := int(next.Add(1) - 1)
				if k >= len(reqs) || ctx.Err() != nil {
					break
				}
				rq := &reqs[k]
				t0 := time.Now()
				res.SentAt[rq.event].CompareAndSwap(0, int64(t0.Sub(res.Start))+1)
				code, answer, err := post(ctx, client, urls[k%len(urls)], rq, buf)
				res.Latencies[k] = time.Since(t0)
				switch {
				case err != nil:
					failed++
					if firstErr == "" {
						firstErr = err.Error()
					}
				case code != http.StatusOK:
					failed++
					if firstErr == "" {
						firstErr = fmt.Sprintf("HTTP %d: %s", code, answer)
					}
				default:
					ok++
					res.Taken[rq.event].Store(true)
					switch {
					case bytes.Contains(answer, []byte(`"duplicate"`)):
						dup++
					case bytes.Contains(answer, []byte(`"accepted"`)):
						acc++
					}
				}
			}
			mu.Lock()
			res.OK += ok
			res.Accepted += acc
			res.Duplicate += dup
			res.Failed += failed
			if res.FirstError == "" {
				res.FirstError = firstErr
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	res.Elapsed = time.Since(res.Start)
	slices.Sort(res.Latencies)
	return res
}

// post sends one request and reads the answer into buf.
func post(ctx context.Context, client *http.Client, url string, rq *request, buf []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(rq.body))
	if err != nil {
		return 0, nil, err
	}
	req.Header = rq.header
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	n, _ := io.ReadFull(resp.Body, buf)
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, buf[:n], nil
}

// bareServer is the ceiling: net/http that reads the body and answers 200.
func bareServer() (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", err
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"status":"accepted","id":"0190a0a0-0000-7000-8000-000000000000"}`+"\n")
	}), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return srv, "http://" + ln.Addr().String(), nil
}

// percentile returns the p-th percentile (0..100) of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p / 100)
	return sorted[i]
}
