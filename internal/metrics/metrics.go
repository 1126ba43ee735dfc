// Package metrics exposes the gateway's Prometheus metrics at /metrics in
// the text exposition format, from a registry of its own (never the
// global default one). It implements the small observer interfaces of
// internal/ingest and internal/delivery, so those packages stay free of
// Prometheus, and reads the queue gauges from the store at scrape time
// through store.StatsReader (index range scans only). docs/operations.md
// lists every series.
package metrics

import (
	"context"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/auth"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/ingest"
	"github.com/anyhook/anyhook/internal/store"
)

// Options configure Metrics.
type Options struct {
	// Stats, when set, feeds the queue gauges at scrape time.
	Stats store.StatsReader
	// Destinations are the configured destination names (the gauges' label
	// values).
	Destinations []string
	// Sources are the configured source names. Every series of a known,
	// bounded label set (each source × outcome, destination × result,
	// destination × status, alert result) exists from the start at 0, so
	// that a dashboard shows 0 rather than "No data" and rate() sees the
	// first increment.
	Sources []string
	// Pauses, when set, feeds anyhook_destination_paused at scrape time.
	Pauses PauseReader
	// ScrapeTimeout bounds the store queries of one scrape; default 5s.
	ScrapeTimeout time.Duration
	Logger        *slog.Logger
	// Runtime adds the Go runtime and process collectors; the gateway sets
	// it, tests may leave it off.
	Runtime bool
}

// PauseReader reads who paused which destination: a person
// (store.Operator.SetPaused) or its breaker (auto_pause).
type PauseReader interface {
	Paused(ctx context.Context) (map[string]bool, error)
	Breakers(ctx context.Context) (map[string]store.Breaker, error)
}

// Metrics holds the gateway's collectors.
type Metrics struct {
	reg *prometheus.Registry

	ingest         *prometheus.CounterVec
	shed           *prometheus.CounterVec
	shedTotal      atomic.Int64 // the sum of shed, for the overview
	ingestLatency  *prometheus.HistogramVec
	attempts       *prometheus.CounterVec
	deliveries     *prometheus.CounterVec
	attemptLatency *prometheus.HistogramVec
	rescues        *prometheus.CounterVec
	releases       *prometheus.CounterVec
	alerts         *prometheus.CounterVec
	rejDropped     *prometheus.CounterVec // rejections.go
	events         *prometheus.CounterVec // routing.go
	filterErrors   *prometheus.CounterVec // routing.go
	types          typeLabels             // routing.go
}

// New registers the gateway's metrics on a new registry.
func New(opt Options) *Metrics {
	if opt.Logger == nil {
		opt.Logger = slog.New(slog.DiscardHandler)
	}
	if opt.ScrapeTimeout <= 0 {
		opt.ScrapeTimeout = 5 * time.Second
	}
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		ingest: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anyhook_ingest_requests_total",
			Help: "Webhook requests received, by source and outcome (accepted, duplicate, rejected_signature, invalid, too_large, unknown_source, unavailable, challenge, shed, client_gone).",
		}, []string{"source", "outcome"}),
		shed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anyhook_ingest_shed_total",
			Help: "Webhook requests answered 503 at once because the gateway was over capacity (ingest.max_queue_wait), by source; their providers retry them.",
		}, []string{"source"}),
		ingestLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "anyhook_ingest_duration_seconds",
			Help:    "Time from reading a webhook request to answering it (including the durable commit), by source.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5},
		}, []string{"source"}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anyhook_delivery_attempts_total",
			Help: "Delivery attempts with a recorded outcome, by destination, result (success, failure) and outcome (answered; no_answer: sent, then a timeout or reset, the handler may have run; not_sent).",
		}, []string{"destination", "result", "outcome"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anyhook_deliveries_total",
			Help: "Deliveries that reached an outcome, by destination and outcome (delivered, retry, dead).",
		}, []string{"destination", "outcome"}),
		attemptLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "anyhook_delivery_attempt_duration_seconds",
			Help:    "Duration of delivery attempts (request to response or error), by destination.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"destination"}),
		rescues: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anyhook_rescues_total",
			Help: "Expired claims handled by the rescuer, by destination and new status (pending = reclaimed, held, dead).",
		}, []string{"destination", "status"}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anyhook_releases_total",
			Help: "Claims given back unsent, pending again with their attempt not counted, by destination and reason (lease: the claim came back with too little of its lease left to send it; breaker: its destination was paused by its breaker, auto_pause, before it was sent).",
		}, []string{"destination", "reason"}),
		alerts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "anyhook_alerts_sent_total",
			Help: "Alert messages posted to alert channels, by result (ok, error).",
		}, []string{"result"}),
	}
	m.reg.MustRegister(m.ingest, m.shed, m.ingestLatency, m.attempts, m.deliveries, m.attemptLatency, m.rescues, m.releases, m.alerts)
	m.reg.MustRegister(&queueCollector{stats: opt.Stats, dests: opt.Destinations, timeout: opt.ScrapeTimeout, log: opt.Logger})
	if opt.Pauses != nil {
		m.reg.MustRegister(&pauseCollector{pauses: opt.Pauses, dests: opt.Destinations, timeout: opt.ScrapeTimeout, log: opt.Logger})
	}
	if opt.Runtime {
		m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	m.zero(opt.Sources, opt.Destinations)
	m.registerRejections()
	m.registerRouting(opt.Sources, opt.Destinations)
	return m
}

