// Package delivery sends recorded events to destinations. Per destination a
// dispatcher claims due deliveries (the deliveries table is the queue),
// POSTs each with the original body and headers plus the X-AnyHook-*
// headers, and records the outcome fenced by (delivery, attempt). A rescuer
// handles claims whose lease ran out: reclaim or hold, as the destination
// declared.
package delivery

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/broker"
	"github.com/anyhook/anyhook/internal/lifecycle"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/redirect"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/tracing"
	"go.opentelemetry.io/otel/trace"
)

// Store is what the engine needs of the store.
type Store interface {
	Claim(ctx context.Context, destination string, limit int, lease time.Duration) ([]store.Claim, error)
	ClaimInOrder(ctx context.Context, destination string, limit int, lease time.Duration) ([]store.Claim, error)
	Finish(ctx context.Context, outs []store.Outcome) ([]string, error)
	Release(ctx context.Context, rs []store.Release) ([]string, error)
	Renew(ctx context.Context, rs []store.Release, lease time.Duration) ([]string, error)
	Rescue(ctx context.Context, rule func(destination string) (store.StaleRule, bool)) ([]anyhook.Delivery, error)
	ExpirePending(ctx context.Context, destination string, before time.Time, limit int, why string) ([]anyhook.Delivery, error)
	// Event reads an event back with its deliveries: what a failed
	// ingest's claims are recovered from (claimer.recover).
	Event(ctx context.Context, id string) (anyhook.Event, error)
	// The breakers of destinations with auto_pause (breaker.go).
	TripBreaker(ctx context.Context, destination string, at time.Time, reason string, firstProbe time.Time) (bool, error)
	ResetBreaker(ctx context.Context, destination string) (bool, error)
	ClaimProbe(ctx context.Context, destination string, inOrder bool, at time.Time, every, lease time.Duration) ([]store.Claim, bool, error)
}

// Destination is one handler the engine delivers to.
type Destination struct {
	Name          string
	URL           string
	SigningSecret string // Standard Webhooks whsec_…; "": no signing
	Timeout       time.Duration
	MaxAttempts   int
	Initial, Max  time.Duration // backoff
	StalePolicy   anyhook.StalePolicy
	DropHeaders   []string // more request headers not to forward
	MaxInFlight   int
	// Rate caps requests per second (retries included) with a token
	// bucket holding a tenth of a second's worth; 0: no cap.
	Rate float64
	// InsecureSkipVerify turns off TLS certificate verification for this
	// destination only (tls_insecure_skip_verify).
	InsecureSkipVerify bool
	// InOrder sends the deliveries of one (source, object) one at a time,
	// in version order (order: per_object; Store.ClaimInOrder).
	InOrder bool
	// AutoPause, when set, pauses the destination automatically while it
	// keeps failing (breaker.go); nil: never.
	AutoPause *AutoPause

	// Headers are static headers set on every request, over the event's
	// own of those names (config headers): secrets, never stored.
	Headers http.Header
	// Auth is the destination's own credential, set on each request at
	// send time; nil: none.
	Auth *Auth
	// TLS, when set, configures the connections to the destination and
	// to its OAuth2 token URL (a client certificate, CAs, a server name:
	// certs.ClientConfig); InsecureSkipVerify still applies. nil: the
	// client's.
	TLS *tls.Config
	// RootCAs, when set, are the CAs the destination (and its token URL)
	// is verified with, as their file is now (certs.CAFile): when they
	// change, new connections use them. nil: TLS's, else the system's.
	RootCAs CAs
	// Proxy, when set, is the proxy every request to the destination
	// (and its token URL) goes through; nil: the client's (NewClient:
	// HTTPS_PROXY, HTTP_PROXY and NO_PROXY).
	Proxy *url.URL
	// Publisher, when set, makes this a broker destination (type nats,
	// rabbitmq or kafka): each attempt is a message it publishes
	// (Engine.publish) instead of a POST to URL; nil: HTTP.
	Publisher broker.Publisher
	// Pull: consumers lease its deliveries through the API (pull.go);
	// no dispatcher sends them. MaxAge, when set, makes dead those not
	// leased (or not acked) within it of their creation.
	Pull   bool
	MaxAge time.Duration
}

