// Package gateway assembles a running AnyHook from a configuration: the
// store, the ingest handler with its group committer, the delivery engine,
// alerts and the admin API, behind one HTTP server. cmd/anyhook runs it;
// end-to-end tests and the bench command run it in-process on port 0.
package gateway

import (
	"context"
	"crypto/tls"
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
	"github.com/anyhook/anyhook/internal/auth"
	"github.com/anyhook/anyhook/internal/backfill"
	"github.com/anyhook/anyhook/internal/buildinfo"
	"github.com/anyhook/anyhook/internal/certs"
	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/dashboard"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/incident"
	"github.com/anyhook/anyhook/internal/ingest"
	"github.com/anyhook/anyhook/internal/metrics"
	"github.com/anyhook/anyhook/internal/rejectlog"
	"github.com/anyhook/anyhook/internal/route"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/throttle"
	"go.opentelemetry.io/otel/trace"
)

// postgresWriters is how many ingest transactions run at once on
// PostgreSQL (SQLite has one writer).
const postgresWriters = 4

// sqliteSequenceInterval is how often the log's sequencer runs on SQLite,
// where it takes the one writer that ingest commits through. Once a
// second, it sequenced a second's events as a burst of back-to-back
// transactions, and the requests that arrived during the burst waited
// for them; ten times a second, a round is a transaction or two
// (BENCHMARKS.md, "The log's sequencer in bursts"). An idle round only
// reads; a round that finds events is one synced transaction.
const sqliteSequenceInterval = 100 * time.Millisecond

// sequenceInterval is the log's sequencing interval for cfg's store: set
// if it is set, else sqliteSequenceInterval on SQLite and 0 (the
// ledger's default) on PostgreSQL, where each round of every process
// takes a lock and sweeps, and whose tail was not measured for this.
func sequenceInterval(cfg *config.Config, set time.Duration) time.Duration {
	if _, pg := cfg.PostgresURL(); set != 0 || pg {
		return set
	}
	return sqliteSequenceInterval
}

// Options configure a Gateway.
type Options struct {
	Config *config.Config
	Logger *slog.Logger
	// Store, when set, is used instead of opening Config.Database.
	Store store.Store
	// SequenceInterval, when set, replaces the tamper-evident log's
	// sequencing interval (sqliteSequenceInterval on SQLite, the
	// ledger's default on PostgreSQL): a test that counts the log's
	// statements sets it long, so that the log is sequenced once, at Stop.
	SequenceInterval time.Duration
	// Now is the gateway's one clock, handed to ingest, delivery, the
	// ledger's checkpointer, alerts, the admin API, the dashboard and the
	// limits; default time.Now.
	Now func() time.Time
	// IncidentInterval is how often incidents are written and swept
	// (resolved, escalated by time); default incident.DefaultInterval.
	// Tests shorten it.
	IncidentInterval time.Duration
	// Observer, when set, is told of each delivery attempt and rescue
	// once the store recorded it and the gateway's metrics counted it:
	// tests wait on it (river's test signals) rather than poll the store
	// or /metrics.
	Observer delivery.Observer
	// BackfillSleep, when set, replaces a backfill's waits after a 429
	// (tests).
	BackfillSleep func(ctx context.Context, d time.Duration) error
	// Tracer, when set, traces ingest and delivery (internal/tracing);
	// nil: tracing is off.
	Tracer trace.TracerProvider
}

// Gateway is one running AnyHook process.
type Gateway struct {
	cfg          *config.Config
	log          *slog.Logger
	now          func() time.Time
	store        store.Store
	batcher      *ingest.Batcher
	engine       *delivery.Engine
	backlog      *backlogWatch // pull destinations' pull_backlog alerts
	alerts       *alert.Notifier
	incidents    *incident.Recorder
	rejects      *rejectlog.Log // the log of refused requests
	backfills    *backfill.Jobs // backfills started through the admin API and dashboard
	ledger       *ledgerParts   // the tamper-evident log
	seqInterval  time.Duration
	routes       []Route
	handler      http.Handler // listen's: everything, or ingest only with admin.listen
	adminHandler http.Handler // admin.listen's; nil without it
	ingestTLS    *tls.Config  // nil: plain HTTP
	adminTLS     *tls.Config
	servers      []*http.Server
	// closers close what New opened, in reverse order (close); owned
	// says the store is the gateway's to close.
	closers []func() error
	owned   bool

	mu       sync.Mutex
	serveErr chan error
	stopped  bool
}

