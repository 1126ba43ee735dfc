// Package alert tells people when something needs them (SPEC §10): an
// incident opened, escalated or resolved (internal/incident), a delivery
// held (or gone dead, when asked for), a log that does not verify. A Notifier posts alerts to the configured channels
// (a generic JSON webhook, a Slack incoming webhook, PagerDuty Events v2)
// and folds bursts together: per (kind, destination), the first alert goes
// out at once and the rest of the window's become one summary ("… and 41
// more"). An outage sends a few messages, not thousands.
//
// The folding and the messages live in the store's outbox
// (store.AlertOutbox), not in memory: a message is kept until its channel
// answered 2xx, retried with backoff while the channel fails, and sent by
// the restarted process after a crash; on PostgreSQL each fold's message
// is queued by one process and sent by one at a time. Raising an alert
// never holds up a delivery: Notify hands it to a bounded queue that a
// goroutine of the Notifier writes to the store.
package alert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/anyhook/anyhook/internal/lifecycle"
	"github.com/anyhook/anyhook/internal/loopback"
	"github.com/anyhook/anyhook/internal/redirect"
	"github.com/anyhook/anyhook/internal/store"
)

// Alert kinds.
const (
	DeliveryDead             = "delivery_dead"           // max_attempts reached (opt-in: alert_delivery_dead)
	DeliveryHeld             = "delivery_held"           // stale claim under on_stale_claim: hold
	IncidentOpened           = "incident_opened"         // a destination started failing a new way (or again)
	IncidentEscalated        = "incident_escalated"      // ... affecting many events, or for long
	IncidentResolved         = "incident_resolved"       // ... and delivers again
	LedgerVerificationFailed = "log_verification_failed" // the tamper-evident ledger does not verify
	PullBacklog              = "pull_backlog"            // a pull destination's deliveries wait with no consumer
)

// Alert is one thing a person should know about.
type Alert struct {
	Kind        string `json:"kind"` // one of the kinds above
	Destination string `json:"destination,omitempty"`
	Source      string `json:"source,omitempty"`
	EventID     string `json:"event_id,omitempty"` // AnyHook event id (X-AnyHook-Delivery)
	// ProviderEventID is the provider's event id (the dedup key), when the
	// event has one.
	ProviderEventID string `json:"provider_event_id,omitempty"`
	DeliveryID      string `json:"delivery_id,omitempty"` // AnyHook delivery id
	// IncidentID is the incident an incident_* alert is about: its
	// PagerDuty dedup_key, so that PagerDuty's incident opens and
	// resolves with ours.
	IncidentID string    `json:"incident_id,omitempty"`
	Message    string    `json:"message,omitempty"` // human detail, e.g. the last error
	Time       time.Time `json:"time"`              // when it happened; Notify fills a zero Time
	// URL is the event's page in the dashboard, when the config says
	// where the dashboard is (dashboard_url).
	URL string `json:"url,omitempty"`
}

// Defaults for Options.
const (
	DefaultWindow        = time.Minute
	DefaultFlushInterval = time.Second
	DefaultTimeout       = 10 * time.Second
)

// The outbox's bounds.
const (
	// maxQueue bounds the alerts raised and not yet written to the
	// outbox; beyond it they are dropped (and logged). The writer keeps
	// it short: one transaction per batch of at most maxBatch.
	maxQueue = 1024
	maxBatch = 256
	// writeTries bounds the writes of one batch while the store fails
	// (about four minutes of backoff).
	writeTries = 8
	// lease is how long a sender holds a claimed message: longer than a
	// post can take (the client's timeout), so that another sender takes
	// it over only from a sender that died.
	lease = time.Minute
	// claimLimit is how many messages a sender claims at a time.
	claimLimit = 32
	// A message whose channel fails is retried after retryInitial·2^(n-1),
	// at most retryMax, with jitter; one no channel took within giveUp is
	// given up (and logged). Sent and given-up messages are deleted after
	// keep.
	retryInitial = 2 * time.Second
	retryMax     = 5 * time.Minute
	giveUp       = 24 * time.Hour
	keep         = 7 * 24 * time.Hour
	// pruneEvery is how many flushes go between prunes.
	pruneEvery = 60
)

// Options configure a Notifier. The zero value is usable for a Notifier
// without channels; one with channels needs an Outbox.
type Options struct {
	// Outbox keeps the folds and the messages until their channels took
	// them: the gateway's store.
	Outbox store.AlertOutbox
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
	Now     func() time.Time // default: time.Now; an alert's Time when it has none
	// Window is the rate limit: per (kind, destination), at most one
	// message per Window after the first. Default 1m.
	Window time.Duration
	// FlushInterval is how often waiting summaries and retries are
	// checked. Default 1s.
	FlushInterval time.Duration
	// UserAgent is sent with every post. Default "AnyHook".
	UserAgent string
	// Rand draws the jitter of retries, uniform in [0, 1); default
	// math/rand/v2's.
	Rand func() float64
}

// Notifier sends alerts to the configured channels. Notify queues; the
// goroutines started by Start write the queue to the outbox and send what
// the outbox holds. Its methods are safe for concurrent use.
type Notifier struct {
	channels []channel
	byKey    map[string]channel
	keys     []string // the channels' keys, in the outbox
	outbox   store.AlertOutbox
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
	rand   func() float64

	mu      sync.Mutex
	stopped bool // Notify drops
	queue   chan store.RaisedAlert

	wake   chan struct{} // the writer queued messages
	writer lifecycle.Runner
	sender lifecycle.Runner

	// Test hooks: a manual flush clock, a signal after each flush, and
	// the number of alerts each write took.
	tick     <-chan time.Time
	tickDone chan struct{}
	wrote    chan int
}