// Options configure an Engine.
type Options struct {
	Destinations []Destination
	Logger       *slog.Logger
	Client       *http.Client   // default: NewClient()
	PollInterval time.Duration  // default 1s
	Grace        time.Duration  // lease = timeout + grace; default 5s
	Rand         func() float64 // jitter source in [0, 1); default math/rand/v2
	// Now is the engine's clock: when an attempt started and how long it
	// took, the signature's timestamp, Retry-After dates, health and the
	// rate limits all read it; default time.Now. (Waits use real timers.)
	Now func() time.Time
	// OnDead and OnHeld are told of deliveries that went dead or were held
	// (alerts); either may be nil.
	OnDead func(anyhook.Delivery)
	OnHeld func(anyhook.Delivery)
	// FailingAfter is how many consecutive failed attempts make a
	// destination failing (Health, as the pages show it); default
	// DefaultFailingAfter.
	FailingAfter int
	// OnBreaker is told when this engine tripped a destination's breaker
	// (auto_pause; tripped true) or reset it after a probe succeeded
	// (false), at by the engine's clock, once the change is stored; a
	// trip or reset made by another process, or a person's resume, is
	// not told here. nil: nobody.
	OnBreaker func(destination string, tripped bool, at time.Time)
	// OnAttempt is told of each attempt whose outcome was recorded, with
	// its event and the delivery's new status (incidents: it must not
	// block); nil: nobody.
	OnAttempt func(destination, eventID string, status anyhook.DeliveryStatus, a anyhook.Attempt)
	// Observer is told of attempts and rescues (metrics); nil: nobody.
	Observer Observer
	// UserAgent is sent on every request.
	UserAgent string
	// Tracer, when set, traces claims and attempts (internal/tracing):
	// each attempt is a client span in the trace of the event's stored
	// traceparent, and sends its own traceparent. nil: no tracing, at no
	// cost.
	Tracer trace.TracerProvider
}

// Engine runs the dispatchers and the rescuer.
type Engine struct {
	st     Store
	opt    Options
	log    *slog.Logger
	dests  map[string]*Destination
	out    map[string]*outbound // per destination: its client and credentials (HTTP)
	sender map[string]sender    // per destination: by its kind (send)
	wake   map[string]chan struct{}
	slots  map[string]*slots // per destination: its claims against its limits
	// breakers are those of the destinations with auto_pause, read-only
	// after New.
	breakers map[string]*breaker
	// pullWait wakes the lease requests of each pull destination;
	// pullStop closes at Stop, ending them.
	pullWait    map[string]*pullWaiters
	pullSettled map[string]*settleSubs
	pullStop    chan struct{}
	pullOnce    sync.Once // closes pullStop
	health      *health
	fin         *finisher    // batches the outcomes of all destinations
	tracer      trace.Tracer // nil: tracing is off

	run   lifecycle.Runner
	sends sync.WaitGroup // in-flight requests

	mu    sync.Mutex
	grace time.Duration // given by the first Stop
	stop  bool          // Stop was called
}

// New returns an engine; Start runs it.
func New(st Store, opt Options) *Engine {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.Client == nil {
		opt.Client = NewClient()
	}
	if opt.PollInterval <= 0 {
		opt.PollInterval = time.Second
	}
	if opt.Grace <= 0 {
		opt.Grace = 5 * time.Second
	}
	if opt.Rand == nil {
		opt.Rand = rand.Float64
	}
	if opt.Now == nil {
		opt.Now = time.Now
	}
	if opt.UserAgent == "" {
		opt.UserAgent = "AnyHook"
	}
	e := &Engine{st: st, opt: opt, log: opt.Logger, dests: map[string]*Destination{}, wake: map[string]chan struct{}{}, slots: map[string]*slots{},
		out: map[string]*outbound{}, sender: map[string]sender{}, breakers: map[string]*breaker{}, health: newHealth(opt.FailingAfter), fin: newFinisher(st, maxFinishBatch),
		pullWait: map[string]*pullWaiters{}, pullSettled: map[string]*settleSubs{}, pullStop: make(chan struct{})}
	if opt.Tracer != nil {
		e.tracer = opt.Tracer.Tracer("github.com/anyhook/anyhook/internal/delivery")
	}
	var insecure *http.Client
	shared := func() *http.Client {
		if insecure == nil {
			insecure = insecureClient(opt.Client)
		}
		return insecure
	}
	for i := range opt.Destinations {
		d := &opt.Destinations[i]
		if d.MaxInFlight <= 0 {
			d.MaxInFlight = 64
		}
		e.dests[d.Name] = d
		e.wake[d.Name] = make(chan struct{}, 1)
		e.slots[d.Name] = newSlots(d.MaxInFlight)
		if d.Pull {
			e.pullWait[d.Name] = &pullWaiters{}
			e.pullSettled[d.Name] = &settleSubs{}
		}
		if d.AutoPause != nil {
			e.breakers[d.Name] = newBreaker(*d.AutoPause)
		}
		e.out[d.Name] = newOutbound(opt.Client, d, opt.Now, shared)
		e.sender[d.Name] = e.post
		if d.Publisher != nil {
			e.sender[d.Name] = e.publish
		}
	}
	return e
}

