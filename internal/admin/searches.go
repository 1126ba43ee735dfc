package admin

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// savedSearchJSON is a saved search as the API shows it.
type savedSearchJSON struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Query     string    `json:"query"`
	CreatedAt time.Time `json:"created_at"`
	CreatedBy string    `json:"created_by"`
}

func toSavedSearch(s store.SavedSearch) savedSearchJSON {
	return savedSearchJSON{ID: s.ID, Name: s.Name, Query: s.Query, CreatedAt: s.CreatedAt.UTC(), CreatedBy: s.CreatedBy}
}

// GET /api/searches
func (a *API) listSearches(w http.ResponseWriter, r *http.Request) error {
	a.query(r).only()
	ss, err := a.store.ListSavedSearches(r.Context())
	if err != nil {
		return err
	}
	out := listJSON[savedSearchJSON]{Items: make([]savedSearchJSON, 0, len(ss))}
	for _, s := range ss {
		out.Items = append(out.Items, toSavedSearch(s))
	}
	return writeJSON(w, http.StatusOK, out)
}

type saveSearchRequest struct {
	Name  string `json:"name"`
	Query string `json:"query"`
}

// POST /api/searches {"name", "query"}
func (a *API) saveSearch(w http.ResponseWriter, r *http.Request) error {
	var req saveSearchRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	s, perr := NewSavedSearch(req.Name, req.Query, a.now())
	if perr != nil {
		return perr
	}
	s.CreatedBy = actor(r, "").Name
	if err := a.store.SaveSearch(r.Context(), s); err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, toSavedSearch(s))
}

// DELETE /api/searches/{id}
func (a *API) deleteSearch(w http.ResponseWriter, r *http.Request) error {
	if err := a.store.DeleteSavedSearch(r.Context(), r.PathValue("id")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// searchKeys are the events list's parameters a saved search keeps.
var searchKeys = []string{"source", "type", "status", "q"}

// NewSavedSearch checks a saved search's name and query (the events
// list's parameters source, type, status and q, URL-encoded; a q of
// body:… or filter:… must compile) and returns it with a new id, created
// at now, its query in a canonical order. The API and the dashboard save
// alike with it; the error names the field.
func NewSavedSearch(name, query string, now time.Time) (store.SavedSearch, *Error) {
	name = strings.TrimSpace(name)
	switch {
	case name == "":
		return store.SavedSearch{}, badParam("name", "required")
	case len(name) > store.MaxSearchName:
		return store.SavedSearch{}, badParam("name", "longer than %d bytes", store.MaxSearchName)
	case store.TextProblem(name) != "":
		return store.SavedSearch{}, badParam("name", "%s", store.TextProblem(name))
	}
	query = strings.TrimPrefix(strings.TrimSpace(query), "?")
	if len(query) > store.MaxSearchQuery {
		return store.SavedSearch{}, badParam("query", "longer than %d bytes", store.MaxSearchQuery)
	}
	v, err := url.ParseQuery(query)
	if err != nil {
		return store.SavedSearch{}, badParam("query", "not URL-encoded parameters: %s", err)
	}
	keep := url.Values{}
	for k, vs := range v {
		if !slices.Contains(searchKeys, k) {
			return store.SavedSearch{}, badParam("query", "unknown parameter %q (a saved search keeps %s)", k, strings.Join(searchKeys, ", "))
		}
		if len(vs) > 1 {
			// The events list reads the first only: keeping it silently
			// would save another search than the one asked for.
			return store.SavedSearch{}, badParam("query", "%s given %d times: give it once", k, len(vs))
		}
		if s := strings.TrimSpace(vs[0]); s != "" {
			keep.Set(k, s)
		}
	}
	if len(keep) == 0 {
		return store.SavedSearch{}, badParam("query", "empty: give at least one of %s", strings.Join(searchKeys, ", "))
	}
	if st := anyhook.DeliveryStatus(keep.Get("status")); st != "" && !st.Valid() {
		return store.SavedSearch{}, badParam("query", "unknown status %q", st)
	}
	if body, filter, ok := BodySearch(keep.Get("q")); ok {
		if _, perr := BodyMatcher(body, filter); perr != nil {
			return store.SavedSearch{}, badParam("query", "%s", perr.Message)
		}
		if keep.Get("status") != "" {
			// GET /api/events refuses the pair: saved, it could never run.
			return store.SavedSearch{}, badParam("query", "a search inside the bodies (q=%s) cannot take status", keep.Get("q"))
		}
	}
	if p := store.TextProblem(keep.Encode()); p != "" {
		return store.SavedSearch{}, badParam("query", "%s", p)
	}
	return store.SavedSearch{ID: store.NewID(), Name: name, Query: keep.Encode(), CreatedAt: now}, nil
}

// BodySearch reads a q that searches inside the bodies: "body:cus_123"
// (the body contains cus_123) or "filter:<CEL>"; ok is false for any
// other q (an id). GET /api/events?q= and the dashboard's search box
// take both.
func BodySearch(q string) (body, filter string, ok bool) {
	if rest, found := strings.CutPrefix(q, "body:"); found {
		return strings.TrimSpace(rest), "", true
	}
	if rest, found := strings.CutPrefix(q, "filter:"); found {
		return "", strings.TrimSpace(rest), true
	}
	return "", "", false
}
