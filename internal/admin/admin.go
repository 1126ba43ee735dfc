// Package admin is the admin JSON API of the gateway (SPEC §9) as one
// http.Handler: events and their deliveries, replay (one event or in bulk by
// filter), resolving held and dead deliveries, pausing destinations,
// incidents (acknowledge, resolve), the
// health probes and the OpenAPI document at /api/openapi.json. docs/api.md
// shows every endpoint with an example.
//
// # Authentication
//
// Every /api/ route requires "Authorization: Bearer <token>": the
// admin_token or a token of the config's tokens, resolved to a principal
// by internal/auth (constant time, against every token). A missing or
// unknown token answers 401 with WWW-Authenticate: Bearer. A known token
// whose scopes do not allow the request answers 403 (see authorize):
// admin may do everything; read may GET; pull:DESTINATION may only
// replay that destination's events and deliveries. /healthz and /readyz
// need no token.
//
// No token at all (Options.Token and Options.Tokens empty) turns
// authentication off. That is only safe when
// the API listens on a loopback address, and it is the caller's job (the
// serve command) to refuse to start without an admin_token on any other
// address, and to answer only requests addressed to a loopback name there
// (internal/gateway: a web page that rebinds its own name to 127.0.0.1 is
// same-origin, so Origin checks alone do not stop it); this package does
// not know where it is mounted.
//
// # Errors
//
// Handlers return errors; one adapter renders them as
//
//	{"error": {"code": "not_found", "message": "event 0190…: not found"}}
//
// using one table (see classify): anyhook.ErrNotFound → 404, anyhook.ErrInvalid
// and bad input → 400, anyhook.ErrUnavailable → 503, anything else → 500 with
// a generic message. Details of 5xx errors go to the log, never to the
// client.
package admin

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/auth"
	"github.com/anyhook/anyhook/internal/delivery"
	routes "github.com/anyhook/anyhook/internal/route"
	"github.com/anyhook/anyhook/internal/store"
)

// Store is the part of the storage contract (store.Store) the admin API
// uses.
type Store interface {
	Event(ctx context.Context, id string) (anyhook.Event, error)
	ListEvents(ctx context.Context, f store.EventFilter) ([]anyhook.Event, string, error)
	store.BodyLister
	ListDeliveries(ctx context.Context, f store.DeliveryFilter) ([]anyhook.Delivery, string, error)
	Replay(ctx context.Context, eventID string, destinations []string, by store.Actor) ([]anyhook.Delivery, error)
	ReplayDeliveries(ctx context.Context, f store.DeliveryFilter, by store.Actor) (store.BulkReplay, error)
	Resolve(ctx context.Context, deliveryID, action string, by store.Actor) (anyhook.Delivery, error)
	SetPaused(ctx context.Context, destination string, paused bool) error
	Paused(ctx context.Context) (map[string]bool, error)
	// A destination's breaker (auto_pause): shown, and cleared by a
	// person's resume.
	Breakers(ctx context.Context) (map[string]store.Breaker, error)
	ResetBreaker(ctx context.Context, destination string) (bool, error)
	Counts(ctx context.Context) (map[anyhook.DeliveryStatus]int, error)
	Ping(ctx context.Context) error
	WaitsBehind(ctx context.Context, ids []string) (map[string]store.Blocker, error)
	QueueStats(ctx context.Context, destinations []string) (store.QueueStats, error)
	store.DeliveryReader
	store.DestinationDiscarder
	store.SavedSearches
	store.RejectionReader
	store.QueueReader
	IncidentStore
}