// NewClient returns the outbound HTTP client: bounded dial and header
// timeouts, connection reuse, no redirects to other hosts, and the proxy
// of the environment (HTTPS_PROXY, HTTP_PROXY, NO_PROXY; never for
// localhost and loopback addresses).
func NewClient() *http.Client {
	t := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   64,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
	}
	return &http.Client{
		Transport:     t,
		CheckRedirect: redirect.AnswerOtherwise,
	}
}

// insecureClient is a copy of c that does not verify TLS certificates:
// for destinations that opted out with tls_insecure_skip_verify. A client
// whose transport is not an *http.Transport gets NewClient's transport.
func insecureClient(c *http.Client) *http.Client {
	cc := *c
	t, ok := c.Transport.(*http.Transport)
	if !ok {
		t = NewClient().Transport.(*http.Transport)
	}
	t = t.Clone()
	if t.TLSClientConfig == nil {
		t.TLSClientConfig = &tls.Config{}
	}
	t.TLSClientConfig.InsecureSkipVerify = true
	cc.Transport = t
	return &cc
}

// Lease is how long a claim of d lasts: its timeout plus the grace. A live
// worker's attempt always ends first: it is sent only while enough of the
// lease is left, and its timeout is cut to what is left (lease.go).
func (e *Engine) Lease(d *Destination) time.Duration { return d.Timeout + e.opt.Grace }

// Wake tells every dispatcher that new deliveries may be due.
func (e *Engine) Wake() {
	for d := range e.wake {
		e.wakeOne(d)
	}
}

// wakeOne tells destination's dispatcher that deliveries may be due (a
// rescue, a replay, a resend, a resume), and ingest that they go before
// new events: the queue is not drained.
func (e *Engine) wakeOne(destination string) {
	if sl := e.slots[destination]; sl != nil {
		sl.undrain()
	}
	e.nudge(destination)
}

// nudge tells destination's dispatcher that deliveries may be due.
func (e *Engine) nudge(destination string) {
	if w := e.pullWait[destination]; w != nil {
		w.wake()
		return
	}
	select {
	case e.wake[destination] <- struct{}{}:
	default:
	}
}

// Start starts one dispatcher per destination and the rescuer.
// Cancelling ctx does not stop them (Stop does).
func (e *Engine) Start(ctx context.Context) {
	e.run.Start(context.WithoutCancel(ctx), e.serve)
}

// Stop stops claiming, gives in-flight sends up to grace to finish, then
// aborts them: an aborted delivery's claim is released when its request
// was not sent, recorded as a failed attempt when it was (reclaim), or
// left to the lease under on_stale_claim: hold (Engine.aborted).
// It is idempotent (the first call's grace holds).
func (e *Engine) Stop(grace time.Duration) {
	e.mu.Lock()
	if !e.stop {
		e.stop, e.grace = true, grace
	}
	e.mu.Unlock()
	e.EndPulls()
	e.run.Stop()
}

// serve runs the dispatchers and the rescuer until end ends, then the
// shutdown: in-flight sends get the grace, then are aborted; the outcomes
// they leave are recorded before the finisher stops.
func (e *Engine) serve(end context.Context) {
	base := context.WithoutCancel(end)
	sendCtx, abort := context.WithCancel(base)
	defer abort()
	e.fin.Start(base)
	var loops sync.WaitGroup
	for _, d := range e.dests {
		if !d.Pull {
			loops.Go(func() { e.dispatch(end, sendCtx, d) })
		}
	}
	loops.Go(func() { e.rescuer().run(end) })
	loops.Go(func() { e.expire(end) })
	loops.Wait()
	e.mu.Lock()
	grace := e.grace
	e.mu.Unlock()
	done := make(chan struct{})
	go func() { e.sends.Wait(); close(done) }()
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
		abort()
		<-done
	}
	abort()
	e.fin.Stop() // no send is left to record an outcome
}

// maxFinishBatch bounds how many outcomes share one Finish.
const maxFinishBatch = 256

// claimDefer is how long a dispatcher waits for more free slots before a
// claim smaller than a quarter of max_in_flight.
const claimDefer = 2 * time.Millisecond

// A destination's claims whose request has ended but whose outcome is not
// recorded yet do not count against max_in_flight (the destination is done
// with them), but at most unfinishedFactor × max_in_flight claims are open
// at once, so a slow store cannot make claims pile up.
const unfinishedFactor = 4

