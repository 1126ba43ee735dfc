// Package gateway assembles a running AnyHook from a configuration: the
// store, the ingest handler with its group committer, the delivery engine,
// alerts and the admin API, behind one HTTP server. cmd/anyhook runs it;
// end-to-end tests and the bench command run it in-process on port 0.
package gateway

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

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/admin"
	"github.com/anyhook/anyhook/internal/alert"
	"github.com/anyhook/anyhook/internal/buildinfo"
	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/dashboard"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/ingest"
	"github.com/anyhook/anyhook/internal/metrics"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/rejectlog"
	"github.com/anyhook/anyhook/internal/route"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/postgres"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/throttle"
)

// postgresWriters is how many ingest transactions run at once on
// PostgreSQL (SQLite has one writer).
const postgresWriters = 4

// Version is the gateway's version, from the build (internal/buildinfo).
var Version = buildinfo.Version()

// Options configure a Gateway.
type Options struct {
	Config *config.Config
	Logger *slog.Logger
	// Store, when set, is used instead of opening Config.Database.
	Store store.Store
	// SequenceInterval, when set, replaces the tamper-evident log's
	// sequencing interval (1s): a test that counts the log's statements
	// sets it long, so that the log is sequenced once, at Stop.
	SequenceInterval time.Duration
}

// Gateway is one running AnyHook process.
type Gateway struct {
	cfg         *config.Config
	log         *slog.Logger
	store       store.Store
	batcher     *ingest.Batcher
	engine      *delivery.Engine
	alerts      *alert.Notifier
	rejects     *rejectlog.Log // the log of refused requests; nil when the store keeps none
	ledger      *logParts      // the tamper-evident log; nil when the store keeps none
	seqInterval time.Duration
	srv         *http.Server
	handler     http.Handler

	mu       sync.Mutex
	serveErr chan error
	stopped  bool
}

// ConfigError is a problem with the configuration (exit status 2).
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// CheckConfig reports what New would find wrong in cfg's sources,
// destinations and alerts (a *ConfigError naming the key) without opening
// anything: serve checks it before it listens, so that a mistake in the
// config is reported as such even when the address is in use.
func CheckConfig(cfg *config.Config) error {
	if _, err := buildSources(cfg); err != nil {
		return &ConfigError{err}
	}
	if _, err := buildDestinations(cfg); err != nil {
		return &ConfigError{err}
	}
	if _, err := alert.New(cfg.Alerts, alert.Options{}); err != nil {
		return &ConfigError{err}
	}
	return nil
}