// ConfigError is a problem with the configuration (exit status 2).
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// New builds a gateway: it opens the store (applying migrations) and
// checks every source's provider settings. It does not listen yet.
func New(ctx context.Context, opt Options) (*Gateway, error) {
	cfg := opt.Config
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := opt.Now
	if now == nil {
		now = time.Now
	}
	sources, err := ingestSources(cfg)
	if err != nil {
		return nil, &ConfigError{err}
	}
	dests, err := deliveryDestinations(cfg, log)
	if err != nil {
		return nil, &ConfigError{err}
	}
	filters, err := Filters(cfg, cfg.DestinationOrder)
	if err != nil {
		return nil, &ConfigError{err}
	}
	g := &Gateway{cfg: cfg, log: log, now: now, seqInterval: sequenceInterval(cfg, opt.SequenceInterval)}
	g.onClose(func() error { return closePublishers(dests) })
	if err := checkBrokers(ctx, cfg, dests, log); err != nil {
		g.close()
		return nil, &ConfigError{err}
	}
	if err := g.open(ctx, opt); err != nil {
		g.close() // what open took before it failed (the serve lock)
		return nil, err
	}
	if err := g.build(ctx, opt, sources, dests, filters); err != nil {
		g.close() // the error that stopped New is the one to report
		return nil, err
	}
	// A store given in Options is the caller's until New succeeds; from
	// here on Stop closes it as it closes one New opened.
	g.owned = true
	return g, nil
}

// open opens the store, unless opt gives one, and registers its close.
func (g *Gateway) open(ctx context.Context, opt Options) error {
	st := opt.Store
	if st == nil {
		if path, ok := g.cfg.SQLitePath(); ok && path != ":memory:" && !strings.HasPrefix(path, "file:") {
			unlock, err := lockServe(path)
			if err != nil {
				return g.cfg.Errorf("database", "%v", err)
			}
			g.onClose(unlock)
		}
		var err error
		if st, err = Open(ctx, g.cfg, StoreOptions{Logger: g.log}); err != nil {
			return err
		}
		g.owned = true
	}
	g.store = st
	g.onClose(func() error {
		if !g.owned {
			return nil
		}
		return st.Close()
	})
	return nil
}

// onClose registers c, which close runs after those registered later.
func (g *Gateway) onClose(c func() error) { g.closers = append(g.closers, c) }

// close runs the closers, the last registered first, and forgets them.
func (g *Gateway) close() error {
	var errs []error
	for i := len(g.closers) - 1; i >= 0; i-- {
		errs = append(errs, g.closers[i]())
	}
	g.closers = nil
	return errors.Join(errs...)
}