func (e *Engine) dispatch(ctx, sendCtx context.Context, d *Destination) {
	sl := e.slots[d.Name]
	// start sends claims whose attempts must end by deadline (lease.go).
	start := func(cs []store.Claim, span trace.SpanContext, deadline time.Time) {
		if len(cs) == 0 {
			return
		}
		if now := e.opt.Now(); !e.canSend(d, deadline, now) {
			// The claim came back too late for any of its deliveries
			// (they share the deadline): renewed, or released (lease.go).
			e.sends.Go(func() { e.late(sendCtx, d, cs, span, deadline.Sub(now)) })
			return
		}
		sl.sending()
		for _, c := range cs {
			e.sends.Go(func() {
				defer sl.finish()
				e.deliver(sendCtx, d, c, deadline, span, sl.sent)
			})
		}
	}
	// Claims made at ingest are sent from the hand-off, at once; a
	// stopping dispatcher waits until the ingest batches that hold its
	// slots have started theirs (within the shutdown's grace, like any).
	sl.open(func(cs []store.Claim, deadline time.Time) { start(cs, trace.SpanContext{}, deadline) })
	defer sl.close()
	// A small claim is put off until deferral fires (deferralOver), at
	// most claimDefer: a timer, so it ends whatever the clock says.
	var deferral <-chan time.Time
	deferralOver := false
	// dry: the last claim found fewer due deliveries than it asked for,
	// so the queue was empty then. A freed slot alone does not claim
	// again (that claim would find nothing, at the price of a write
	// transaction); a wake (new deliveries, rescues) or the poll tick does,
	// and in order a recorded outcome too (it lets the object's next
	// delivery go).
	dry := false
	var lim *limiter
	if d.Rate > 0 {
		lim = newLimiter(d.Rate, e.opt.Now)
	}
	tick := time.NewTicker(e.opt.PollInterval)
	defer tick.Stop()
	// A destination with auto_pause asks the store for its breaker at
	// start and every poll, and probes while it is tripped.
	b := e.breakers[d.Name]
	probeNow := b != nil
	for {
		if probeNow {
			probeNow = false
			if cs, asked := e.probe(ctx, d, b); len(cs) > 0 {
				start(cs, trace.SpanContext{}, e.deadline(d, asked))
			}
		}
		// See what the limits allow.
		inFlight, want, finished := sl.state()
		if b != nil && b.tripped.Load() {
			want = 0 // only probes
		}
		dry = dry && !(finished && d.InOrder)
		var later <-chan time.Time // the rate (or a put-off claim) allows the next request then
		// While requests are in flight, wait (at most claimDefer) until a
		// quarter of the slots are free: one claim, one commit, then
		// serves several.
		if dry {
			want = 0
		}
		if wait := sl.held(); wait > 0 && want > 0 {
			want, later = 0, time.After(wait)
		}
		if want > 0 && inFlight > 0 && want < max(1, d.MaxInFlight/4) && !deferralOver {
			if deferral == nil {
				deferral = time.After(claimDefer)
			}
			want = 0
		}
		if want > 0 {
			deferral, deferralOver = nil, false
			allowed, wait := lim.take(want)
			if took := sl.take(allowed); took < allowed { // ingest took some since
				lim.giveBack(allowed - took)
				allowed = took
			}
			if allowed == 0 {
				if wait > 0 {
					later = time.After(wait)
				}
			} else {
				mark := sl.mark()
				asked := e.opt.Now() // the lease starts later, at the store
				claims, err := e.claim(ctx, d, allowed)
				if err != nil {
					claims.claims = nil // a failed claim claimed nothing
					if ctx.Err() == nil {
						e.log.Warn("claim failed", "destination", d.Name, "err", err)
					}
				}
				lim.giveBack(allowed - len(claims.claims))
				sl.giveBack(allowed-len(claims.claims), false)
				start(claims.claims, claims.span, e.deadline(d, asked))
				if len(claims.claims) == allowed {
					sl.undrain() // more may be due
					continue
				}
				dry = true
				if err == nil {
					sl.drainedAt(mark) // ingest may claim again
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-e.wake[d.Name]:
			dry = false
		case <-tick.C:
			dry = false
			sl.undrain() // retries may have come due
			probeNow = b != nil
		case <-later:
		case <-deferral:
			deferral, deferralOver = nil, true
		case <-sl.signal: // a slot came back
		}
	}
}

// rule is the stale-claim rule of a destination this engine knows. A claim
// of any other destination (removed from this process's config, or not yet
// added to it during a rolling change) is left alone: only a process that
// knows the destination's declared policy may re-send it or hold it.
func (e *Engine) rule(destination string) (store.StaleRule, bool) {
	d, ok := e.dests[destination]
	if !ok {
		return store.StaleRule{}, false
	}
	return store.StaleRule{Policy: d.StalePolicy, MaxAttempts: d.MaxAttempts}, true
}

func (e *Engine) notify(d anyhook.Delivery) {
	switch {
	case d.Status == anyhook.StatusDead && e.opt.OnDead != nil:
		e.opt.OnDead(d)
	case d.Status == anyhook.StatusHeld && e.opt.OnHeld != nil:
		e.opt.OnHeld(d)
	}
}

// maxResponse is how much of a response body an attempt keeps; at most
// maxDrain more is read (and discarded) so that the connection can be
// reused. A longer body is cut off with its connection.
const (
	maxResponse = 4 << 10
	maxDrain    = 64 << 10
)

// deliver makes one attempt and records its outcome, or releases c
// unsent when too little is left before deadline, when the attempt must
// have ended (lease.go). It calls sent once the request has ended (or was
// not made), before the outcome is recorded. claim is the span of the
// claim that took c (invalid when tracing is off).
func (e *Engine) deliver(ctx context.Context, d *Destination, c store.Claim, deadline time.Time, claim trace.SpanContext, sent func()) {
	attempt := c.Delivery.AttemptCount
	started := e.opt.Now()
	if c.Event.BodyPruned {
		// Retention emptied the body: sending would forge an empty event
		// under its X-AnyHook-Delivery. The store never lets a pruned event
		// get a delivery; this is the last line, should one exist anyway.
		sent()
		e.refuse(ctx, d, c, started, "not sent: the event's body was pruned by retention (log.retention); nothing can be sent in its place")
		return
	}
	if !c.Probe && e.Paused(d.Name) {
		sent() // the breaker tripped since the claim: it waits with the rest
		e.releaseTripped(ctx, d, c)
		return
	}
	timeout, ok := e.sendTimeout(d, deadline, started)
	if !ok {
		sent()
		e.release(ctx, d, []store.Claim{c}, timeout)
		return
	}
	var span trace.Span
	sendCtx := ctx
	if e.tracer != nil {
		sendCtx, span = e.startAttempt(ctx, d, c, claim)
	}
	r, err := e.send(sendCtx, d, c, timeout)
	code := r.code
	sent()
	if err != nil && ctx.Err() != nil {
		if span != nil {
			endAborted(span, err)
		}
		// Shutdown aborted the attempt before an answer came. An answer
		// that did arrive is recorded below, whatever the shutdown: an
		// acknowledged delivery must not be sent again.
		e.aborted(ctx, d, c, anyhook.Attempt{Number: attempt, StartedAt: started, Duration: e.opt.Now().Sub(started), Outcome: r.outcome})
		return
	}
	a := anyhook.Attempt{Number: attempt, StartedAt: started, Duration: e.opt.Now().Sub(started), StatusCode: code, ResponseBody: r.body, Outcome: r.outcome}
	out := store.Outcome{DeliveryID: c.Delivery.ID, Attempt: attempt, Result: a}
	switch {
	case err == nil && (r.acked || code >= 200 && code < 300):
		out.Status = anyhook.StatusDelivered
	case c.Probe:
		// A failed probe never uses up the delivery (its attempt does not
		// count: Delivery.Probes): it waits, due, for the next one.
		out.Status = anyhook.StatusPending
	case attempt-c.Delivery.Probes >= d.MaxAttempts:
		out.Status = anyhook.StatusDead
	default:
		out.Status = anyhook.StatusPending
		out.RetryIn = RetryDelay(attempt, d.Initial, d.Max, r.retryAfter, e.opt.Rand())
	}
	if out.Status != anyhook.StatusDelivered {
		if err != nil {
			out.Result.Error = err.Error()
		} else {
			out.Result.Error = "HTTP " + strconv.Itoa(code)
		}
		if c.Probe {
			out.Result.Error = "probe of a destination paused automatically (auto_pause), not counted towards max_attempts: " + out.Result.Error
		}
	}
	if span != nil {
		endAttempt(span, code, err, out)
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	lost, ferr := e.fin.finish(fctx, out)
	// The attempt's attributes are formatted only for a line that is
	// written: a logger's With formats them at once, and most attempts
	// log nothing (delivered is a debug line).
	logf := func(level slog.Level, msg string, args ...any) {
		if !e.log.Enabled(ctx, level) {
			return
		}
		e.log.Log(ctx, level, msg, append([]any{"delivery_id", c.Delivery.ID, "event_id", c.Event.ID, "provider_event_id", c.Event.DedupKey,
			"destination", d.Name, "attempt", attempt, "status_code", code}, args...)...)
	}
	switch {
	case ferr != nil:
		logf(slog.LevelError, "recording the outcome failed; the lease will expire and the rescuer decides", "err", ferr)
		return
	case lost:
		logf(slog.LevelWarn, "outcome not recorded: the claim was lost to a rescuer")
		return
	}
	e.observe(d.Name, c.Event.ID, out.Status, out.Result)
	e.attempted(ctx, d, c.Probe, out.Status == anyhook.StatusDelivered, a.StartedAt.Add(a.Duration))
	switch out.Status {
	case anyhook.StatusDelivered:
		logf(slog.LevelDebug, "delivered", "duration_ms", a.Duration.Milliseconds())
	case anyhook.StatusDead:
		logf(slog.LevelWarn, "delivery dead", "err", out.Result.Error)
		dd := c.Delivery
		dd.Status = anyhook.StatusDead
		e.notify(dd)
	default:
		if c.Probe {
			// Its retry_in (0s: due for the next probe) would read as
			// "now", while the destination stays paused until a probe
			// succeeds.
			logf(slog.LevelInfo, "probe failed; the destination stays paused (auto_pause)", "err", out.Result.Error)
			return
		}
		logf(slog.LevelInfo, "attempt failed; retrying", "err", out.Result.Error, "retry_in", out.RetryIn.String())
	}
}

// aborted settles a claim whose attempt the shutdown aborted, so that the
// next process need not wait for its lease: a request never written is
// released (pending again, the attempt not counted); one written, whose
// handler may have run, is what a reclaim would make of it (a failed
// attempt, due now, or dead if it was the last) when the destination
// says reclaim, and is left to the lease under hold, for the rescuer to
// hold it as declared.
func (e *Engine) aborted(ctx context.Context, d *Destination, c store.Claim, a anyhook.Attempt) {
	log := e.log.With("delivery_id", c.Delivery.ID, "event_id", c.Event.ID, "provider_event_id", c.Event.DedupKey,
		"destination", d.Name, "attempt", a.Number, "outcome", a.Outcome)
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	switch {
	case a.Outcome == anyhook.OutcomeNotSent:
		released, err := e.st.Release(fctx, []store.Release{{DeliveryID: c.Delivery.ID, Attempt: a.Number, Probe: c.Probe}})
		if err != nil || len(released) == 0 {
			log.Warn("attempt aborted by shutdown before it was sent; releasing its claim failed, its lease will expire", "err", err)
			return
		}
		log.Info("attempt aborted by shutdown before it was sent; claim released, pending again")
	case d.StalePolicy == anyhook.Hold:
		log.Info("attempt aborted by shutdown after it was sent; the handler may have run: held when its lease ends (on_stale_claim: hold)")
	default:
		a.Error = "aborted by shutdown after the request was sent: the handler may have run"
		out := store.Outcome{DeliveryID: c.Delivery.ID, Attempt: a.Number, Result: a, Status: anyhook.StatusPending}
		if !c.Probe && a.Number-c.Delivery.Probes >= d.MaxAttempts {
			out.Status = anyhook.StatusDead
		}
		if lost, err := e.fin.finish(fctx, out); err != nil || lost {
			log.Warn("attempt aborted by shutdown after it was sent; recording it failed, its lease will expire", "err", err, "lost", lost)
			return
		}
		log.Info("attempt aborted by shutdown after it was sent; the handler may have run: recorded, to be sent again (on_stale_claim: reclaim)", "status", string(out.Status))
		if out.Status == anyhook.StatusDead {
			dd := c.Delivery
			dd.Status = anyhook.StatusDead
			e.notify(dd)
		}
	}
}

// refuse records a claim that must not be sent as dead, with why.
func (e *Engine) refuse(ctx context.Context, d *Destination, c store.Claim, started time.Time, why string) {
	out := store.Outcome{DeliveryID: c.Delivery.ID, Attempt: c.Delivery.AttemptCount, Status: anyhook.StatusDead,
		Result: anyhook.Attempt{Number: c.Delivery.AttemptCount, StartedAt: started, Error: why, Outcome: anyhook.OutcomeNotSent}}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	log := e.log.With("delivery_id", c.Delivery.ID, "event_id", c.Event.ID, "destination", d.Name)
	if lost, err := e.fin.finish(fctx, out); err != nil || lost {
		log.Error("recording a refused delivery failed; the lease will expire and the rescuer decides", "err", err, "lost", lost)
		return
	}
	log.Error("delivery refused", "err", why) // not the destination's failure: its health is untouched
	dd := c.Delivery
	dd.Status = anyhook.StatusDead
	e.notify(dd)
}

// reply is what one request came to.
type reply struct {
	code       int    // the HTTP status; 0 without an answer
	body       []byte // the first 4 KiB of the response
	retryAfter time.Duration
	outcome    string // anyhook.Outcome*
	acked      bool   // a broker took the message (publish): delivered
}

// A sender makes one attempt of c to d, giving up after timeout: an HTTP
// POST (post) or a broker publish (publish). It returns the reply, and
// an error when the attempt failed without an answer that says how; the
// reply's outcome says then whether anything reached the destination.
type sender func(ctx context.Context, d *Destination, c store.Claim, timeout time.Duration) (reply, error)

// send makes one attempt by d's kind; retries, leases, breakers and the
// outcome's recording are the same for every kind.
func (e *Engine) send(ctx context.Context, d *Destination, c store.Claim, timeout time.Duration) (reply, error) {
	return e.sender[d.Name](ctx, d, c, timeout)
}

// publish sends the event to d's broker as one message, giving up after
// timeout (the lease's deadline, as for a POST). The message carries the
// headers a POST would, X-AnyHook-Delivery-Id, and the delivery's id as
// its message id: a crash between the broker's ack and the outcome's
// commit re-sends the same id, while a replay (a new delivery) has its
// own. Delivered means the broker acked it (docs/destinations.md).
func (e *Engine) publish(ctx context.Context, d *Destination, c store.Claim, timeout time.Duration) (reply, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h := e.header(d, c, e.opt.Now())
	h.Set("X-AnyHook-Delivery-Id", c.Delivery.ID)
	if e.tracer != nil {
		tracing.Inject(ctx, h)
	}
	key := c.Event.ID
	if d.InOrder && c.Event.Object != "" {
		key = c.Event.Object // one partition per object keeps its order
	}
	err := d.Publisher.Publish(ctx, broker.Message{ID: c.Delivery.ID, Key: key, Header: h, Body: c.Event.Body, ContentType: h.Get("Content-Type")})
	if err == nil {
		return reply{outcome: anyhook.OutcomeAnswered, acked: true}, nil
	}
	r := reply{outcome: anyhook.OutcomeNotSent}
	switch broker.StageOf(err) {
	case broker.NoAnswer:
		r.outcome = anyhook.OutcomeNoAnswer
	case broker.Answered:
		r.outcome = anyhook.OutcomeAnswered
	}
	return r, clipError(fmt.Errorf("publish to destination %s: %w", d.Name, err))
}

// post POSTs the event to d, giving up after timeout. It returns the
// reply, and an error when no response arrived; the reply's outcome says
// then whether the request's headers had been written (no_answer: the
// handler may have run) or not (not_sent).
func (e *Engine) post(ctx context.Context, d *Destination, c store.Claim, timeout time.Duration) (reply, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out := e.out[d.Name]
	h := e.header(d, c, e.opt.Now())
	if e.tracer != nil {
		tracing.Inject(ctx, h) // the attempt's span: the destination continues the trace
	}
	var wrote, reused atomic.Bool
	traced := httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) { reused.Store(i.Reused) },
		// Once its headers are written on a connection, the handler may
		// start: a server runs it before the body has arrived, so a write
		// cut off in the body is sent, not "not sent". Headers written
		// to a connection that then failed count too: the safe side.
		WroteHeaders: func() { wrote.Store(true) },
	})
	for refreshed := false; ; refreshed = true {
		// The credential is set here, on the request only: the stored
		// event never holds it. A token is fetched outside the trace:
		// its request is not the destination's.
		tok, err := out.authorize(ctx, h)
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("timeout after %v", timeout)
			}
			return reply{outcome: anyhook.OutcomeNotSent}, clipError(errors.New(out.scrub(fmt.Sprintf("oauth2 token for destination %s: %v", d.Name, err))))
		}
		req, err := http.NewRequestWithContext(traced, http.MethodPost, d.URL, bytes.NewReader(c.Event.Body))
		if err != nil {
			return reply{outcome: anyhook.OutcomeNotSent}, err
		}
		req.Header = h
		wrote.Store(false)
		resp, err := out.client.Do(req)
		if err != nil {
			r := reply{outcome: anyhook.OutcomeNotSent}
			if wrote.Load() && !(refused(err) && !reused.Load()) {
				r.outcome = anyhook.OutcomeNoAnswer
			}
			if errors.Is(err, context.DeadlineExceeded) {
				err = fmt.Errorf("timeout after %v", timeout)
			}
			// Not the *url.Error text: the destination's URL can hold a secret
			// (a token in its path or query), and this text reaches alerts.
			var ue *url.Error
			if errors.As(err, &ue) {
				err = fmt.Errorf("%s to destination %s: %w", ue.Op, d.Name, ue.Err)
			}
			if len(out.secrets) > 0 || out.token != nil {
				err = &clippedError{msg: out.scrub(err.Error()), err: err}
			}
			return r, clipError(err)
		}
		if resp.StatusCode == http.StatusUnauthorized && tok != "" && !refreshed {
			// The token may have been revoked before it expired: one
			// more, with a new token; that one's answer counts.
			io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
			resp.Body.Close()
			out.token.drop(tok)
			continue
		}
		defer resp.Body.Close()
		var body []byte
		if len(out.secrets) > 0 || out.token != nil {
			body = out.readScrubbed(resp.Body)
		} else {
			body, _ = io.ReadAll(io.LimitReader(resp.Body, maxResponse))
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain)) // let the connection be reused
		return reply{code: resp.StatusCode, body: body, retryAfter: parseRetryAfter(resp.Header.Get("Retry-After"), e.opt.Now()),
			outcome: anyhook.OutcomeAnswered}, nil
	}
}