// IngestOutcomes are the outcome label values of
// anyhook_ingest_requests_total for a configured source;
// ingest.OutcomeUnknownSource comes only with source "".
var IngestOutcomes = []string{
	ingest.OutcomeAccepted, ingest.OutcomeDuplicate, ingest.OutcomeRejectedSignature, ingest.OutcomeInvalid,
	ingest.OutcomeTooLarge, ingest.OutcomeUnavailable, ingest.OutcomeChallenge, ingest.OutcomeShed, ingest.OutcomeClientGone,
}

// zero creates every series of a known label combination at 0 (see
// Options.Sources).
func (m *Metrics) zero(sources, destinations []string) {
	for _, s := range sources {
		for _, o := range IngestOutcomes {
			m.ingest.WithLabelValues(s, o)
		}
		m.ingestLatency.WithLabelValues(s)
		m.shed.WithLabelValues(s)
	}
	m.ingest.WithLabelValues("", ingest.OutcomeUnknownSource)
	for _, d := range destinations {
		// A success is always answered; a failure is any outcome the
		// engine records (unknown is the rescuer's, counted by rescues).
		m.attempts.WithLabelValues(d, "success", anyhook.OutcomeAnswered)
		for _, o := range []string{anyhook.OutcomeAnswered, anyhook.OutcomeNoAnswer, anyhook.OutcomeNotSent} {
			m.attempts.WithLabelValues(d, "failure", o)
		}
		for _, o := range []string{"delivered", "retry", "dead"} {
			m.deliveries.WithLabelValues(d, o)
		}
		m.attemptLatency.WithLabelValues(d)
		for _, st := range []anyhook.DeliveryStatus{anyhook.StatusPending, anyhook.StatusHeld, anyhook.StatusDead} {
			m.rescues.WithLabelValues(d, string(st))
		}
		m.releases.WithLabelValues(d, delivery.ReleaseLease)
		m.releases.WithLabelValues(d, delivery.ReleaseBreaker)
	}
	for _, r := range []string{"ok", "error"} {
		m.alerts.WithLabelValues(r)
	}
}

// Registry is the registry the metrics live in.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg, ErrorHandling: promhttp.ContinueOnError})
}

// Ingested implements ingest.Observer.
func (m *Metrics) Ingested(source, outcome string, took time.Duration) {
	m.ingest.WithLabelValues(source, outcome).Inc()
	m.ingestLatency.WithLabelValues(source).Observe(took.Seconds())
	if outcome == ingest.OutcomeShed {
		m.shed.WithLabelValues(source).Inc()
		m.shedTotal.Add(1)
	}
}