// message is what a channel sends: an alert, standing for More others
// folded into it, with the action and incident key its channel keys
// incidents by ("" for an alert's own: see pdDedupKey).
type message struct {
	Alert
	More     int
	Action   string // store.AlertTrigger or store.AlertResolve
	DedupKey string
}

// New returns a Notifier for the channels of a validated configuration. With
// no channels, Notify does nothing.
func New(channels []Channel, opts Options) (*Notifier, error) {
	n := &Notifier{
		outbox: opts.Outbox,
		client: opts.Client,
		log:    opts.Logger,
		now:    opts.Now,
		window: opts.Window,
		every:  opts.FlushInterval,
		ua:     opts.UserAgent,
		rand:   opts.Rand,
		byKey:  map[string]channel{},
		queue:  make(chan store.RaisedAlert, maxQueue),
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
	if n.rand == nil {
		n.rand = rand.Float64
	}
	for i, a := range channels {
		s, err := newChannel(i, a)
		if err != nil {
			return nil, err
		}
		n.channels = append(n.channels, s)
		if _, dup := n.byKey[s.key()]; !dup {
			n.byKey[s.key()] = s
			n.keys = append(n.keys, s.key())
		}
	}
	if len(n.channels) > 0 && n.outbox == nil {
		return nil, errors.New("alert: channels need an outbox")
	}
	return n, nil
}

// CheckChannels reports the first channel of a configuration that New
// would refuse.
func CheckChannels(channels []Channel) error {
	for i, a := range channels {
		if _, err := newChannel(i, a); err != nil {
			return err
		}
	}
	return nil
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

// Notify queues a for the outbox and returns at once: it never waits for
// the store or a channel. There, within a window, an exact repeat of an
// alert already folded (same kind, destination and delivery, event or
// message) is dropped, and further alerts of the same kind and destination
// are folded into one summary. An alert that finds the queue full, or
// comes after Stop, is logged and dropped.
func (n *Notifier) Notify(ctx context.Context, a Alert) {
	if len(n.channels) == 0 {
		return
	}
	if a.Time.IsZero() {
		a.Time = n.now()
	}
	ra, err := raised(a)
	if err != nil {
		n.log.Log(ctx, slog.LevelError, "alert dropped: cannot encode it", "kind", a.Kind, "err", err)
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.stopped {
		n.log.Log(ctx, slog.LevelWarn, "alert dropped: notifier stopped",
			"kind", a.Kind, "destination", a.Destination, "message", a.Message)
		return
	}
	select {
	case n.queue <- ra:
	default:
		n.log.Log(ctx, slog.LevelWarn, "alert dropped: queue full",
			"kind", a.Kind, "destination", a.Destination, "message", a.Message)
	}
}

// foldOf is the fold of a: what its rate limit is kept by. The alerts of
// one incident share one, so that a summary always carries its latest
// state: a flapping incident cannot end on a stale "opened" message (or
// re-open the PagerDuty incident its resolve closed).
func foldOf(a Alert) string {
	if a.IncidentID != "" {
		return "incident:" + a.IncidentID
	}
	return a.Kind
}

// identity is what makes two alerts the same alert, for de-duplication.
func identity(a Alert) string {
	switch {
	case a.IncidentID != "":
		return a.Kind + "\x00i:" + a.IncidentID
	case a.DeliveryID != "":
		return a.Kind + "\x00d:" + a.DeliveryID
	case a.EventID != "":
		return a.Kind + "\x00e:" + a.EventID
	}
	return a.Kind + "\x00m:" + a.Source + "\x00" + a.Message
}

// raised is a as the outbox keeps it. An incident's alerts are keyed by
// its id; a resolve closes it. Any other alert triggers the channel
// incident of its (kind, destination).
func raised(a Alert) (store.RaisedAlert, error) {
	b, err := json.Marshal(a)
	ra := store.RaisedAlert{Fold: foldOf(a), Destination: a.Destination, Kind: a.Kind, Identity: identity(a),
		Action: store.AlertTrigger, DedupKey: pdDedupKey(a.Kind, a.Destination), Message: b}
	if a.IncidentID != "" {
		// "opened" after "resolved" (a reopen) is news even if said before.
		ra.Repeatable, ra.DedupKey = true, a.IncidentID
		if a.Kind == IncidentResolved {
			ra.Action = store.AlertResolve
		}
	}
	return ra, err
}

// Start starts the goroutines that write raised alerts to the outbox and
// send its messages. Cancelling ctx stops them at once, leaving what is
// queued in memory unwritten; Stop stops them gracefully.
func (n *Notifier) Start(ctx context.Context) {
	if len(n.channels) == 0 {
		return
	}
	n.writer.Start(ctx, func(end context.Context) { n.writeLoop(ctx, end) })
	n.sender.Start(ctx, func(end context.Context) {
		tick := n.tick
		if tick == nil {
			t := time.NewTicker(n.every)
			defer t.Stop()
			tick = t.C
		}
		n.sendLoop(ctx, end, tick)
	})
}

// Stop writes what is queued to the outbox, queues every waiting summary
// (the window cut short), makes one attempt at each message due, and
// returns once the goroutines have finished. What a channel did not take
// stays in the outbox for the next start. It is idempotent; Notify after
// Stop drops.
func (n *Notifier) Stop() {
	n.mu.Lock()
	n.stopped = true
	n.mu.Unlock()
	n.writer.Stop()
	n.sender.Stop()
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
	if m.IncidentID != "" {
		ids = append(ids, "incident "+m.IncidentID)
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
	case IncidentOpened:
		return "incident opened"
	case IncidentEscalated:
		return "incident escalated"
	case IncidentResolved:
		return "incident resolved"
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
