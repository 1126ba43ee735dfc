// Package dashboard is the gateway's web console (SPEC §9), mounted at "/":
// server-rendered pages (html/template) with their CSS and a little
// JavaScript embedded in the binary, no CDN.
//
// Pages: an overview (ingest and delivery rates over the last hour,
// success ratio, queue depth, oldest pending delivery, destination health,
// with small SVG charts rendered on the server), the event list (filters,
// keyset paging, live refresh), event detail (the exact request, every
// delivery with every attempt, replay buttons), the dead and held queues
// with per-row and bulk actions, and the destinations with pause/resume.
//
// # Security
//
// A token with scope admin or read (the admin_token, or one of the
// config's tokens) is typed into a login form once; a pull token is
// refused there. The answer is a session cookie (HttpOnly,
// SameSite=Strict, Secure when the request came over TLS) holding an
// expiry, a nonce and the token's name MACed with a key derived from the
// token, so every instance sharing the token accepts it and changing the
// token ends its sessions. A read token's session sees every page but no
// action: the pages leave the action buttons out and every POST answers
// 403. Logging out revokes the nonce in this process
// and clears the cookie. Every state-changing request (POST) must pass
// net/http's CrossOriginProtection (Sec-Fetch-Site / Origin checks) on top
// of the SameSite cookie. Pages carry a Content-Security-Policy without
// inline scripts or styles, frame-ancestors 'none', X-Frame-Options DENY,
// Referrer-Policy no-referrer and X-Content-Type-Options nosniff.
//
// # Reads and actions
//
// Pages read the store directly (Store; its aggregates, store.StatsReader,
// are index range scans, never a scan of all events). Actions (replay, resolve, pause) go through the admin API
// in-process, so the two can never disagree on validation, and the API's
// log records them the same way.
package dashboard

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/admin"
	"github.com/anyhook/anyhook/internal/auth"
	"github.com/anyhook/anyhook/internal/delivery"
	"github.com/anyhook/anyhook/internal/store"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// Store is the part of the storage contract the pages read.
type Store interface {
	Event(ctx context.Context, id string) (anyhook.Event, error)
	ListEvents(ctx context.Context, f store.EventFilter) ([]anyhook.Event, string, error)
	store.BodyLister
	ListDeliveries(ctx context.Context, f store.DeliveryFilter) ([]anyhook.Delivery, string, error)
	Paused(ctx context.Context) (map[string]bool, error)
	Breakers(ctx context.Context) (map[string]store.Breaker, error)
	WaitsBehind(ctx context.Context, ids []string) (map[string]store.Blocker, error)
	store.DeliveryReader
	store.QueueReader
	store.RejectionReader
	store.StatsReader
	IncidentReader
	ListSavedSearches(ctx context.Context) ([]store.SavedSearch, error)
}

// Options configure a Dashboard.
type Options struct {
	// Store is required.
	Store Store
	// API is the admin API handler; actions are sent to it in-process,
	// as the session's principal (auth.WithPrincipal). Required.
	API http.Handler
	// Token is the admin token: a token named "admin" with scope admin,
	// for callers that have no other (tests). Tokens, when set, is used
	// instead.
	Token string
	// Tokens are the tokens one may log in with: those with scope admin
	// or read (read sees, cannot act). None (and no Token) turns the
	// login off: allowed only where the admin API's authentication is off
	// too (a loopback listener).
	Tokens *auth.Tokens
	// Sources maps each source name to its destinations.
	Sources map[string][]string
	// CanBackfill says why a source cannot be backfilled (nil: it can);
	// the sources page offers the button only where it can. nil: none can.
	CanBackfill func(source string) error
	// Destinations are the configured destination names.
	Destinations []string
	// InOrder are the destinations with order: per_object: their pending
	// deliveries show what they wait behind.
	InOrder []string
	// Kinds are the destinations' types (http, nats, rabbitmq, kafka,
	// pull), shown beside their names; nil: all http.
	Kinds map[string]string
	// StaleRules are the configured destinations' stale-claim rules: an
	// event page says what happens to a claim whose lease runs out.
	StaleRules map[string]store.StaleRule
	// Health reports what the delivery engine has seen of each destination
	// (failure streaks); nil: not shown.
	Health func() map[string]delivery.Health
	// SessionTTL is how long a login lasts; default 12h.
	SessionTTL time.Duration
	// Logger receives logins and failures; default: discard.
	Logger *slog.Logger
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Version is shown in the footer.
	Version string
	// Ledger reports the tamper-evident ledger's state for the overview; nil:
	// not shown.
	Ledger func(ctx context.Context) (LedgerStatus, error)
	// Shed counts the webhook requests this process answered 503 because
	// it was over capacity (ingest.max_queue_wait), since it started;
	// nil: not shown.
	Shed func() int64
}

// LedgerStatus is what the overview says of the tamper-evident log.
type LedgerStatus struct {
	Size         int64     // entries in the latest checkpoint
	CheckpointAt time.Time // zero: none yet
	Problem      string    // the last failed self-check or late event; "" if none
	ProblemAt    time.Time
}