// refused reports whether err is a TLS alert from the server: on a new
// connection it refused the handshake (in TLS 1.3 a client learns that
// its certificate was refused only when it reads, after writing its
// request), so no handler saw the request.
func refused(err error) bool {
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "remote error" && strings.HasPrefix(oe.Err.Error(), "tls: ")
}

// maxErrorText bounds an attempt's error text. Go's errors can quote what
// the destination sent (a malformed status line of up to 10 MiB), and the
// text is stored with every attempt and copied to incidents and alerts:
// what a destination makes us keep stays bounded, as its body is.
const maxErrorText = 1024

// clippedError is an error whose text was cut to maxErrorText.
type clippedError struct {
	msg string
	err error
}

func (e *clippedError) Error() string { return e.msg }
func (e *clippedError) Unwrap() error { return e.err }

// clipError bounds err's text to maxErrorText bytes (valid UTF-8).
func clipError(err error) error {
	s := err.Error()
	if len(s) <= maxErrorText {
		return err
	}
	cut := strings.ToValidUTF8(s[:maxErrorText], "")
	return &clippedError{msg: cut + "… (" + strconv.Itoa(len(s)-len(cut)) + " bytes cut)", err: err}
}

// dropped are the request headers never forwarded: hop-by-hop ones, Host
// and Content-Length (set anew), and credentials meant for the gateway.
var dropped = []string{
	"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "Proxy-Connection",
	"Te", "Trailer", "Transfer-Encoding", "Upgrade", "Host", "Content-Length",
	"Authorization", "Cookie", "Accept-Encoding",
}

