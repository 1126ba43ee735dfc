package gateway

import (
	"net/http"
	"strings"
)

// Listener names which listener a route belongs to when admin.listen is
// set (docs/deploy.md): ingest faces the internet, admin stays private.
type Listener string

// The listeners a route can be on.
const (
	OnIngest Listener = "ingest" // listen: webhooks only
	OnAdmin  Listener = "admin"  // admin.listen: API, dashboard, metrics, readiness
	OnBoth   Listener = "both"   // liveness, asked on either
)

// Route is one pattern of the gateway's HTTP handler and the listener it
// is served on. Every handler the gateway serves is registered from its
// route table, so a route added later declares its listener or does not
// exist (TestListenerSplit probes them all).
type Route struct {
	Pattern string // an http.ServeMux pattern
	On      Listener
	handler http.Handler
}

// Routes is the gateway's route table, in registration order.
func (g *Gateway) Routes() []Route { return g.routes }

// muxFor registers on one mux the routes served on listener on; the
// patterns of every other route answer 404 there (by path, whatever the
// method, so that no other pattern, such as the dashboard's catch-all,
// answers for them). With on empty, every route is served: one listener
// serves everything (no admin.listen).
func muxFor(routes []Route, on Listener) *http.ServeMux {
	mux := http.NewServeMux()
	notFound := http.NotFoundHandler()
	served := map[string]bool{}
	for _, r := range routes {
		if on == "" || r.On == on || r.On == OnBoth {
			mux.Handle(r.Pattern, r.handler)
			served[r.Pattern] = true
		}
	}
	blocked := map[string]bool{}
	for _, r := range routes {
		if served[r.Pattern] {
			continue
		}
		path := r.Pattern
		if _, p, ok := strings.Cut(path, " "); ok {
			path = p
		}
		// "/webhooks/{source}" blocks the subtree "/webhooks/".
		path, _, _ = strings.Cut(path, "{")
		if !served[path] && !blocked[path] {
			mux.Handle(path, notFound)
			blocked[path] = true
		}
	}
	return mux
}