// build makes the gateway's parts over its open store: the metrics, the
// alerts, the ledger, the delivery engine, ingest, the admin API and the
// dashboard, the routes and TLS. It starts nothing.
func (g *Gateway) build(ctx context.Context, opt Options, sources []ingest.Source, dests []delivery.Destination, filters map[string]*route.Filter) error {
	cfg, log, now, st := g.cfg, g.log, g.now, g.store
	mx := metrics.New(metrics.Options{Stats: st, Pauses: st, Sources: cfg.SourceOrder, Destinations: cfg.DestinationOrder, Logger: log, Runtime: true})
	alertClient := &http.Client{Timeout: alert.DefaultTimeout, Transport: http.DefaultTransport.(*http.Transport).Clone()}
	alerts, err := alert.New(alertChannels(cfg), alert.Options{Outbox: st, Window: cfg.AlertWindow.D(), Logger: log, UserAgent: userAgent(), Client: alertClient, Observe: mx.AlertTransport, Now: now})
	if err != nil {
		return &ConfigError{err}
	}
	g.alerts = alerts
	if err := g.newLedger(ctx, st); err != nil {
		return err
	}
	do := deliveryOptions(cfg, dests)
	do.Logger, do.Now = log, now
	if cfg.AlertDeliveryDead {
		do.OnDead = func(d anyhook.Delivery) { g.alert(alert.DeliveryDead, d) }
	}
	do.OnHeld = func(d anyhook.Delivery) { g.alert(alert.DeliveryHeld, d) }
	// Incidents, not per-delivery alerts, tell of failing destinations:
	// the recorder batches the attempts into the store off the
	// delivery path, and alerts on each change the store reports.
	g.incidents = incident.New(incident.Options{Store: st, Policy: incidentPolicy(cfg), OnChange: g.incidentAlert, Now: now, Logger: log,
		Interval: opt.IncidentInterval})
	do.OnAttempt = func(dest, eventID string, status anyhook.DeliveryStatus, a anyhook.Attempt) {
		g.incidents.Attempted(dest, eventID, status == anyhook.StatusDelivered, a)
	}
	do.OnBreaker = func(dest string, tripped bool, at time.Time) { g.noteBreaker(dest, tripped, at) }
	do.Observer = mx
	do.Tracer = opt.Tracer
	if opt.Observer != nil {
		do.Observer = observers{mx, opt.Observer}
	}
	g.engine = delivery.New(st, do)
	g.batcher = ingest.NewBatcher(g.engine.ClaimAtIngest(st), 256) // wakes the dispatchers it leaves work for
	if _, ok := cfg.PostgresURL(); ok {
		// PostgreSQL commits concurrent transactions in parallel: overlap
		// one batch's round trips with the next (measured: BENCHMARKS.md).
		g.batcher.SetWriters(postgresWriters)
	}
	g.rejects = rejectlog.New(st, rejectlog.Options{Logger: log, Observer: mx, Now: now, Identify: requestIDs(cfg)})
	ih := ingest.New(ingest.Options{
		Sources:    sources,
		Recorder:   g.batcher,
		Logger:     log,
		Observer:   mx,
		Rejections: g.rejects,
		Now:        now,
		Tracer:     opt.Tracer,
		// A backfill's Fetched path records without this: it waits.
		MaxQueueWait: cfg.Ingest.MaxQueueWait.D(),
	})
	mx.WatchAdmission(ih.Admission)
	bySource := sourceDestinations(cfg)
	bf := NewBackfiller(cfg, ih, st)
	bf.Sleep = opt.BackfillSleep
	// Log: every process sees the latest backfill of each source.
	g.backfills = backfill.NewJobs(bf.Run, backfill.JobsOptions{Now: now, Logger: log, Log: st})
	tokens := authTokens(cfg)
	api := admin.New(admin.Options{
		Backfill:         backfillAPI{bf, g.backfills},
		Store:            st,
		Tokens:           tokens,
		Sources:          bySource,
		Destinations:     cfg.DestinationOrder,
		Reach:            destinationsReach(cfg),
		Logger:           log,
		Ledger:           g.ledger.reader,
		Filters:          filters,
		Now:              now,
		InOrder:          inOrder(cfg),
		Queued:           g.engine.Wake,
		Health:           g.engine.Health,
		OnIncident:       g.incidentAlert,
		OnBreakerCleared: func(dest, _ string, at time.Time) { g.noteBreaker(dest, false, at) },
		Pull:             g.engine,
	})
	dash, err := dashboard.New(dashboard.Options{
		Store:        st,
		API:          api.Handler(),
		Tokens:       tokens,
		Sources:      bySource,
		CanBackfill:  bf.Check,
		Destinations: cfg.DestinationOrder,
		InOrder:      inOrder(cfg),
		Kinds:        destinationKinds(cfg),
		StaleRules:   staleRules(cfg),
		Health:       g.engine.Health,
		Logger:       log,
		Version:      buildinfo.Version(),
		Ledger:       g.ledgerStatus,
		Shed:         mx.Shed,
		Now:          now,
	})
	if err != nil {
		return err
	}
	g.route(ih, api.Handler(), dash.Handler(), mx, tokens)
	return g.buildTLS()
}

// route builds the route table and the listeners' handlers over ingest,
// the admin API, the dashboard and the metrics.
func (g *Gateway) route(ih, api, dash http.Handler, mx *metrics.Metrics, tokens *auth.Tokens) {
	cfg, log, now := g.cfg, g.log, g.now
	// Without a token, what it would guard answers only requests for a
	// loopback name (DNS rebinding; see loopbackHostsOnly).
	guarded := func(h http.Handler) http.Handler {
		if !tokens.Off() {
			return h
		}
		return loopbackHostsOnly(h, log)
	}
	g.routes = []Route{
		{Pattern: "POST /webhooks/{source}", On: OnIngest, handler: limitSources(ih, sourceBuckets(cfg), now, g.rejects)},
		// Any other method on a webhook URL (a person pasting it into a
		// browser): 405, not the dashboard's login page.
		{Pattern: "/webhooks/{source}", On: OnIngest, handler: http.HandlerFunc(webhookMethod)},
		{Pattern: "/api/", On: OnAdmin, handler: guarded(api)},
		{Pattern: "/healthz", On: OnBoth, handler: api},
		{Pattern: "/readyz", On: OnAdmin, handler: api},
		{Pattern: "GET /metrics", On: OnAdmin, handler: guarded(metrics.RequireToken(tokens, mx.Handler()))},
		{Pattern: "/", On: OnAdmin, handler: guarded(dash)}, // the dashboard: every other path
	}
	failures := throttle.NewFailures(AuthMaxFailures, AuthWindow, authMaxAddresses)
	if cfg.AdminSeparate() {
		g.handler = guardAuth(muxFor(g.routes, OnIngest), failures, now, log)
		g.adminHandler = guardAuth(muxFor(g.routes, OnAdmin), failures, now, log)
	} else {
		g.handler = guardAuth(muxFor(g.routes, ""), failures, now, log)
	}
}