// New builds a gateway: it opens the store (applying migrations) and
// checks every source's provider settings. It does not listen yet.
func New(ctx context.Context, opt Options) (*Gateway, error) {
	cfg := opt.Config
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sources, err := buildSources(cfg)
	if err != nil {
		return nil, &ConfigError{err}
	}
	dests, err := buildDestinations(cfg)
	if err != nil {
		return nil, &ConfigError{err}
	}
	st := opt.Store
	if st == nil {
		st, err = Open(ctx, cfg)
		if err != nil {
			return nil, err
		}
	}
	stats, _ := st.(store.StatsReader)
	mx := metrics.New(metrics.Options{Stats: stats, Sources: cfg.SourceOrder, Destinations: cfg.DestinationOrder, Logger: log, Runtime: true})
	alertClient := &http.Client{Timeout: alert.DefaultTimeout, Transport: mx.AlertTransport(http.DefaultTransport.(*http.Transport).Clone())}
	alerts, err := alert.New(cfg.Alerts, alert.Options{Logger: log, UserAgent: "AnyHook/" + Version, Client: alertClient})
	if err != nil {
		if opt.Store == nil {
			st.Close()
		}
		return nil, &ConfigError{err}
	}
	g := &Gateway{cfg: cfg, log: log, store: st, alerts: alerts, seqInterval: opt.SequenceInterval}
	if err := g.newLog(ctx, st); err != nil {
		if opt.Store == nil {
			st.Close()
		}
		return nil, err
	}
	g.batcher = ingest.NewBatcher(st, 256)
	if _, ok := cfg.PostgresURL(); ok {
		// PostgreSQL commits concurrent transactions in parallel: overlap
		// one batch's round trips with the next (measured: BENCHMARKS.md).
		g.batcher.SetWriters(postgresWriters)
	}
	g.engine = delivery.New(st, delivery.Options{
		Destinations: dests,
		Logger:       log,
		PollInterval: cfg.Delivery.PollInterval.D(),
		Grace:        cfg.Delivery.Grace.D(),
		UserAgent:    "AnyHook/" + Version,
		OnDead:       func(d anyhook.Delivery) { g.alert(alert.DeliveryDead, d) },
		OnHeld:       func(d anyhook.Delivery) { g.alert(alert.DeliveryHeld, d) },
		OnFailing:    func(h delivery.Health) { g.healthAlert(alert.DestinationFailing, h) },
		OnRecovered:  func(h delivery.Health) { g.healthAlert(alert.DestinationRecovered, h) },
		Observer:     mx,
	})
	var rejected ingest.RejectionLog
	if rl, ok := st.(store.RejectionLog); ok {
		g.rejects = rejectlog.New(rl, rejectlog.Options{Logger: log, Observer: mx})
		rejected = g.rejects
	}
	ih := ingest.New(ingest.Options{
		Sources:    sources,
		Recorder:   g.batcher,
		Logger:     log,
		Recorded:   g.engine.Wake,
		Observer:   mx,
		Rejections: rejected,
	})
	bySource := map[string][]string{}
	for _, name := range cfg.SourceOrder {
		bySource[name] = cfg.Sources[name].Destinations
	}
	api := admin.New(admin.Options{
		Store:        st,
		Token:        cfg.AdminToken,
		Sources:      bySource,
		Destinations: cfg.DestinationOrder,
		Logger:       log,
		Log:          g.logAPI(),
		Filters:      Filters(cfg, cfg.DestinationOrder),
	})
	dash, err := dashboard.New(dashboard.Options{
		Store:        st,
		API:          api.Handler(),
		Token:        cfg.AdminToken,
		Sources:      bySource,
		Destinations: cfg.DestinationOrder,
		Health:       g.engine.Health,
		Logger:       log,
		Version:      Version,
		Log:          g.logStatus,
	})
	if err != nil {
		if opt.Store == nil {
			st.Close()
		}
		return nil, err
	}
	// Without a token, what it would guard answers only requests for a
	// loopback name (DNS rebinding; see loopbackHostsOnly).
	guarded := func(h http.Handler) http.Handler {
		if cfg.AdminToken != "" {
			return h
		}
		return loopbackHostsOnly(h, log)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks/{source}", limitSources(ih, cfg, time.Now, rejected))
	mux.Handle("/api/", guarded(api.Handler()))
	mux.Handle("/healthz", api.Handler())
	mux.Handle("/readyz", api.Handler())
	mux.Handle("GET /metrics", guarded(metrics.RequireToken(cfg.AdminToken, mx.Handler())))
	mux.Handle("/", guarded(dash.Handler())) // the dashboard: every other path
	g.handler = guardAuth(mux, throttle.NewFailures(AuthMaxFailures, AuthWindow, authMaxAddresses), time.Now, log)
	return g, nil
}

// Open opens the store that cfg.Database names.
func Open(ctx context.Context, cfg *config.Config) (store.Store, error) {
	if path, ok := cfg.SQLitePath(); ok {
		st, err := sqlite.Open(ctx, path, sqlite.Options{})
		if err != nil {
			return nil, fmt.Errorf("%s: database: %w", cfg.Path, err)
		}
		return st, nil
	}
	if dsn, ok := cfg.PostgresURL(); ok {
		st, err := postgres.Open(ctx, dsn, postgres.Options{})
		if err != nil {
			return nil, fmt.Errorf("%s: database: %w", cfg.Path, err)
		}
		return st, nil
	}
	return nil, cfg.Errorf("database", "%q is neither sqlite:PATH nor postgres://…", cfg.Database)
}

func buildSources(cfg *config.Config) ([]ingest.Source, error) {
	var out []ingest.Source
	for _, name := range cfg.SourceOrder {
		src := cfg.Sources[name]
		p, err := provider.New(src)
		if err != nil {
			key, msg, _ := strings.Cut(err.Error(), ": ")
			return nil, cfg.Errorf("sources."+name+"."+key, "%s", msg)
		}
		out = append(out, ingest.Source{
			Name:         name,
			Provider:     p,
			MaxBody:      src.MaxBody.Bytes(),
			PublicURL:    src.PublicURL,
			Destinations: src.Destinations,
			Filters:      Filters(cfg, src.Destinations),
			// Stale events are delivered, flagged, unless the source
			// says stale: skip (issue 13: skipping by default silently
			// dropped late payment events that share an object).
			StaleSkip:     src.Ordering != nil && src.Ordering.Stale == "skip",
			SecretHeaders: provider.CredentialHeaders(src.Provider),
		})
	}
	return out, nil
}

// Filters returns the filters of the named destinations that have one
// (compiled by config.Validate), by name; nil when none has.
func Filters(cfg *config.Config, destinations []string) map[string]*route.Filter {
	var m map[string]*route.Filter
	for _, d := range destinations {
		if dc := cfg.Destinations[d]; dc != nil && dc.Route != nil {
			if m == nil {
				m = map[string]*route.Filter{}
			}
			m[d] = dc.Route
		}
	}
	return m
}

func buildDestinations(cfg *config.Config) ([]delivery.Destination, error) {
	var out []delivery.Destination
	for _, name := range cfg.DestinationOrder {
		d := cfg.Destinations[name]
		if d.SigningSecret != "" {
			if err := provider.Sign("standard", d.SigningSecret, &provider.Request{}, time.Now()); err != nil {
				return nil, cfg.Errorf("destinations."+name+".signing_secret", "%v", err)
			}
		}
		out = append(out, delivery.Destination{
			Name:          name,
			URL:           d.URL,
			SigningSecret: d.SigningSecret,
			Timeout:       d.Timeout.D(),
			MaxAttempts:   d.MaxAttempts,
			Initial:       d.Backoff.Initial.D(),
			Max:           d.Backoff.Max.D(),
			StalePolicy:   d.StalePolicy,
			DropHeaders:   d.DropHeaders,
			MaxInFlight:   d.MaxInFlight,

			InsecureSkipVerify: d.TLSInsecureSkipVerify,
			Rate:               d.Rate.PerSecond(),
		})
	}
	return out, nil
}

func (g *Gateway) alert(kind string, d anyhook.Delivery) {
	msg := fmt.Sprintf("delivery %s of event %s to %s is %s after %d attempts", d.ID, d.EventID, d.Destination, d.Status, d.AttemptCount)
	if kind == alert.DeliveryHeld {
		msg = fmt.Sprintf("delivery %s of event %s to %s is held: its worker stopped mid-attempt (attempt %d) and the destination says hold; resolve it in the dashboard or API", d.ID, d.EventID, d.Destination, d.AttemptCount)
	}
	a := alert.Alert{Kind: kind, Destination: d.Destination, EventID: d.EventID, DeliveryID: d.ID, Message: msg, Time: time.Now(),
		URL: g.eventURL(d.EventID)}
	// The source and the provider's event id are what a person searches
	// for at 2 a.m.; an alert goes out without them if the store cannot
	// say at once.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if ev, err := g.store.Event(ctx, d.EventID); err == nil {
		a.Source, a.ProviderEventID = ev.Source, ev.DedupKey
	}
	g.alerts.Notify(context.Background(), a)
}

