// Package alert tells people when something needs them (SPEC §10): a
// delivery gone dead or held, a destination failing or recovered, a log
// that does not verify. A Notifier posts alerts to the configured channels
// (a generic JSON webhook, a Slack incoming webhook, PagerDuty Events v2)
// from its own goroutine, so that raising an alert never holds up a
// delivery, and folds bursts together: per (kind, destination), the first
// alert goes out at once and the rest of the window's become one summary
// ("… and 41 more"). An outage sends a few messages, not thousands.
package alert

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/anyhook/anyhook/internal/lifecycle"
	"github.com/anyhook/anyhook/internal/loopback"
	"github.com/anyhook/anyhook/internal/redirect"
)

// Alert kinds.
const (
	DeliveryDead             = "delivery_dead"           // max_attempts reached
	DeliveryHeld             = "delivery_held"           // stale claim under on_stale_claim: hold
	DestinationFailing       = "destination_failing"     // a destination keeps failing
	DestinationRecovered     = "destination_recovered"   // ... and answers again
	LedgerVerificationFailed = "log_verification_failed" // the tamper-evident ledger does not verify
)

// Alert is one thing a person should know about.
type Alert struct {
	Kind        string `json:"kind"` // one of the kinds above
	Destination string `json:"destination,omitempty"`
	Source      string `json:"source,omitempty"`
	EventID     string `json:"event_id,omitempty"` // AnyHook event id (X-AnyHook-Delivery)
	// ProviderEventID is the provider's event id (the dedup key), when the
	// event has one.
	ProviderEventID string    `json:"provider_event_id,omitempty"`
	DeliveryID      string    `json:"delivery_id,omitempty"` // AnyHook delivery id
	Message         string    `json:"message,omitempty"`     // human detail, e.g. the last error
	Time            time.Time `json:"time"`                  // when it happened; Notify fills a zero Time
	// URL is the event's page in the dashboard, when the config says
	// where the dashboard is (dashboard_url).
	URL string `json:"url,omitempty"`
}

// Defaults for Options.
const (
	DefaultWindow        = time.Minute
	DefaultFlushInterval = time.Second
	DefaultTimeout       = 10 * time.Second
	// maxQueue bounds the messages waiting to be sent; beyond it the
	// oldest are dropped (and logged). Folding keeps the queue short in
	// practice: at most one message per (kind, destination) per window.
	maxQueue = 1000
	// maxSeen bounds the identities remembered per (kind, destination)
	// for de-duplication within a window.
	maxSeen = 4096
)

// Options configure a Notifier. The zero value is usable.
type Options struct {
	// Client posts to the channels (but for a Slack or PagerDuty channel on
	// plain http://: see Observe). Default: a client of the Notifier's own
	// with a 10s timeout (never http.DefaultClient). Its redirect policy
	// is replaced: a redirect is followed only when it keeps the POST
	// (307, 308) and stays on the channel's scheme and host.
	Client *http.Client
	// Observe, when set, wraps the transport of every post: Client's, and
	// the loopback-only one that Slack and PagerDuty channels on plain
	// http:// post through instead (package loopback), which Client's
	// transport would not reach (the gateway counts alerts sent with it).
	Observe func(http.RoundTripper) http.RoundTripper
	Logger  *slog.Logger     // default: discard
	Now     func() time.Time // default: time.Now
	// Window is the rate limit: per (kind, destination), at most one
	// message per Window after the first. Default 1m.
	Window time.Duration
	// FlushInterval is how often waiting summaries are checked. Default 1s.
	FlushInterval time.Duration
	// UserAgent is sent with every post. Default "AnyHook".
	UserAgent string
}

// Notifier sends alerts to the configured channels. Notify queues; the
// goroutine started by Start posts. Its methods are safe for concurrent use.
type Notifier struct {
	channels []channel
	client   *http.Client
	// plain posts to the channels whose URL or body is a credential (Slack,
	// PagerDuty) when their URL is plain http://, which the configuration
	// allows only to a loopback host: it connects only to loopback
	// addresses, whatever the name resolves to (package loopback).
	plain  *http.Client
	log    *slog.Logger
	now    func() time.Time
	window time.Duration
	every  time.Duration
	ua     string

	mu      sync.Mutex
	states  map[key]*state
	queue   []message
	stopped bool // Notify drops

	wake chan struct{} // a message was queued
	run  lifecycle.Runner

	// Test hooks: a manual flush clock, and a signal after each flush.
	tick     <-chan time.Time
	tickDone chan struct{}
}

type key struct{ kind, destination string }

// state is the rate limit of one (kind, destination).
type state struct {
	lastSent time.Time // when the last message was queued
	pending  int       // alerts folded since then
	latest   Alert     // the newest folded alert
	seen     map[string]struct{}
}

