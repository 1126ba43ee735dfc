// Package send implements `anyhook send`: build an event (a realistic
// built-in sample per provider, or a file), sign it exactly as the provider
// would, and POST it, possibly many times and concurrently, to test AnyHook
// or any other receiver.
//
// The same event id goes into every one of --times requests, so
// --times N reproduces a provider's duplicate deliveries; each request is
// signed afresh, as providers re-sign their retries. --object and --version
// set the ordering fields, to reproduce out-of-order events.
//
// Exit status: 0 when every request got a 2xx, 1 otherwise, 2 for bad flags.
package send

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anyhook/anyhook/internal/cli"
	"github.com/anyhook/anyhook/internal/provider"
)

const usage = `usage: anyhook send --provider P --secret S --url URL [flags]

Signs and sends an event exactly as provider P would.

  --provider P        one of: %s
  --secret S          the source's secret (generic: only with --signature-header)
  --url URL           where to POST, e.g. http://127.0.0.1:8080/webhooks/stripe;
                      Twilio, HubSpot and Square sign it: it must equal the
                      source's public_url
  --type T            the built-in sample of event type T, so that a filter
                      can be tried on it (default: the provider's first below;
                      generic and standard take any T, written as the body's
                      type):
%s
  --body FILE         send FILE's bytes instead of the built-in sample
                      (--event-id then only sets id headers)
  --event-id ID       the provider's event id (default: a new random one, the
                      same for all --times requests)
  --times N           send N times (default 1): N deliveries of one event
  --concurrency C     at most C requests in flight (default 1)
  --object O          ordering: the object id in the sample
  --version V         ordering: the object's version in the sample
  --header K=V        an extra request header; repeatable
  --timeout D         per-request timeout (default 30s)
  --cacert FILE       trust the CA certificates in the PEM FILE (instead of
                      the system's) for an https:// --url: a gateway with a
                      certificate of a private CA
  --skew D            sign as if the clock were off by D (e.g. -10m), to
                      try a receiver's timestamp tolerance
  generic only: --signature-header H [--algorithm sha1|sha256|sha512]
                [--encoding hex|base64] [--prefix P]; no header = unsigned
`

// options are the parsed flags.
type options struct {
	provider, secret, url, bodyFile, eventID, object, version string
	typ, cacert                                               string
	roots                                                     *x509.CertPool // from --cacert
	times, concurrency                                        int
	headers                                                   http.Header
	timeout, skew                                             time.Duration
	sig                                                       provider.Signature
}

// headerFlags collects repeated --header K=V (or "K: V") values.
type headerFlags http.Header

func (h headerFlags) String() string { return "" }

func (h headerFlags) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if c, cv, cok := strings.Cut(s, ":"); cok && (!ok || len(c) < len(k)) {
		k, v, ok = c, strings.TrimSpace(cv), true
	}
	k = strings.TrimSpace(k)
	if !ok || k == "" || strings.ContainsAny(k, " \t\r\n") {
		return fmt.Errorf("want K=V, got %q", s)
	}
	http.Header(h).Add(k, v)
	return nil
}

// Main runs `anyhook send` with args (without the command names).
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	opts, err := parse(args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(stdout, usage, strings.Join(provider.Names(), ", "), typesHelp())
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "anyhook send: %v\n", err)
		return 2
	}
	body, header, err := opts.event(time.Now())
	if err != nil {
		fmt.Fprintf(stderr, "anyhook send: %v\n", err)
		return 2
	}
	if _, err := opts.sign(body, header); err != nil {
		fmt.Fprintf(stderr, "anyhook send: cannot sign the body: %v\n", err)
		return 2
	}
	res := opts.run(ctx, body, header)
	res.print(stdout)
	if res.ok == opts.times {
		return 0
	}
	return 1
}