// eventURL is the event's page in the dashboard, or "" when the config
// does not say where the dashboard is (dashboard_url).
func (g *Gateway) eventURL(eventID string) string {
	if g.cfg.DashboardURL == "" || eventID == "" {
		return ""
	}
	return strings.TrimSuffix(g.cfg.DashboardURL, "/") + "/events/" + url.PathEscape(eventID)
}

// healthAlert raises a destination's failing or recovered alert.
func (g *Gateway) healthAlert(kind string, h delivery.Health) {
	msg := fmt.Sprintf("%d consecutive failed attempts since %s; last error: %s", h.Streak, h.Since.UTC().Format(time.RFC3339), h.LastError)
	if kind == alert.DestinationRecovered {
		msg = fmt.Sprintf("delivering again after %d consecutive failed attempts since %s", h.Streak, h.Since.UTC().Format(time.RFC3339))
	}
	g.alerts.Notify(context.Background(), alert.Alert{Kind: kind, Destination: h.Destination, Message: msg, Time: time.Now()})
}

// Handler is the gateway's HTTP handler (ingest, admin API, health,
// metrics, dashboard).
func (g *Gateway) Handler() http.Handler { return g.handler }

// Store is the gateway's store.
func (g *Gateway) Store() store.Store { return g.store }

// Start serves on ln and starts the workers. /healthz answers from the
// moment Start returns.
func (g *Gateway) Start(ctx context.Context, ln net.Listener) {
	g.alerts.Start(context.WithoutCancel(ctx)) // Stop flushes; a signal must not drop alerts
	g.batcher.Start(ctx)
	if g.rejects != nil {
		g.rejects.Start(ctx)
	}
	g.engine.Start(ctx)
	g.startLog(ctx)
	g.srv = &http.Server{
		Handler:           g.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
	g.serveErr = make(chan error, 1)
	go func() { g.serveErr <- g.srv.Serve(ln) }()
	g.log.Info("serving", "addr", ln.Addr().String(), "version", Version)
}

// Err reports a failure of the HTTP server after Start.
func (g *Gateway) Err() <-chan error { return g.serveErr }

// Stop shuts down gracefully: stop accepting, finish in-flight ingest,
// give in-flight deliveries cfg.Delivery.Shutdown, close the store. It is
// idempotent.
func (g *Gateway) Stop(ctx context.Context) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped {
		return nil
	}
	g.stopped = true
	var errs []error
	if g.srv != nil {
		if err := g.srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
		}
	}
	g.batcher.Stop()
	if g.rejects != nil {
		g.rejects.Stop() // writes what is queued
	}
	g.stopLog()
	g.engine.Stop(g.cfg.Delivery.Shutdown.D())
	g.alerts.Stop()
	errs = append(errs, g.store.Close())
	g.log.Info("stopped")
	return errors.Join(errs...)
}