// message is what a channel sends: an alert, standing for More others
// folded into it.
type message struct {
	Alert
	More int
}

// New returns a Notifier for the channels of a validated configuration. With
// no channels, Notify does nothing.
func New(channels []Channel, opts Options) (*Notifier, error) {
	n := &Notifier{
		client: opts.Client,
		log:    opts.Logger,
		now:    opts.Now,
		window: opts.Window,
		every:  opts.FlushInterval,
		ua:     opts.UserAgent,
		states: map[key]*state{},
		wake:   make(chan struct{}, 1),
	}
	if n.client == nil {
		n.client = newClient()
	}
	// The caller's client is copied, not changed: its redirect policy is
	// replaced by redirect.AnswerOtherwise.
	c := *n.client
	c.CheckRedirect = redirect.AnswerOtherwise
	var plain http.RoundTripper = loopback.Transport()
	if opts.Observe != nil {
		rt := c.Transport
		if rt == nil {
			rt = http.DefaultTransport
		}
		c.Transport = opts.Observe(rt)
		plain = opts.Observe(plain)
	}
	n.client = &c
	n.plain = &http.Client{Timeout: c.Timeout, Transport: plain, CheckRedirect: redirect.AnswerOtherwise}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	if n.now == nil {
		n.now = time.Now
	}
	if n.window <= 0 {
		n.window = DefaultWindow
	}
	if n.every <= 0 {
		n.every = DefaultFlushInterval
	}
	if n.ua == "" {
		n.ua = "AnyHook"
	}
	for i, a := range channels {
		s, err := newChannel(i, a)
		if err != nil {
			return nil, err
		}
		n.channels = append(n.channels, s)
	}
	return n, nil
}

func newClient() *http.Client {
	return &http.Client{
		Timeout: DefaultTimeout,
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   5 * time.Second,
			ResponseHeaderTimeout: DefaultTimeout,
			MaxIdleConns:          8,
			IdleConnTimeout:       90 * time.Second,
			ForceAttemptHTTP2:     true,
		},
	}
}

// Notify queues a for the channels and returns at once. Within a window, an
// exact repeat of an alert already seen (same kind, destination and
// delivery, event or message) is dropped, and further alerts of the same
// kind and destination are folded into one summary. Alerts raised after
// Stop are logged and dropped.
func (n *Notifier) Notify(ctx context.Context, a Alert) {
	if len(n.channels) == 0 {
		return
	}
	now := n.now()
	if a.Time.IsZero() {
		a.Time = now
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		n.log.Log(ctx, slog.LevelWarn, "alert dropped: notifier stopped",
			"kind", a.Kind, "destination", a.Destination, "message", a.Message)
		return
	}
	k := keyOf(a)
	st := n.states[k]
	if st == nil {
		st = &state{}
		n.states[k] = st
	}
	id := identity(a)
	open := !st.lastSent.IsZero() && now.Before(st.lastSent.Add(n.window))
	if open {
		// An exact repeat is dropped; not so for health changes, where
		// "failing" after "recovered" is news even if said before.
		if _, dup := st.seen[id]; dup && k.kind != healthKind {
			return
		}
		if len(st.seen) < maxSeen {
			st.seen[id] = struct{}{}
		}
		st.pending++
		st.latest = a
		return
	}
	// The window is over (or this is the first): send now, standing for
	// whatever was folded since the last message.
	more := st.pending
	st.lastSent, st.pending, st.latest = now, 0, Alert{}
	st.seen = map[string]struct{}{id: {}}
	n.enqueue(ctx, message{Alert: a, More: more})
}

const healthKind = "destination_health"

// keyOf is the rate-limit key of a. A destination's failing and
// recovered alerts share one, so that a summary always carries its latest
// state: a flapping destination cannot end on a stale "failing" message
// (or re-open the PagerDuty incident its recovery resolved).
func keyOf(a Alert) key {
	kind := a.Kind
	if kind == DestinationFailing || kind == DestinationRecovered {
		kind = healthKind
	}
	return key{kind, a.Destination}
}

// identity is what makes two alerts the same alert, for de-duplication.
func identity(a Alert) string {
	switch {
	case a.DeliveryID != "":
		return a.Kind + "\x00d:" + a.DeliveryID
	case a.EventID != "":
		return a.Kind + "\x00e:" + a.EventID
	}
	return a.Kind + "\x00m:" + a.Source + "\x00" + a.Message
}