func parse(args []string) (*options, error) {
	o := &options{headers: http.Header{}}
	fs := cli.NewFlagSet("send")
	fs.StringVar(&o.provider, "provider", "", "")
	fs.StringVar(&o.secret, "secret", "", "")
	fs.StringVar(&o.url, "url", "", "")
	fs.StringVar(&o.bodyFile, "body", "", "")
	fs.StringVar(&o.typ, "type", "", "")
	fs.StringVar(&o.cacert, "cacert", "", "")
	fs.StringVar(&o.eventID, "event-id", "", "")
	fs.StringVar(&o.object, "object", "", "")
	fs.StringVar(&o.version, "version", "", "")
	fs.IntVar(&o.times, "times", 1, "")
	fs.IntVar(&o.concurrency, "concurrency", 1, "")
	fs.DurationVar(&o.timeout, "timeout", 30*time.Second, "")
	fs.DurationVar(&o.skew, "skew", 0, "")
	fs.Var(headerFlags(o.headers), "header", "")
	fs.StringVar(&o.sig.Header, "signature-header", "", "")
	fs.StringVar(&o.sig.Algorithm, "algorithm", "", "")
	fs.StringVar(&o.sig.Encoding, "encoding", "", "")
	fs.StringVar(&o.sig.Prefix, "prefix", "", "")
	if err := cli.Parse(fs, args); err != nil {
		return nil, err
	}
	known := strings.Join(provider.Names(), ", ")
	switch {
	case o.provider == "":
		return nil, fmt.Errorf("--provider is required (one of: %s)", known)
	case samples[o.provider].build == nil:
		return nil, fmt.Errorf("--provider: unknown provider %q (one of: %s)", o.provider, known)
	case o.url == "":
		return nil, errors.New("--url is required")
	case o.times < 1:
		return nil, errors.New("--times must be at least 1")
	case o.concurrency < 1:
		return nil, errors.New("--concurrency must be at least 1")
	case o.timeout <= 0:
		return nil, errors.New("--timeout must be positive")
	}
	if u, err := url.Parse(o.url); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--url: want an http or https URL, got %q", o.url)
	}
	if o.typ != "" {
		t, ok := pickType(o.provider, o.typ)
		switch {
		case ok:
			o.typ = t
		case len(eventTypes(o.provider)) == 0:
			return nil, fmt.Errorf("--type: %s events carry no type", o.provider)
		default:
			msg := fmt.Sprintf("--type: %s has no sample of type %q", o.provider, o.typ)
			if s := cli.Suggest(o.typ, eventTypes(o.provider)); s != "" {
				msg += fmt.Sprintf(" (did you mean %s?)", s)
			}
			return nil, fmt.Errorf("%s; its types: %s", msg, strings.Join(eventTypes(o.provider), ", "))
		}
	}
	if o.cacert != "" {
		pem, err := os.ReadFile(o.cacert)
		if err != nil {
			return nil, fmt.Errorf("--cacert: %v", err)
		}
		o.roots = x509.NewCertPool()
		if !o.roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--cacert: %s holds no PEM certificate", o.cacert)
		}
	}
	if o.provider == "generic" {
		o.sig.None = o.sig.Header == ""
		if o.sig.None && o.secret != "" {
			return nil, errors.New("--secret: generic needs --signature-header to sign with it")
		}
		if !o.sig.None && o.secret == "" {
			return nil, errors.New("--secret is required with --signature-header")
		}
		if !o.sig.None {
			if err := provider.SignGeneric(o.sig, o.secret, &provider.Request{}); err != nil {
				msg := strings.TrimPrefix(err.Error(), "signature.") // "header: …", "algorithm: …"
				if strings.HasPrefix(msg, "header:") {
					msg = "signature-" + msg
				}
				return nil, errors.New("--" + msg)
			}
		}
	} else {
		if o.secret == "" {
			return nil, errors.New("--secret is required")
		}
		if o.sig != (provider.Signature{}) {
			return nil, errors.New("--signature-header, --algorithm, --encoding and --prefix are for --provider generic")
		}
		if err := provider.Sign(o.provider, o.secret, &provider.Request{URL: o.url}, time.Now()); err != nil {
			return nil, fmt.Errorf("--secret: %v", err)
		}
	}
	return o, nil
}

// event builds the body and headers to send.
func (o *options) event(now time.Time) ([]byte, http.Header, error) {
	s := samples[o.provider]
	p := params{ID: o.eventID, Object: o.object, Version: o.version, Type: s.typ, Now: now,
		run: token(32), hook: digits(9), subA: digits(7), subB: digits(7)}
	build, object := s.build, s.object
	switch v, ok := variants(o.provider)[o.typ]; {
	case ok:
		build = v.build
		if v.object != nil && object != nil {
			object = v.object
		}
	case s.anyType && o.typ != "":
		p.Type = o.typ
	}
	if s.object == nil && (p.Object != "" || p.Version != "") {
		return nil, nil, fmt.Errorf("--object/--version: %s events carry no ordering fields", o.provider)
	}
	if p.ID == "" {
		p.ID = s.id(now)
	}
	if s.object != nil {
		if p.Object == "" {
			p.Object = object(now)
		}
		if p.Version == "" {
			p.Version = s.version(now)
		}
	}
	for _, c := range []struct{ flag, kind, v string }{{"event-id", s.idKind, p.ID}, {"object", s.objectKind, p.Object}, {"version", s.versionKind, p.Version}} {
		if _, err := strconv.ParseUint(c.v, 10, 63); c.kind == "int" && o.bodyFile == "" && err != nil {
			return nil, nil, fmt.Errorf("--%s: %s needs a non-negative integer, got %q", c.flag, o.provider, c.v)
		}
	}
	body, h := build(p)
	if o.bodyFile != "" {
		b, err := os.ReadFile(o.bodyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--body: %v", err)
		}
		body = b
	}
	if h == nil {
		h = http.Header{}
	}
	h.Set("Content-Type", s.contentType)
	for k, vs := range o.headers {
		h[http.CanonicalHeaderKey(k)] = vs
	}
	return body, h, nil
}