// webhookMethod answers a webhook URL asked with a method other than
// POST.
func webhookMethod(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Allow", http.MethodPost)
	http.Error(w, "405 method not allowed: providers POST webhooks to "+r.URL.Path+"; "+r.Method+" is not served here", http.StatusMethodNotAllowed)
}

func (g *Gateway) alert(kind string, d anyhook.Delivery) {
	msg := fmt.Sprintf("delivery %s of event %s to %s is %s after %d attempts", d.ID, d.EventID, d.Destination, d.Status, d.AttemptCount)
	if kind == alert.DeliveryHeld {
		msg = fmt.Sprintf("delivery %s of event %s to %s is held: its worker stopped mid-attempt (attempt %d) and the destination says hold; resolve it in the dashboard or API", d.ID, d.EventID, d.Destination, d.AttemptCount)
	}
	a := alert.Alert{Kind: kind, Destination: d.Destination, EventID: d.EventID, DeliveryID: d.ID, Message: msg, Time: g.now(),
		URL: g.eventURL(d.EventID)}
	// The source and the provider's event id are what a person searches
	// for at 2 a.m.; an alert goes out without them if the store cannot
	// say at once.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if ev, err := g.store.Event(ctx, d.EventID); err == nil {
		a.Source, a.ProviderEventID = ev.Source, ev.DedupKey
		a.Message += lastError(ev, d.ID) + attemptOutcomes(ev, d.ID) + orderNote(g.cfg.Destinations[d.Destination], kind, ev)
	}
	g.alerts.Notify(context.Background(), a)
}

// lastError is "; last error: …" of delivery id of ev, the first thing
// the person paged for a dead delivery asks, or "" when it has none.
func lastError(ev anyhook.Event, id string) string {
	for _, d := range ev.Deliveries {
		if d.ID == id && len(d.Attempts) > 0 {
			if e := d.Attempts[len(d.Attempts)-1].Error; e != "" {
				return "; last error: " + e
			}
		}
	}
	return ""
}

// attemptOutcomes is "; the handler may have run …" of delivery id of
// ev: how its attempts ended, or "" when it has none.
func attemptOutcomes(ev anyhook.Event, id string) string {
	for _, d := range ev.Deliveries {
		if d.ID == id && len(d.Attempts) > 0 {
			return "; " + anyhook.CountOutcomes(d.Attempts).String()
		}
	}
	return ""
}

// staleRules are the stale-claim rules of cfg's destinations.
func staleRules(cfg *config.Config) map[string]store.StaleRule {
	out := map[string]store.StaleRule{}
	for name, d := range cfg.Destinations {
		out[name] = store.StaleRule{Policy: d.StalePolicy, MaxAttempts: d.MaxAttempts}
	}
	return out
}

// inOrder names the destinations of cfg with order: per_object.
func inOrder(cfg *config.Config) []string {
	var out []string
	for _, name := range cfg.DestinationOrder {
		if cfg.Destinations[name].Order == config.OrderPerObject {
			out = append(out, name)
		}
	}
	return out
}

// orderNote says, for the alert of a dead or held delivery of event ev to
// a destination with order: per_object, what it means for the object's
// later deliveries; "" otherwise.
func orderNote(dest *config.Destination, kind string, ev anyhook.Event) string {
	if dest == nil || dest.Order != config.OrderPerObject || ev.Object == "" {
		return ""
	}
	if kind == alert.DeliveryHeld {
		return fmt.Sprintf("; the later deliveries of object %s (source %s) wait until it is resolved (order: per_object)", ev.Object, ev.Source)
	}
	return fmt.Sprintf("; the next delivery of object %s (source %s) is released (order: per_object)", ev.Object, ev.Source)
}