// Options configure an API.
type Options struct {
	// Store is required.
	Store Store
	// Token is the admin token: a token named "admin" with scope admin,
	// for callers that have no other (tests). Tokens, when set, is used
	// instead.
	Token string
	// Tokens are the tokens the API accepts. None (and no Token) disables
	// authentication: allowed only on a loopback listener, which the
	// caller enforces (see the package doc).
	Tokens *auth.Tokens
	// Sources maps each source name to the names of its destinations. A
	// replay without a destination goes to every destination of the event's
	// source.
	Sources map[string][]string
	// Destinations are the configured destination names; the destinations
	// named in Sources are added. Pause, resume and replay accept only these.
	Destinations []string
	// Reach says how each destination is reached, without its secrets
	// (GET /api/destinations); nil: nothing to say.
	Reach map[string]Reach
	// Logger receives operator actions and the details of 5xx errors;
	// default: discard.
	Logger *slog.Logger
	// Ready is the readiness probe behind /readyz; default: Store.Ping.
	Ready func(ctx context.Context) error
	// Now is the clock that times failed requests for the log; default
	// time.Now.
	Now func() time.Time
	// Ledger serves /api/log/checkpoint and /api/events/{id}/proof; nil
	// answers them 404.
	Ledger Ledger
	// Filters are the destinations' filters by name (none: every event).
	// A replay without a destination goes only to the destinations whose
	// filter accepts the event, unless it asks to ignore filters.
	Filters map[string]*routes.Filter
	// Backfill starts and watches backfills; nil answers their routes
	// 404.
	Backfill Backfills
	// InOrder are the destinations with order: per_object: their pending
	// deliveries say what they wait behind (waits_behind).
	InOrder []string
	// Queued is told after an action made deliveries due — a replay, a
	// resend, a resume — so that the delivery engine claims them now
	// rather than at its next poll; nil: nobody.
	Queued func()
	// Health is what the delivery engine of this process has seen of each
	// destination (delivery.Engine.Health): a bulk replay into one whose
	// latest attempts failed is refused unless forced. A destination it
	// has not attempted is judged from the store (store.LatestFailure);
	// nil: every one is.
	Health func() map[string]delivery.Health
	// OnBreakerCleared is told when a person's resume cleared a pause by
	// the destination's breaker (auto_pause), by whom, at Now, once it
	// is stored (incidents record the resume); nil: nobody.
	OnBreakerCleared func(destination, actor string, at time.Time)
	// OnIncident is told of an incident a person resolved (its alert);
	// nil: nobody.
	OnIncident func(store.IncidentChange)
	// Pull leases the deliveries of pull destinations; nil answers the
	// lease routes 404.
	Pull Puller
}

// API is the admin API. Create it with New.
type API struct {
	onBreakerCleared func(destination, actor string, at time.Time)
	filters          map[string]*routes.Filter
	store            Store
	tokens           *auth.Tokens // Off: authentication is off
	sources          map[string][]string
	dests            []string // sorted, unique
	known            map[string]bool
	reach            map[string]Reach
	inOrder          map[string]bool // destinations with order: per_object
	log              *slog.Logger
	ready            func(ctx context.Context) error
	now              func() time.Time
	routes           []route
	mux              *http.ServeMux
	ledger           Ledger
	backfills        Backfills
	queued           func()
	health           func() map[string]delivery.Health
	// onIncident: Options.OnIncident.
	onIncident func(store.IncidentChange)
	pull       Puller
}

// queue tells Options.Queued that deliveries became due.
func (a *API) queue() {
	if a.queued != nil {
		a.queued()
	}
}

// route is one endpoint; the route table builds the mux and is what the
// OpenAPI test holds the document against.
type route struct {
	method, path string
	public       bool // no token needed
	h            handlerFunc
}