// WatchAdmission reports, at scrape time, what ingest's admission judges
// by: the commit rate, the requests in progress and whether the bound
// is halved (ingest.Handler.Admission). Call it once.
func (m *Metrics) WatchAdmission(admission func() ingest.Admission) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "anyhook_ingest_commit_rate",
			Help: "The store's recent commit rate, events per second, by which admission (ingest.max_queue_wait) estimates the wait; 0 while not known.",
		}, func() float64 { return admission().Pace }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "anyhook_ingest_in_progress",
			Help: "Webhook requests being answered, their body read.",
		}, func() float64 { return float64(admission().InProgress) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "anyhook_ingest_bound_halved",
			Help: "1 while the requests recorded were late and those in progress are judged against half of ingest.max_queue_wait, else 0.",
		}, func() float64 {
			if admission().Halved {
				return 1
			}
			return 0
		}),
	)
}

// Shed is how many requests this process shed since it started.
func (m *Metrics) Shed() int64 { return m.shedTotal.Load() }

// Attempted implements delivery.Observer.
func (m *Metrics) Attempted(destination string, status anyhook.DeliveryStatus, a anyhook.Attempt) {
	m.attemptLatency.WithLabelValues(destination).Observe(a.Duration.Seconds())
	result, outcome := "failure", "retry"
	switch status {
	case anyhook.StatusDelivered:
		result, outcome = "success", "delivered"
	case anyhook.StatusDead:
		outcome = "dead"
	}
	m.attempts.WithLabelValues(destination, result, store.OutcomeOf(a)).Inc()
	m.deliveries.WithLabelValues(destination, outcome).Inc()
}

// Rescued implements delivery.Observer.
func (m *Metrics) Rescued(destination string, status anyhook.DeliveryStatus) {
	m.rescues.WithLabelValues(destination, string(status)).Inc()
}

// Released implements delivery.Observer.
func (m *Metrics) Released(destination, reason string) {
	m.releases.WithLabelValues(destination, reason).Inc()
}

// AlertTransport wraps rt, the transport of the alert notifier's client,
// so that every alert message posted through it is counted.
func (m *Metrics) AlertTransport(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		resp, err := rt.RoundTrip(r)
		if err != nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
			m.alerts.WithLabelValues("error").Inc()
		} else {
			m.alerts.WithLabelValues("ok").Inc()
		}
		return resp, err
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// queueCollector reads the queue gauges from the store at scrape time.
type queueCollector struct {
	stats   store.StatsReader
	dests   []string
	timeout time.Duration
	log     *slog.Logger
}