// Dashboard serves the pages. Create it with New.
type Dashboard struct {
	opt      Options
	sources  []string        // sorted
	dests    []string        // sorted, unique
	inOrder  map[string]bool // destinations with order: per_object
	log      *slog.Logger
	now      func() time.Time
	sessions *sessions
	pages    map[string]*template.Template
	handler  http.Handler
}

// New returns the dashboard described by opt.
func New(opt Options) (*Dashboard, error) {
	if opt.Store == nil || opt.API == nil {
		return nil, errors.New("dashboard: Store and API are required")
	}
	d := &Dashboard{opt: opt, log: opt.Logger, now: opt.Now}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.now == nil {
		d.now = time.Now
	}
	if opt.SessionTTL <= 0 {
		d.opt.SessionTTL = 12 * time.Hour
	}
	d.sources = slices.Sorted(maps.Keys(opt.Sources))
	known := map[string]bool{}
	for _, n := range opt.Destinations {
		known[n] = true
	}
	for _, ds := range opt.Sources {
		for _, n := range ds {
			known[n] = true
		}
	}
	d.dests = slices.Sorted(maps.Keys(known))
	d.inOrder = map[string]bool{}
	for _, name := range opt.InOrder {
		d.inOrder[name] = true
	}
	tokens := opt.Tokens
	if tokens == nil && opt.Token != "" {
		tokens = auth.New([]auth.Token{{Name: auth.AdminTokenName, Secret: opt.Token, Scopes: []string{auth.ScopeAdmin}}})
	}
	d.sessions = newSessions(tokens, d.opt.SessionTTL, d.now)
	if err := d.parseTemplates(); err != nil {
		return nil, err
	}
	d.handler = d.routes()
	return d, nil
}

// Handler returns the handler serving every dashboard page and asset.
func (d *Dashboard) Handler() http.Handler { return d.handler }

func (d *Dashboard) parseTemplates() error {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return err
	}
	fm := maps.Clone(funcs)
	fm["orphaned"] = func(destination string) bool { return !slices.Contains(d.dests, destination) }
	agoText := func(t time.Time) string {
		if t.IsZero() {
			return "never"
		}
		if dt := d.now().Sub(t); dt >= 0 {
			return human(dt) + " ago"
		} else {
			return "in " + human(-dt)
		}
	}
	fm["agoText"] = agoText
	// ago is a relative time with the absolute one (RFC 3339, UTC) on
	// hover and for machines.
	fm["ago"] = func(t time.Time) template.HTML {
		if t.IsZero() {
			return "never"
		}
		abs := t.UTC().Format(time.RFC3339)
		return template.HTML(`<time datetime="` + abs + `" title="` + abs + `">` + template.HTMLEscapeString(agoText(t)) + `</time>`)
	}
	base, err := template.New("layout").Funcs(fm).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return fmt.Errorf("dashboard: %w", err)
	}
	d.pages = map[string]*template.Template{}
	for _, n := range names {
		page := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if page == "layout" {
			continue
		}
		t, err := template.Must(base.Clone()).ParseFS(templateFS, n)
		if err != nil {
			return fmt.Errorf("dashboard: %w", err)
		}
		d.pages[page] = t
	}
	return nil
}

// handlerFunc is a page or action: it writes a success itself and returns
// a failure for adapt to render.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

func (d *Dashboard) routes() http.Handler {
	mux := http.NewServeMux()
	assets, _ := fs.Sub(assetFS, "assets")
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", cacheAssets(http.FileServerFS(assets))))
	mux.Handle("GET /login", d.adapt(d.loginPage))
	mux.Handle("POST /login", d.adapt(d.login))
	mux.Handle("POST /logout", d.adapt(d.logout))

	page := func(pattern string, h handlerFunc) {
		hh := d.adapt(h)
		if strings.HasPrefix(pattern, "POST ") {
			hh = d.requireAct(hh) // every POST but login and logout is an action
		}
		mux.Handle(pattern, d.requireSession(hh))
	}
	page("GET /{$}", d.overview)
	page("GET /events", d.events)
	page("GET /events/{id}", d.event)
	page("POST /events/{id}/replay", d.replayEvent)
	page("GET /deliveries", d.deliveries)
	page("POST /deliveries/{id}/resolve", d.resolve)
	page("POST /deliveries/resolve", d.resolveMany)
	page("POST /replay", d.bulkReplay)
	page("POST /searches", d.saveSearch)
	page("POST /searches/{id}/delete", d.deleteSearch)
	page("GET /destinations", d.destinations)
	page("POST /destinations/{name}/{action}", d.setPaused)
	page("GET /rejections", d.rejections)
	page("GET /incidents", d.incidents)
	page("GET /incidents/{id}", d.incidentPage)
	page("POST /incidents/{id}/{action}", d.actIncident)
	page("GET /sources", d.sourcesPage)
	page("POST /sources/{name}/backfill", d.startBackfill)
	page("/", d.notFound)

	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.log.LogAttrs(r.Context(), slog.LevelWarn, "dashboard: cross-origin request refused",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.String("origin", r.Header.Get("Origin")), slog.String("sec_fetch_site", r.Header.Get("Sec-Fetch-Site")))
		d.renderError(w, r, &pageError{Status: http.StatusForbidden,
			Message: "cross-origin request refused: actions must come from the dashboard's own pages"})
	}))
	return securityHeaders(cop.Handler(mux))
}