// eventURL is the event's page in the dashboard, or "" when the config
// does not say where the dashboard is (dashboard_url). It goes to the
// alert channels, for people to open: a user name and password in
// dashboard_url (a proxy's basic auth) are left out, and the browser asks
// for them.
func (g *Gateway) eventURL(eventID string) string {
	if eventID == "" {
		return ""
	}
	return g.dashboardURL("/events/" + url.PathEscape(eventID))
}

// dashboardURL is path under dashboard_url, as eventURL says; "" without
// dashboard_url.
func (g *Gateway) dashboardURL(path string) string {
	if g.cfg.DashboardURL == "" {
		return ""
	}
	base := g.cfg.DashboardURL
	if u, err := url.Parse(base); err == nil && u.User != nil {
		u.User = nil
		base = u.String()
	}
	return strings.TrimSuffix(base, "/") + path
}

// incidentPolicy is the incidents' windows of cfg.
func incidentPolicy(cfg *config.Config) store.IncidentPolicy {
	in := cfg.Incidents
	return store.IncidentPolicy{ResolveAfter: in.ResolveAfter.D(), ReopenWithin: in.ReopenWithin.D(),
		EscalateEvents: in.EscalateEvents, EscalateAfter: in.EscalateAfter.D()}
}

// incidentAlert raises the alert of an incident's change: opened (or
// reopened), escalated, resolved. Its channel incident is keyed by the
// incident's id (PagerDuty's dedup_key).
func (g *Gateway) incidentAlert(c store.IncidentChange) {
	i := c.Incident
	since := i.FirstSeen.UTC().Format(time.RFC3339)
	counts := fmt.Sprintf("%d %s affected, %d failed %s", i.Events, plural(i.Events, "event", "events"), i.Attempts, plural(i.Attempts, "attempt", "attempts"))
	kind := alert.IncidentOpened
	var msg string
	switch c.Change {
	case store.ChangeOpened:
		msg = fmt.Sprintf("%s since %s; %s; latest error: %s", incident.Describe(i.Kind), since, counts, i.LatestError)
	case store.ChangeReopened:
		msg = fmt.Sprintf("%s again (reopened, %d %s); %s since %s; latest error: %s", incident.Describe(i.Kind), i.Reopens,
			plural(i.Reopens, "time", "times"), counts, since, i.LatestError)
	case store.ChangeEscalated:
		kind = alert.IncidentEscalated
		msg = fmt.Sprintf("still %s since %s; %s; latest error: %s", incident.Describe(i.Kind), since, counts, i.LatestError)
	case store.ChangeResolved:
		kind = alert.IncidentResolved
		by := "delivering again"
		if i.ResolvedBy != store.ResolvedByAuto {
			by = "resolved by " + i.ResolvedBy
		}
		msg = fmt.Sprintf("%s (was %s since %s; %s)", by, incident.Describe(i.Kind), since, counts)
	default:
		return
	}
	g.alerts.Notify(context.Background(), alert.Alert{Kind: kind, Destination: i.Destination, IncidentID: i.ID, Message: msg, Time: g.now(),
		URL: g.dashboardURL("/incidents/" + url.PathEscape(i.ID))})
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// AdminHandler is the HTTP handler of admin.listen, nil without it.
func (g *Gateway) AdminHandler() http.Handler { return g.adminHandler }

// TLS is the TLS configuration of listen (nil: plain HTTP) and of
// admin.listen.
func (g *Gateway) TLS() (ingest, admin *tls.Config) { return g.ingestTLS, g.adminTLS }

// buildTLS loads the listeners' certificates (or sets up ACME).
func (g *Gateway) buildTLS() error {
	build := func(t *config.TLS, key string) (*tls.Config, error) {
		o, err := certOptions(g.cfg, t, g.log)
		if err != nil || o == nil {
			return nil, err
		}
		tc, err := certs.Config(*o)
		if err != nil {
			return nil, &ConfigError{g.cfg.Errorf(key, "%v", err)}
		}
		return tc, nil
	}
	var err error
	if g.ingestTLS, err = build(g.cfg.TLS, "tls"); err != nil {
		return err
	}
	if _, pg := g.cfg.PostgresURL(); pg && g.cfg.TLS != nil && g.cfg.TLS.ACME != nil {
		// The ACME storage is a directory and autocert does not lock
		// across processes (docs/deploy.md).
		g.log.Warn("tls.acme on PostgreSQL: one process owns ACME; give tls.acme to this process only, the others TLS from files or a load balancer", "storage", g.cfg.ACMEStoragePath())
	}
	if g.cfg.AdminSeparate() {
		if g.adminTLS, err = build(g.cfg.Admin.TLS, "admin.tls"); err != nil {
			return err
		}
	}
	return nil
}

// Config is the configuration the gateway runs.
func (g *Gateway) Config() *config.Config { return g.cfg }

// Store is the gateway's store.
func (g *Gateway) Store() store.Store { return g.store }

// Listeners are the sockets Start serves on: Ingest is listen's, Admin
// admin.listen's (nil without it).
type Listeners struct {
	Ingest, Admin net.Listener
}

// Start serves on ln (listen's socket) and starts the workers. /healthz
// answers from the moment Start returns. With admin.listen set, use
// StartListeners to serve the admin listener too.
func (g *Gateway) Start(ctx context.Context, ln net.Listener) {
	g.StartListeners(ctx, Listeners{Ingest: ln})
}

// StartListeners serves on ls and starts the workers, over TLS where the
// config says so.
func (g *Gateway) StartListeners(ctx context.Context, ls Listeners) {
	g.alerts.Start(context.WithoutCancel(ctx)) // Stop flushes; a signal must not drop alerts
	g.batcher.Start(ctx)
	g.rejects.Start(ctx)
	g.incidents.Start(context.WithoutCancel(ctx)) // Stop writes what is buffered
	g.engine.Start(ctx)
	g.backlog = &backlogWatch{g: g}
	g.backlog.Start(ctx)
	g.startLedger(ctx)
	g.serveErr = make(chan error, 2)
	g.serve(ls.Ingest, g.handler, g.ingestTLS, "ingest")
	if ls.Admin != nil && g.adminHandler != nil {
		g.serve(ls.Admin, g.adminHandler, g.adminTLS, "admin")
	} else if g.adminHandler != nil {
		g.log.Warn("admin.listen is set but no admin listener was given: the admin API and dashboard are not served")
	}
}

func (g *Gateway) serve(ln net.Listener, h http.Handler, tc *tls.Config, name string) {
	srv := &http.Server{
		Handler:           h,
		TLSConfig:         tc,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
	// A long-polled lease or a lease stream would hold a graceful
	// shutdown until its deadline: they end as it begins.
	srv.RegisterOnShutdown(g.engine.EndPulls)
	g.servers = append(g.servers, srv)
	scheme := "http"
	if tc != nil {
		scheme = "https"
		// ServeTLS adds HTTP/2 and takes the certificate from TLSConfig.
		go func() { g.serveErr <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { g.serveErr <- srv.Serve(ln) }()
	}
	g.log.Info("serving", "listener", name, "addr", ln.Addr().String(), "scheme", scheme, "version", buildinfo.Version())
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
	for _, srv := range g.servers {
		if err := srv.Shutdown(ctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, fmt.Errorf("http shutdown: %w", err))
		}
	}
	g.backfills.Stop(ctx) // before the batcher it records through
	g.batcher.Stop()
	g.rejects.Stop() // writes what is queued
	g.stopLedger()
	g.engine.Stop(g.cfg.Delivery.Shutdown.D())
	if g.backlog != nil {
		g.backlog.Stop()
	}
	g.incidents.Stop() // after the engine's last attempts, before the alerts it raises
	g.alerts.Stop()
	errs = append(errs, g.close())
	g.log.Info("stopped")
	return errors.Join(errs...)
}

// observers tells each of its observers, in order, what the delivery
// engine reports.
type observers []delivery.Observer

func (o observers) Attempted(destination string, status anyhook.DeliveryStatus, a anyhook.Attempt) {
	for _, x := range o {
		x.Attempted(destination, status, a)
	}
}

func (o observers) Rescued(destination string, status anyhook.DeliveryStatus) {
	for _, x := range o {
		x.Rescued(destination, status)
	}
}

func (o observers) Released(destination, reason string) {
	for _, x := range o {
		x.Released(destination, reason)
	}
}

// noteBreaker records on the destination's unresolved incidents that its
// automatic pause tripped or was reset (by a probe, or by a person's
// resume). It runs rarely, on the engine's or the request's goroutine.
func (g *Gateway) noteBreaker(dest string, tripped bool, at time.Time) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The failures that tripped it may still be in the recorder's buffer:
	// written first, so that their incident exists to take the note.
	g.incidents.Flush(ctx)
	if err := g.store.NoteBreaker(ctx, dest, tripped, at); err != nil {
		g.log.Warn("could not record the automatic pause on the destination's incident", "destination", dest, "tripped", tripped, "err", err)
	}
}