// New returns the API described by opt.
func New(opt Options) *API {
	a := &API{
		store:   opt.Store,
		sources: opt.Sources,
		known:   map[string]bool{},
		log:     opt.Logger,
		ready:   opt.Ready,
		now:     opt.Now,

		onBreakerCleared: opt.OnBreakerCleared,
		ledger:           opt.Ledger,
		filters:          opt.Filters,
		inOrder:          map[string]bool{},
		backfills:        opt.Backfill,
		queued:           opt.Queued,
		health:           opt.Health,
		onIncident:       opt.OnIncident,
		pull:             opt.Pull,
	}
	for _, d := range opt.InOrder {
		a.inOrder[d] = true
	}
	a.tokens = opt.Tokens
	if a.tokens == nil && opt.Token != "" {
		a.tokens = auth.New([]auth.Token{{Name: auth.AdminTokenName, Secret: opt.Token, Scopes: []string{auth.ScopeAdmin}}})
	}
	for _, d := range opt.Destinations {
		a.known[d] = true
	}
	for _, ds := range opt.Sources {
		for _, d := range ds {
			a.known[d] = true
		}
	}
	a.dests = slices.Sorted(maps.Keys(a.known))
	a.reach = opt.Reach
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.ready == nil {
		a.ready = opt.Store.Ping
	}
	if a.now == nil {
		a.now = time.Now
	}
	a.routes = []route{
		{"GET", "/healthz", true, a.healthz},
		{"GET", "/readyz", true, a.readyz},
		{"GET", "/api/openapi.json", false, a.openapi},
		{"GET", "/api/events", false, a.listEvents},
		{"GET", "/api/events/{id}", false, a.getEvent},
		{"POST", "/api/events/{id}/replay", false, a.replayEvent},
		{"POST", "/api/replay", false, a.bulkReplay},
		{"GET", "/api/searches", false, a.listSearches},
		{"POST", "/api/searches", false, a.saveSearch},
		{"DELETE", "/api/searches/{id}", false, a.deleteSearch},
		{"GET", "/api/deliveries", false, a.listDeliveries},
		{"POST", "/api/deliveries/{id}/resolve", false, a.resolve},
		{"GET", "/api/destinations", false, a.listDestinations},
		{"POST", "/api/destinations/{name}/pause", false, a.pause},
		{"POST", "/api/destinations/{name}/resume", false, a.resume},
		{"POST", "/api/destinations/{name}/discard", false, a.discardDestination},
		{"POST", "/api/destinations/{name}/lease", false, a.lease},
		{"GET", "/api/destinations/{name}/stream", false, a.stream},
		{"POST", "/api/destinations/{name}/ack", false, a.ack},
		{"POST", "/api/destinations/{name}/nack", false, a.nack},
		{"POST", "/api/destinations/{name}/extend", false, a.extend},
		{"GET", "/api/log/checkpoint", false, a.logCheckpoint},
		{"GET", "/api/events/{id}/proof", false, a.eventProof},
		{"GET", "/api/rejections", false, a.listRejections},
		{"GET", "/api/incidents", false, a.listIncidents},
		{"GET", "/api/incidents/{id}", false, a.getIncident},
		{"POST", "/api/incidents/{id}/acknowledge", false, a.acknowledgeIncident},
		{"POST", "/api/incidents/{id}/resolve", false, a.resolveIncident},
		{"POST", "/api/sources/{name}/backfill", false, a.startBackfill},
		{"GET", "/api/sources/{name}/backfill", false, a.getBackfill},
	}
	// A browser page on another site must not drive the API, even where
	// no token is required (a loopback listener) or the browser holds one:
	// cross-origin POSTs are refused. Clients that are not browsers send
	// no Origin or Sec-Fetch-Site and are not affected.
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(a.adapt(func(w http.ResponseWriter, r *http.Request) error {
		return &Error{Status: http.StatusForbidden, Code: "cross_origin", Message: "cross-origin request refused"}
	}))
	a.mux = http.NewServeMux()
	for _, rt := range a.routes {
		h := a.adapt(rt.h)
		if !rt.public {
			h = cop.Handler(a.authenticate(a.authorize(rt, h)))
		}
		a.mux.Handle(rt.method+" "+rt.path, h)
	}
	a.mux.Handle("/api/", a.authenticate(a.adapt(a.noRoute)))
	return a
}

// Handler returns the handler serving /api/, /healthz and /readyz.
func (a *API) Handler() http.Handler { return a.mux }

// authenticate resolves the request's token to a principal and lets it
// through with the principal in its context: 401 without a token or with
// one no configured token matches (the only answers the gateway counts
// as authentication failures). The dashboard calls in-process with its
// session's principal already in the context.
func (a *API) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := auth.FromContext(r.Context()); ok {
			next.ServeHTTP(w, r)
			return
		}
		if a.tokens.Off() {
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), auth.Anonymous)))
			return
		}
		tok, ok := auth.Bearer(r)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="anyhook"`)
			a.render(w, r, &Error{Status: http.StatusUnauthorized, Code: "unauthorized",
				Message: "missing bearer token: send Authorization: Bearer <token>"})
			return
		}
		p, ok := a.tokens.Resolve(tok)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="anyhook", error="invalid_token"`)
			a.render(w, r, &Error{Status: http.StatusUnauthorized, Code: "unauthorized",
				Message: "invalid token"})
			return
		}
		next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	})
}

// replayRoutes are the routes a pull token may call, for its own
// destination (the handlers check which).
var replayRoutes = map[string]bool{
	"POST /api/events/{id}/replay": true,
	"POST /api/replay":             true,
}