// contentSecurityPolicy allows nothing but the dashboard's own scripts,
// styles and fetches: no inline script, no inline style, no framing.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Frame-Options", "DENY")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		next.ServeHTTP(w, r)
	})
}

func cacheAssets(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		next.ServeHTTP(w, r)
	})
}

// pageError is a failure with the status and message the person sees.
type pageError struct {
	Status  int
	Message string
}

func (e *pageError) Error() string { return e.Message }

// onlyParams refuses a query parameter a list (or, without names, a
// page) does not read, or one given twice, as the admin API does: a link with a typo or a filter the
// page lacks (/events?destination=ci) would otherwise show the unfiltered
// list as if it were the filtered one. hint, when it has the parameter,
// says where that filter is, given its value.
func onlyParams(v url.Values, hint map[string]func(string) string, names ...string) error {
	for _, name := range slices.Sorted(maps.Keys(v)) {
		if len(v[name]) > 1 && slices.Contains(names, name) {
			return &pageError{http.StatusBadRequest, fmt.Sprintf("%s is given %d times; this list filters by one value", name, len(v[name]))}
		}
		if slices.Contains(names, name) {
			continue
		}
		msg := fmt.Sprintf("this list has no filter %q (it filters by %s)", name, strings.Join(names, ", "))
		if len(names) == 0 {
			msg = fmt.Sprintf("this page has no filter %q: it takes no query parameters", name)
		}
		if h := hint[name]; h != nil {
			msg += "; " + h(v.Get(name))
		}
		return &pageError{http.StatusBadRequest, msg}
	}
	return nil
}

// classify maps err to what the person sees; details of 5xx go to the log.
func classify(err error) *pageError {
	var pe *pageError
	switch {
	case errors.As(err, &pe):
		return pe
	case errors.Is(err, anyhook.ErrNotFound):
		return &pageError{http.StatusNotFound, err.Error()}
	case errors.Is(err, anyhook.ErrInvalid):
		return &pageError{http.StatusBadRequest, err.Error()}
	case errors.Is(err, anyhook.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return &pageError{http.StatusServiceUnavailable, "the store is unavailable; try again"}
	}
	return &pageError{http.StatusInternalServerError, "internal error"}
}

func (d *Dashboard) adapt(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if e := admin.CheckURL(r.URL); e != nil {
			d.renderError(w, r, &pageError{e.Status, e.Message})
			return
		}
		if err := h(w, r); err != nil {
			d.renderError(w, r, err)
		}
	})
}

func (d *Dashboard) renderError(w http.ResponseWriter, r *http.Request, err error) {
	e := classify(err)
	level := slog.LevelDebug
	if e.Status >= 500 && r.Context().Err() == nil {
		level = slog.LevelError
	}
	d.log.LogAttrs(r.Context(), level, "dashboard: request failed", slog.String("method", r.Method),
		slog.String("path", r.URL.Path), slog.Int("status", e.Status), slog.String("err", err.Error()))
	d.render(w, r, e.Status, "error", "Error", e)
}

// view is what every page template gets.
type view struct {
	Title    string
	Nav      string // the active navigation entry
	LoggedIn bool
	AuthOff  bool
	User     string // the name of the token the session logged in with
	ReadOnly bool   // the session may see but not act (scope read)
	Flash    *flash
	Version  string
	Data     any
}

// render executes page into a buffer and writes it with status.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, page, title string, data any) {
	t := d.pages[page]
	p, loggedIn := d.sessions.principal(r)
	v := view{Title: title, Nav: page, LoggedIn: loggedIn, AuthOff: d.sessions.off(),
		Flash: takeFlash(w, r), Version: d.opt.Version, Data: data}
	if loggedIn && !d.sessions.off() {
		v.User, v.ReadOnly = p.Name, !p.CanAct()
	}
	if n, ok := data.(interface{ NavKey() string }); ok {
		v.Nav = n.NavKey()
	}
	var buf strings.Builder
	if err := t.ExecuteTemplate(&buf, "layout", v); err != nil {
		d.log.Error("dashboard: rendering", "page", page, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(buf.String()))
}

// renderPartial executes one named template alone (the live-refreshed
// part of a page).
func (d *Dashboard) renderPartial(w http.ResponseWriter, page, name string, data any) error {
	var buf strings.Builder
	if err := d.pages[page].ExecuteTemplate(&buf, name, data); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	_, err := w.Write([]byte(buf.String()))
	return err
}

func (d *Dashboard) notFound(w http.ResponseWriter, r *http.Request) error {
	return &pageError{http.StatusNotFound, "no such page: " + r.URL.Path}
}