// enqueue adds m to the queue and wakes the sender; n.mu is held.
func (n *Notifier) enqueue(ctx context.Context, m message) {
	if len(n.queue) >= maxQueue {
		old := n.queue[0]
		n.queue = n.queue[1:]
		n.log.Log(ctx, slog.LevelWarn, "alert dropped: queue full",
			"kind", old.Kind, "destination", old.Destination, "more", old.More)
	}
	n.queue = append(n.queue, m)
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// flush queues the summaries whose window is over; all of them when final.
// It also forgets idle rate-limit states.
func (n *Notifier) flush(ctx context.Context, final bool) {
	now := n.now()
	n.mu.Lock()
	defer n.mu.Unlock()
	for k, st := range n.states {
		over := !now.Before(st.lastSent.Add(n.window))
		switch {
		case st.pending > 0 && (over || final):
			n.enqueue(ctx, message{Alert: st.latest, More: st.pending - 1})
			st.lastSent, st.pending, st.latest = now, 0, Alert{}
			st.seen = map[string]struct{}{}
		case st.pending == 0 && over:
			delete(n.states, k)
		}
	}
}

// Start starts the goroutine that posts alerts. Cancelling ctx stops it
// at once, dropping what is queued; Stop stops it gracefully.
func (n *Notifier) Start(ctx context.Context) {
	n.run.Start(ctx, func(end context.Context) {
		tick := n.tick
		if tick == nil {
			t := time.NewTicker(n.every)
			defer t.Stop()
			tick = t.C
		}
		n.loop(ctx, end, tick)
	})
}

// Stop sends what is queued and every waiting summary, then returns once
// the goroutine has finished. It is idempotent; Notify after Stop drops.
func (n *Notifier) Stop() {
	n.mu.Lock()
	n.stopped = true
	n.mu.Unlock()
	n.run.Stop()
}

// loop posts under ctx, which Stop does not cancel (a post in progress
// when Stop is called completes), until end ends: by Stop, after a final
// flush; by ctx, at once.
func (n *Notifier) loop(ctx, end context.Context, tick <-chan time.Time) {
	for {
		select {
		case <-end.Done():
			if lifecycle.Stopped(end) {
				n.flush(ctx, true)
				n.send(ctx)
				return
			}
			n.mu.Lock()
			dropped := len(n.queue)
			n.queue = nil
			n.mu.Unlock()
			if dropped > 0 {
				n.log.Warn("alerts dropped: shutting down", "count", dropped)
			}
			return
		case <-n.wake:
			n.send(ctx)
		case <-tick:
			n.flush(ctx, false)
			n.send(ctx)
			if n.tickDone != nil {
				n.tickDone <- struct{}{}
			}
		}
	}
}

// send posts every queued message to every channel, once each: a failure is
// logged, not retried (the next alert or summary follows soon enough, and
// retrying a dead channel forever would pile up).
func (n *Notifier) send(ctx context.Context) {
	for ctx.Err() == nil {
		n.mu.Lock()
		q := n.queue
		n.queue = nil
		n.mu.Unlock()
		if len(q) == 0 {
			return
		}
		for _, m := range q {
			for _, s := range n.channels {
				if ctx.Err() != nil {
					return
				}
				// The log lines keep their old words ("sink"): operators
				// match them.
				if err := n.post(ctx, s, m); err != nil {
					n.log.Warn("alert sink failed", "sink", s.name(), "kind", m.Kind,
						"destination", m.Destination, "event_id", m.EventID, "delivery_id", m.DeliveryID, "more", m.More, "err", err)
				} else {
					n.log.Debug("alert sent", "sink", s.name(), "kind", m.Kind,
						"destination", m.Destination, "more", m.More)
				}
			}
		}
	}
}

// text is the one-line human rendering of m, shared by the channels.
func (m message) text() string {
	var b strings.Builder
	b.WriteString("AnyHook: ")
	b.WriteString(title(m.Kind))
	if m.Destination != "" {
		b.WriteString(": destination ")
		b.WriteString(m.Destination)
	}
	var ids []string
	if m.Source != "" {
		ids = append(ids, "source "+m.Source)
	}
	if m.EventID != "" {
		ids = append(ids, "event "+m.EventID)
	}
	if m.ProviderEventID != "" {
		ids = append(ids, "provider event "+m.ProviderEventID)
	}
	if m.DeliveryID != "" {
		ids = append(ids, "delivery "+m.DeliveryID)
	}
	if len(ids) > 0 {
		b.WriteString(" (" + strings.Join(ids, ", ") + ")")
	}
	if m.Message != "" {
		b.WriteString(": ")
		b.WriteString(m.Message)
	}
	if m.More > 0 {
		fmt.Fprintf(&b, " — and %d more", m.More)
	}
	return b.String()
}

func title(kind string) string {
	switch kind {
	case DeliveryDead:
		return "delivery dead"
	case DeliveryHeld:
		return "delivery held"
	case DestinationFailing:
		return "destination failing"
	case DestinationRecovered:
		return "destination recovered"
	case LedgerVerificationFailed:
		return "log verification failed"
	}
	return strings.ReplaceAll(kind, "_", " ")
}

// safeError strips the URL from a client error: Slack webhook URLs and
// some webhook URLs carry credentials.
func safeError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