// pullRoutes are a pull destination's lease, stream, ack, nack and
// extend: for an admin or a token with scope pull:<that destination>.
var pullRoutes = map[string]bool{
	"POST /api/destinations/{name}/lease":  true,
	"GET /api/destinations/{name}/stream":  true,
	"POST /api/destinations/{name}/ack":    true,
	"POST /api/destinations/{name}/nack":   true,
	"POST /api/destinations/{name}/extend": true,
}

// authorize lets an authenticated request through when its principal's
// scopes allow rt, else answers 403: a pull route needs its
// destination's pull scope (or admin), a GET read (or admin), a replay
// admin or a pull scope (its handler then checks the destination),
// anything else admin.
func (a *API) authorize(rt route, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := auth.FromContext(r.Context())
		var why string
		switch {
		case p.Admin():
		case pullRoutes[rt.method+" "+rt.path]:
			if err := AuthorizePull(r, r.PathValue("name")); err != nil {
				a.render(w, r, err)
				return
			}
		case rt.method == http.MethodGet:
			if !p.CanRead() {
				why = "may not read the admin API"
			}
		case replayRoutes[rt.method+" "+rt.path]:
			if len(p.Pulls()) == 0 {
				why = "may not act (replay, resolve, pause …): that needs scope admin"
			}
		default:
			why = "may not act (replay, resolve, pause …): that needs scope admin"
		}
		if why != "" {
			a.render(w, r, forbidden(p, why))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// forbidden is the 403 of principal p, which may not do what why says.
func forbidden(p auth.Principal, why string) *Error {
	return &Error{Status: http.StatusForbidden, Code: "forbidden", Message: p.Describe() + " " + why}
}

// AuthorizePull is the rule of the pull routes (pullRoutes): nil when
// r's principal may pull from destination (an admin, or a token with
// pull:destination), else a 403 *Error naming the token.
func AuthorizePull(r *http.Request, destination string) error {
	p := principal(r)
	if p.CanPull(destination) {
		return nil
	}
	return forbidden(p, "may not pull from "+destination)
}

// principal is who r comes from (authenticate put it there).
func principal(r *http.Request) auth.Principal {
	p, _ := auth.FromContext(r.Context())
	return p
}

// pullOnly returns the destination a replay by r may target: want, the
// destination the request names ("" for none), for an admin; for a pull
// token, want when it is one of its own, else its one pull destination.
// A pull token naming another destination, or holding several pull
// scopes without naming one, is refused 403.
func pullOnly(r *http.Request, want string) (dest string, err error) {
	p := principal(r)
	if p.Admin() {
		return want, nil
	}
	pulls := p.Pulls()
	switch {
	case want != "" && !p.CanReplay(want):
		return "", forbidden(p, "may replay only into "+strings.Join(pulls, ", ")+", not "+want)
	case want != "":
		return want, nil
	case len(pulls) == 1:
		return pulls[0], nil
	default:
		return "", forbidden(p, "may replay into "+strings.Join(pulls, ", ")+": name one as destination")
	}
}

// noRoute answers an /api/ path no route serves: 405 when another method
// would be served, else 404.
func (a *API) noRoute(w http.ResponseWriter, r *http.Request) error {
	var allow []string
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, pattern := a.mux.Handler(probe); pattern != "/api/" && pattern != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		w.Header().Set("Allow", strings.Join(allow, ", "))
		return &Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed",
			Message: r.Method + " is not allowed on " + r.URL.Path + "; allowed: " + strings.Join(allow, ", ")}
	}
	return &Error{Status: http.StatusNotFound, Code: "unknown_endpoint",
		Message: "no such endpoint: " + r.URL.Path + " (see /api/openapi.json)"}
}

// healthz is liveness: the caller mounts the handler only once ingest is
// ready, so answering at all means live.
func (a *API) healthz(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, err := io.WriteString(w, "ok\n")
	return err
}

// readyz is readiness: 200 while Ready says so, else 503 with a reason.
// The reason is coarse (the probe needs no token); the detail is logged.
func (a *API) readyz(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if err := a.ready(r.Context()); err != nil {
		reason := "not ready"
		if errors.Is(err, anyhook.ErrUnavailable) {
			reason = "not ready: store unavailable"
		}
		a.log.LogAttrs(r.Context(), slog.LevelWarn, "admin: not ready", slog.String("err", err.Error()))
		w.WriteHeader(http.StatusServiceUnavailable)
		_, werr := io.WriteString(w, reason+"\n")
		return werr
	}
	_, err := io.WriteString(w, "ok\n")
	return err
}
