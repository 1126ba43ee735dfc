package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// relayWorkers is how many requests the relay has in flight to the sink
// (BENCHMARKS.md, Method: the relay's 64 workers).
const relayWorkers = 64

// relay is the non-durable ceiling: it reads the body, answers 200, then
// forwards the body from memory to every destination of the sink with
// relayWorkers workers. It stores nothing, verifies nothing, drops
// duplicates by no key and retries nothing: what a gateway costs when it
// keeps no promise, on the same loopback, client and sink.
type relay struct {
	srv    *http.Server
	url    string
	client *http.Client
	jobs   chan relayJob
	stop   chan struct{} // closed by close: handlers and workers give up
	// commit, when set, makes a body durable before the answer (the
	// durable floor); an error answers 503.
	commit func(ctx context.Context, body []byte) error
	wg     sync.WaitGroup
}

type relayJob struct {
	url  string // the sink's destination path
	id   string
	body []byte
}

// newRelay listens on 127.0.0.1:0 and forwards to sinkURL/d0 … d(dests-1).
// queue bounds the jobs held in memory (beyond it, answers wait). commit,
// when not nil, makes each body durable before it is answered.
func newRelay(sinkURL string, dests, queue int, commit func(context.Context, []byte) error) (*relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &relay{
		url:    "http://" + ln.Addr().String(),
		jobs:   make(chan relayJob, max(queue, 1)),
		stop:   make(chan struct{}),
		commit: commit,
		client: &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
			MaxIdleConns: relayWorkers, MaxIdleConnsPerHost: relayWorkers, IdleConnTimeout: 90 * time.Second, DisableCompression: true,
		}},
	}
	urls := make([]string, dests)
	for d := range urls {
		urls[d] = sinkURL + "/d" + strconv.Itoa(d)
	}
	r.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(io.LimitReader(req.Body, 64<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if r.commit != nil {
			if err := r.commit(req.Context(), body); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, `{"status":"accepted"}`+"\n")
		id := jsonID(body)
		for _, u := range urls {
			select {
			case r.jobs <- relayJob{url: u, id: id, body: body}:
			case <-r.stop:
				return
			}
		}
	})}
	for range relayWorkers {
		r.wg.Go(r.forward)
	}
	go r.srv.Serve(ln)
	return r, nil
}

// forward sends jobs to the sink until the relay is closed; a failure is
// dropped (no retries).
func (r *relay) forward() {
	for {
		var j relayJob
		select {
		case j = <-r.jobs:
		case <-r.stop:
			return
		}
		req, err := http.NewRequest(http.MethodPost, j.url, bytes.NewReader(j.body))
		if err != nil {
			continue
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-AnyHook-Event-Id", j.id)
		resp, err := r.client.Do(req)
		if err != nil {
			continue
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}

// close stops the server and the workers; what is still queued is
// dropped (the bench closes it after every delivery arrived).
func (r *relay) close(ctx context.Context) error {
	err := r.srv.Shutdown(ctx)
	if err != nil {
		r.srv.Close()
		err = fmt.Errorf("relay: %w", err)
	}
	close(r.stop)
	r.wg.Wait()
	r.client.CloseIdleConnections()
	return err
}

// jsonID is the value of the body's "id" field when it is a string, found
// by a byte search (the bench's bodies are flat enough): the relay's
// whole parsing, so that the sink can tally its deliveries.
func jsonID(body []byte) string {
	const key = `"id":"`
	i := bytes.Index(body, []byte(key))
	if i < 0 {
		return ""
	}
	rest := body[i+len(key):]
	j := bytes.IndexByte(rest, '"')
	if j < 0 {
		return ""
	}
	return string(rest[:j])
}