// typesHelp lists, for the usage, the event types --type picks, by
// provider.
func typesHelp() string {
	var b strings.Builder
	for _, name := range provider.Names() {
		ts := eventTypes(name)
		switch {
		case len(ts) == 0:
			continue
		case samples[name].anyType:
			fmt.Fprintf(&b, "                        %s: any (default %s)\n", name, ts[0])
		default:
			fmt.Fprintf(&b, "                        %s: %s\n", name, strings.Join(ts, ", "))
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// result tallies the responses.
type result struct {
	mu       sync.Mutex
	kinds    []string       // distinct response kinds, first seen first
	count    map[string]int // by kind
	byStatus map[int]int
	errors   int
	ok       int
	sent     int
	took     time.Duration
}

func (o *options) run(ctx context.Context, body []byte, header http.Header) *result {
	client := &http.Client{
		Timeout: o.timeout,
		Transport: &http.Transport{
			Proxy:               http.ProxyFromEnvironment,
			MaxIdleConnsPerHost: o.concurrency,
			IdleConnTimeout:     30 * time.Second,
			TLSClientConfig:     &tls.Config{RootCAs: o.roots}, // nil: the system's
		},
		// Providers do not follow redirects: report them.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	defer client.CloseIdleConnections()

	res := &result{count: map[string]int{}, byStatus: map[int]int{}}
	start := time.Now()
	jobs := make(chan struct{})
	var wg sync.WaitGroup
	for range min(o.concurrency, o.times) {
		wg.Go(func() {
			for range jobs {
				status, kind := o.send(ctx, client, body, header)
				res.add(status, kind)
			}
		})
	}
feed:
	for range o.times {
		select {
		case jobs <- struct{}{}:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	res.took = time.Since(start)
	return res
}

// send signs and POSTs one request; status is 0 when no response came.
func (o *options) send(ctx context.Context, client *http.Client, body []byte, header http.Header) (int, string) {
	r, err := o.sign(body, header)
	if err != nil {
		return 0, "error: signing: " + err.Error()
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, r.URL, bytes.NewReader(body))
	if err != nil {
		return 0, "error: " + err.Error()
	}
	req.Header = r.Header
	if host := r.Header.Get("Host"); host != "" {
		req.Host = host
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "error: " + err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)) // reuse the connection
	return resp.StatusCode, kind(b)
}

// sign builds a request signed now, as the provider would sign it.
func (o *options) sign(body []byte, header http.Header) (*provider.Request, error) {
	r := &provider.Request{Method: http.MethodPost, URL: o.url, Header: header.Clone(), Body: body}
	if o.provider == "generic" {
		return r, provider.SignGeneric(o.sig, o.secret, r)
	}
	return r, provider.Sign(o.provider, o.secret, r, time.Now().Add(o.skew))
}

// kind summarizes a response body: AnyHook's {"status": …} or {"error": …},
// else its first line.
func kind(body []byte) string {
	var v struct {
		Status string `json:"status"`
		Error  string `json:"error"`
	}
	if json.Unmarshal(body, &v) == nil {
		switch {
		case v.Status != "":
			return v.Status
		case v.Error != "":
			return "error: " + v.Error
		}
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(body)), "\n")
	if len(line) > 80 {
		line = line[:77] + "..."
	}
	if line == "" {
		return "(empty body)"
	}
	return line
}

func (r *result) add(status int, kind string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sent++
	line := kind
	if status != 0 {
		line = strconv.Itoa(status) + " " + kind
		r.byStatus[status]++
		if status >= 200 && status < 300 {
			r.ok++
		}
	} else {
		r.errors++
	}
	if r.count[line] == 0 {
		r.kinds = append(r.kinds, line)
	}
	r.count[line]++
}

// print writes one line per distinct response, then the summary.
func (r *result) print(w io.Writer) {
	for _, k := range r.kinds {
		fmt.Fprintf(w, "%6d × %s\n", r.count[k], k)
	}
	codes := make([]int, 0, len(r.byStatus))
	for c := range r.byStatus {
		codes = append(codes, c)
	}
	slices.Sort(codes)
	var parts []string
	for _, c := range codes {
		parts = append(parts, fmt.Sprintf("%d: %d", c, r.byStatus[c]))
	}
	if len(parts) == 0 {
		parts = []string{"no responses"}
	}
	// "not accepted" counts refusals too: a 400 is not "no errors".
	fmt.Fprintf(w, "sent %d in %s (%s); not accepted: %d, of them with no answer: %d\n",
		r.sent, r.took.Round(time.Millisecond), strings.Join(parts, ", "), r.sent-r.ok, r.errors)
}