var (
	depthDesc = prometheus.NewDesc("anyhook_queue_depth",
		"Unfinished deliveries by destination and status (pending, retrying, delivering, held, dead, paused), read from the store at scrape time.",
		[]string{"destination", "status"}, nil)
	oldestDesc = prometheus.NewDesc("anyhook_oldest_pending_age_seconds",
		"Age of the oldest pending delivery (0 when none), read from the store at scrape time.", nil, nil)
	overdueDesc = prometheus.NewDesc("anyhook_oldest_due_age_seconds",
		"How long the destination's most overdue pending delivery has been due without being claimed (0 when none is due, or the destination is paused). A working dispatcher claims within delivery.poll_interval; more is a delivery nobody picks up.",
		[]string{"destination"}, nil)
	lastDeliveredDesc = prometheus.NewDesc("anyhook_last_delivered_timestamp_seconds",
		"When the destination's latest successful delivery finished (Unix time).", []string{"destination"}, nil)
	scrapeErrDesc = prometheus.NewDesc("anyhook_store_scrape_error",
		"1 when the queue gauges could not be read from the store at this scrape.", nil, nil)
)

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- depthDesc
	ch <- oldestDesc
	ch <- overdueDesc
	ch <- lastDeliveredDesc
	ch <- scrapeErrDesc
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	qs, err := c.stats.QueueStats(ctx, c.dests)
	if err != nil {
		c.log.Warn("metrics: reading queue stats", "err", err)
		ch <- prometheus.MustNewConstMetric(scrapeErrDesc, prometheus.GaugeValue, 1)
		return
	}
	ch <- prometheus.MustNewConstMetric(scrapeErrDesc, prometheus.GaugeValue, 0)
	seen := map[string]bool{}
	for _, d := range c.dests {
		seen[d] = true
		ch <- prometheus.MustNewConstMetric(overdueDesc, prometheus.GaugeValue, qs.OverdueFor(d).Seconds(), d)
		for _, st := range store.UnfinishedStatuses {
			ch <- prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(qs.Depth[d][st]), d, string(st))
		}
	}
	// Destinations the config does not name that still have deliveries
	// (orphaned: removed from the config) are exactly what "due, and
	// nobody picks it up" is about: their due time is looked up too.
	var orphans []string
	for d, m := range qs.Depth {
		if !seen[d] && m[anyhook.StatusPending]+m[anyhook.StatusRetrying] > 0 {
			orphans = append(orphans, d)
		}
	}
	if len(orphans) > 0 {
		if o, err := c.stats.QueueStats(ctx, orphans); err != nil {
			c.log.Warn("metrics: reading queue stats", "err", err)
		} else {
			if qs.DueSince == nil {
				qs.DueSince = map[string]time.Time{}
			}
			for _, d := range orphans {
				if t, ok := o.DueSince[d]; ok {
					qs.DueSince[d] = t
				}
			}
		}
	}
	for d, m := range qs.Depth {
		if seen[d] {
			continue
		}
		ch <- prometheus.MustNewConstMetric(overdueDesc, prometheus.GaugeValue, qs.OverdueFor(d).Seconds(), d)
		for st, n := range m {
			ch <- prometheus.MustNewConstMetric(depthDesc, prometheus.GaugeValue, float64(n), d, string(st))
		}
	}
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, qs.OldestPendingAge().Seconds())
	for d, t := range qs.LastDelivered {
		ch <- prometheus.MustNewConstMetric(lastDeliveredDesc, prometheus.GaugeValue, float64(t.UnixNano())/1e9, d)
	}
}

// pauseCollector reads, at scrape time, which destinations are paused
// and by whom.
type pauseCollector struct {
	pauses  PauseReader
	dests   []string
	timeout time.Duration
	log     *slog.Logger
}

var pausedDesc = prometheus.NewDesc("anyhook_destination_paused",
	"1 while the destination is paused, by a person (by=\"person\": the pause action) or by its breaker (by=\"breaker\": auto_pause, it kept failing); read from the store at scrape time.",
	[]string{"destination", "by"}, nil)

func (c *pauseCollector) Describe(ch chan<- *prometheus.Desc) { ch <- pausedDesc }

func (c *pauseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	paused, err := c.pauses.Paused(ctx)
	if err != nil {
		c.log.Warn("metrics: reading paused destinations", "err", err)
		return
	}
	breakers, err := c.pauses.Breakers(ctx)
	if err != nil {
		c.log.Warn("metrics: reading breakers", "err", err)
		return
	}
	one := func(b bool) float64 {
		if b {
			return 1
		}
		return 0
	}
	for _, d := range c.dests {
		_, tripped := breakers[d]
		ch <- prometheus.MustNewConstMetric(pausedDesc, prometheus.GaugeValue, one(paused[d]), d, "person")
		ch <- prometheus.MustNewConstMetric(pausedDesc, prometheus.GaugeValue, one(tripped), d, "breaker")
	}
}

// RequireToken lets a scrape through only with "Authorization: Bearer
// <token>" (Prometheus: authorization: {credentials: …}) of a token with
// scope admin or read: 401 without one, 403 for another (a pull token).
// No tokens let everything through, as the admin API does on a loopback
// listener.
func RequireToken(tokens *auth.Tokens, next http.Handler) http.Handler {
	if tokens.Off() {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := auth.Bearer(r)
		p, ok := tokens.Resolve(tok)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="anyhook"`)
			http.Error(w, "metrics need a token with scope admin or read: Authorization: Bearer <token>", http.StatusUnauthorized)
			return
		}
		if !p.CanRead() {
			http.Error(w, "metrics need a token with scope admin or read; "+p.Describe()+" is not one", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}
