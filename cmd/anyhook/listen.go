package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

const listenUsage = `usage: anyhook listen --gateway URL --destination NAME --forward URL [--token TOKEN]
                      [--replay EVENT] [--since DURATION] [--lease D] [--max N]

Forwards a pull destination's deliveries to a local handler: leases them
from the gateway's pull API (long polling), sends each to --forward with
the headers a push delivery carries (the webhook-* signature too, so the
handler's check passes), acks a 2xx and nacks anything else (it is retried
by the destination's backoff). One line per delivery: time, event type,
event id, status, duration. A network drop is retried; a delivery whose
ack was lost is delivered again (X-AnyHook-Delivery is the same: dedupe
on it). --replay EVENT first replays one recorded event to the
destination, --since 1h what it received in the last hour (marked as
replays). The token (--token, or ANYHOOK_TOKEN) needs the scope
pull:<destination>. docs/pull.md.`

// listenOptions are listen's flags.
type listenOptions struct {
	gateway, dest, forward, token, replay string
	since, lease                          time.Duration
	max                                   int
}

func listen(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlags("listen")
	var o listenOptions
	fs.StringVar(&o.gateway, "gateway", "", "the gateway's admin `URL`, e.g. https://hooks.example.com")
	fs.StringVar(&o.dest, "destination", "", "the pull destination's `name`")
	fs.StringVar(&o.forward, "forward", "", "the local handler's `URL`, e.g. http://localhost:3000/webhooks")
	fs.StringVar(&o.token, "token", "", "an API `token` with the scope pull:<destination> (default $ANYHOOK_TOKEN)")
	fs.StringVar(&o.replay, "replay", "", "first replay this recorded `event` (an id) to the destination")
	fs.DurationVar(&o.since, "since", 0, "first replay what the destination received in this `duration`, e.g. 1h")
	fs.DurationVar(&o.lease, "lease", 30*time.Second, "how long each delivery is held; its forward gets what is left of it")
	fs.IntVar(&o.max, "max", 10, "deliveries per lease request (1..100)")
	if code := parse(fs, args, stdout, stderr, listenUsage); code >= 0 {
		return code
	}
	if o.token == "" {
		o.token = os.Getenv("ANYHOOK_TOKEN")
	}
	for _, f := range []struct{ name, v string }{{"--gateway", o.gateway}, {"--destination", o.dest}, {"--forward", o.forward}} {
		if f.v == "" {
			return fail(stderr, exitUsage, fmt.Errorf("listen: %s is required\n\n%s", f.name, listenUsage))
		}
	}
	for _, f := range []struct{ name, v string }{{"--gateway", o.gateway}, {"--forward", o.forward}} {
		if u, err := url.Parse(f.v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fail(stderr, exitUsage, fmt.Errorf("listen: %s %q is not an http(s) URL", f.name, f.v))
		}
	}
	if o.max < 1 || o.max > 100 || o.lease < time.Second || o.lease > time.Hour || o.since < 0 {
		return fail(stderr, exitUsage, errors.New("listen: --max is 1..100, --lease 1s..1h, --since positive"))
	}
	l := &listener{o: o, out: stdout, errw: stderr, api: &http.Client{Timeout: 90 * time.Second}, streamer: &http.Client{}, fwd: &http.Client{
		// A redirect from the local handler is its answer, not a place to
		// send the event (and its signature) to.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
	if err := l.replays(ctx); err != nil {
		return fail(stderr, exitUsage, fmt.Errorf("listen: %w", err))
	}
	fmt.Fprintf(stderr, "listening: %s on %s → %s (Ctrl-C to stop)\n", o.dest, o.gateway, o.forward)
	if err := l.run(ctx); err != nil && ctx.Err() == nil {
		return fail(stderr, exitUsage, fmt.Errorf("listen: %w", err))
	}
	return exitOK
}

type listener struct {
	o         listenOptions
	out, errw io.Writer
	// api has a timeout, streamer none (it stays open), fwd follows no
	// redirect.
	api, streamer, fwd *http.Client
}

// errFatal marks an answer that retrying will not change (a bad token, an
// unknown destination).
type errFatal struct{ error }

// call POSTs body to the pull API's path and decodes a JSON answer into
// out (when not nil).
func (l *listener) call(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	u := strings.TrimRight(l.o.gateway, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if l.o.token != "" {
		req.Header.Set("Authorization", "Bearer "+l.o.token)
	}
	resp, err := l.api.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode >= 300 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		msg := strings.TrimSpace(string(data))
		if json.Unmarshal(data, &e) == nil && e.Error.Message != "" {
			msg = e.Error.Code + ": " + e.Error.Message
		}
		err := fmt.Errorf("%s: %d %s%s", path, resp.StatusCode, msg, statusHint(resp.StatusCode))
		switch resp.StatusCode {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusBadRequest:
			return errFatal{err}
		}
		return err
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

// statusHint says what to do about a refusal of the gateway's.
func statusHint(code int) string {
	switch code {
	case http.StatusUnauthorized:
		return " (pass a token with --token, or set ANYHOOK_TOKEN)"
	case http.StatusForbidden:
		return " (the token needs the scope pull:<destination>; check --destination)"
	case http.StatusNotFound:
		return " (is --destination a pull destination of this gateway, and --gateway its admin URL?)"
	}
	return ""
}

// replays asks for --replay and --since before listening.
func (l *listener) replays(ctx context.Context) error {
	if l.o.replay != "" {
		if err := l.call(ctx, "/api/events/"+url.PathEscape(l.o.replay)+"/replay", map[string]any{"destination": l.o.dest, "reason": "anyhook listen --replay"}, nil); err != nil {
			return err
		}
		fmt.Fprintf(l.errw, "replayed event %s to %s\n", l.o.replay, l.o.dest)
	}
	if l.o.since > 0 {
		var res struct {
			Count int `json:"count"`
		}
		if err := l.call(ctx, "/api/replay", map[string]any{"destination": l.o.dest, "since": l.o.since.String(), "force": true,
			"reason": "anyhook listen --since " + l.o.since.String()}, &res); err != nil {
			return err
		}
		fmt.Fprintf(l.errw, "replayed %d deliveries of the last %s to %s\n", res.Count, l.o.since, l.o.dest)
	}
	return nil
}

type leased struct {
	LeaseID          string              `json:"lease_id"`
	EventID          string              `json:"event_id"`
	Attempt          int                 `json:"attempt"`
	Replay           bool                `json:"replay"`
	LeaseRemainingMS int64               `json:"lease_remaining_ms"`
	Headers          map[string][]string `json:"headers"`
	Body             string              `json:"body"`
	BodyEncoding     string              `json:"body_encoding"`
}

// run leases and forwards until ctx ends: from the streaming lease, or
// by polling where the gateway has none. A failed request (the network,
// the gateway restarting) is tried again with a growing pause; one that
// cannot succeed ends it.
func (l *listener) run(ctx context.Context) error {
	pause := time.Duration(0)
	retry := func(err error) {
		pause = min(max(2*pause, time.Second), 30*time.Second)
		fmt.Fprintf(l.errw, "connection lost (%v); again in %s\n", err, pause)
		select {
		case <-time.After(pause):
		case <-ctx.Done():
		}
	}
	for ctx.Err() == nil {
		got, err := l.stream(ctx)
		var fatal errFatal
		switch {
		case errors.Is(err, errNoStream):
			return l.poll(ctx)
		case errors.As(err, &fatal):
			return err
		case ctx.Err() != nil:
		case err != nil:
			if got {
				pause = 0
			}
			retry(err)
		}
	}
	return ctx.Err()
}

// errNoStream: the gateway has no streaming lease (an older version).
var errNoStream = errors.New("no streaming lease")

// stream reads the streaming lease and forwards each delivery, one at a
// time, until the stream ends; got says whether one was read.
func (l *listener) stream(ctx context.Context) (got bool, err error) {
	u := strings.TrimRight(l.o.gateway, "/") + "/api/destinations/" + url.PathEscape(l.o.dest) +
		"/stream?max_in_flight=1&lease=" + url.QueryEscape(l.o.lease.String())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false, err
	}
	if l.o.token != "" {
		req.Header.Set("Authorization", "Bearer "+l.o.token)
	}
	resp, err := l.streamer.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		if resp.StatusCode == http.StatusNotFound && strings.Contains(string(data), "unknown_endpoint") ||
			resp.StatusCode == http.StatusMethodNotAllowed {
			return false, errNoStream
		}
		err := fmt.Errorf("stream: %d %s%s", resp.StatusCode, strings.TrimSpace(string(data)), statusHint(resp.StatusCode))
		if resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests {
			return false, errFatal{err}
		}
		return false, err
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 128<<20) // a delivery's body can be large
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if len(data) == 0 {
				continue
			}
			var d leased
			if err := json.Unmarshal([]byte(strings.Join(data, "\n")), &d); err != nil {
				return got, fmt.Errorf("stream: %w", err)
			}
			data = data[:0]
			got = true
			l.deliver(ctx, d)
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
	}
	if err := sc.Err(); err != nil {
		return got, err
	}
	return got, errors.New("the gateway closed the stream")
}

// poll leases by long polling, for a gateway without the stream.
func (l *listener) poll(ctx context.Context) error {
	pause := time.Duration(0)
	for ctx.Err() == nil {
		var res struct {
			Deliveries []leased `json:"deliveries"`
		}
		err := l.call(ctx, "/api/destinations/"+url.PathEscape(l.o.dest)+"/lease",
			map[string]any{"max": l.o.max, "wait": "20s", "lease": l.o.lease.String()}, &res)
		var fatal errFatal
		switch {
		case errors.As(err, &fatal):
			return err
		case err != nil:
			pause = min(max(2*pause, time.Second), 30*time.Second)
			fmt.Fprintf(l.errw, "lease failed (%v); again in %s\n", err, pause)
			select {
			case <-time.After(pause):
			case <-ctx.Done():
			}
			continue
		}
		pause = 0
		got := time.Now()
		for _, d := range res.Deliveries {
			// What is left of the lease now, after the forwards before it.
			d.LeaseRemainingMS -= time.Since(got).Milliseconds()
			l.deliver(ctx, d)
		}
	}
	return ctx.Err()
}

// forwardMargin is kept of each lease for the ack: a forward ends that
// much before the lease does (a fifth of a shorter lease).
const forwardMargin = 2 * time.Second

// deliver forwards d and acks or nacks it.
func (l *listener) deliver(ctx context.Context, d leased) {
	started := time.Now()
	status, err := l.forwardOne(ctx, d, time.Duration(d.LeaseRemainingMS)*time.Millisecond-min(forwardMargin, l.o.lease/5))
	took := time.Since(started)
	if err != nil && ctx.Err() != nil {
		// Stopped (Ctrl-C) mid-forward: no nack, which would spend an
		// attempt; the lease runs out and the delivery comes again.
		fmt.Fprintf(l.errw, "stopped while forwarding %s: it is delivered again after its lease\n", d.EventID)
		return
	}
	typ := "-"
	if v := d.Headers["X-Anyhook-Event-Type"]; len(v) > 0 {
		typ = v[0]
	}
	result := fmt.Sprint(status)
	path, body := "/ack", map[string]any{"lease_id": d.LeaseID}
	if err != nil || status < 200 || status > 299 {
		path = "/nack"
		reason := fmt.Sprintf("the local handler answered %d", status)
		if err != nil {
			reason, result = "forward failed: "+err.Error(), "error"
		}
		body["reason"] = clipText(reason, 500)
	}
	replay := ""
	if d.Replay {
		replay = "  replay"
	}
	fmt.Fprintf(l.out, "%s  %-28s %s  attempt %d%s  %s  %s\n", started.Format("15:04:05"), typ, d.EventID, d.Attempt, replay, result, took.Round(time.Millisecond))
	if err != nil {
		fmt.Fprintf(l.errw, "  %v\n", err)
	}
	// The ack outlives a Ctrl-C that came during the forward: the handler
	// has answered, and a lost ack only means a second delivery.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := l.call(actx, "/api/destinations/"+url.PathEscape(l.o.dest)+path, body, nil); err != nil {
		fmt.Fprintf(l.errw, "  %s of %s failed: %v (it is delivered again after its lease)\n", path[1:], d.EventID, err)
	}
}

func clipText(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// hopHeaders are not forwarded: they describe the gateway's connection,
// not the event.
var hopHeaders = []string{"Connection", "Content-Length", "Host", "Keep-Alive", "Proxy-Connection", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forwardOne POSTs d to the local handler within budget and returns its
// status.
func (l *listener) forwardOne(ctx context.Context, d leased, budget time.Duration) (int, error) {
	if budget <= 0 {
		return 0, errors.New("too little of the lease is left to forward it")
	}
	body := []byte(d.Body)
	if d.BodyEncoding == "base64" {
		b, err := base64.StdEncoding.DecodeString(d.Body)
		if err != nil {
			return 0, fmt.Errorf("the gateway's body: %w", err)
		}
		body = b
	}
	fctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	req, err := http.NewRequestWithContext(fctx, http.MethodPost, l.o.forward, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	for k, vs := range d.Headers {
		req.Header[http.CanonicalHeaderKey(k)] = vs
	}
	for _, k := range hopHeaders {
		req.Header.Del(k)
	}
	resp, err := l.fwd.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp.StatusCode, nil
}