// header is the outbound header set for one attempt.
func (e *Engine) header(d *Destination, c store.Claim, now time.Time) http.Header {
	h := c.Event.Header.Clone()
	if h == nil {
		h = http.Header{}
	}
	for _, k := range c.Event.Header.Values("Connection") {
		for _, name := range strings.Split(k, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, k := range dropped {
		h.Del(k)
	}
	for _, k := range d.DropHeaders {
		h.Del(k)
	}
	for k := range h {
		if strings.HasPrefix(k, "X-Anyhook-") {
			h.Del(k) // only the gateway speaks for itself
		}
	}
	ev, dl := c.Event, c.Delivery
	h.Set("User-Agent", e.opt.UserAgent)
	h.Set("X-AnyHook-Delivery", ev.ID)
	h.Set("X-AnyHook-Attempt", strconv.Itoa(dl.AttemptCount))
	h.Set("X-AnyHook-Replay", strconv.FormatBool(dl.Replay))
	if ev.Origin == anyhook.OriginBackfill {
		h.Set("X-AnyHook-Backfill", "true") // read from the provider's API after an outage
	}
	h.Set("X-AnyHook-Source", ev.Source)
	if ev.DedupKey != "" {
		h.Set("X-AnyHook-Event-Id", ev.DedupKey)
	}
	if ev.Type != "" {
		h.Set("X-AnyHook-Event-Type", ev.Type)
	}
	if ev.Object != "" {
		h.Set("X-AnyHook-Object", ev.Object)
		h.Set("X-AnyHook-Version", ev.Version)
	}
	if dl.Stale {
		h.Set("X-AnyHook-Stale", "true")
	}
	if d.SigningSecret != "" {
		// Ours replace any incoming headers of these names (SPEC §5).
		h.Del("Webhook-Timestamp")
		h.Del("Webhook-Signature")
		h.Set("Webhook-Id", ev.ID)
		// The secret was checked when the config was loaded.
		if err := provider.Sign("standard", d.SigningSecret, &provider.Request{Header: h, Body: ev.Body}, now); err != nil {
			e.log.Error("signing failed", "destination", d.Name, "err", err)
		}
	}
	return h
}

// parseRetryAfter reads delay-seconds or an HTTP date; 0 when absent or
// unreadable.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.Atoi(v); err == nil && s > 0 {
		return time.Duration(s) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
