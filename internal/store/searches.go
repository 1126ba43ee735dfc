package store

import (
	"context"
	"fmt"
	"time"

	"github.com/anyhook/anyhook"
)

// SavedSearch is a bookmark of the events list: a name and the list's
// query parameters.
type SavedSearch struct {
	ID   string
	Name string
	// Query is the events list's query parameters, URL-encoded
	// (source=stripe&q=body%3Acus_123), as GET /api/events and the
	// dashboard's /events take them.
	Query     string
	CreatedAt time.Time
	CreatedBy string
}

// MaxSearchName bounds a saved search's name, in bytes.
const MaxSearchName = 100

// MaxSearchQuery bounds a saved search's query, in bytes: a CEL filter
// (route.MaxExpr) and the other parameters, encoded.
const MaxSearchQuery = 16 << 10

// SavedSearches keeps the saved searches.
type SavedSearches interface {
	// SaveSearch records s (its ID and CreatedAt set by the caller); a
	// name already taken is SearchNameTaken (anyhook.ErrInvalid).
	SaveSearch(ctx context.Context, s SavedSearch) error
	// ListSavedSearches returns every saved search, by name.
	ListSavedSearches(ctx context.Context) ([]SavedSearch, error)
	// DeleteSavedSearch removes one; anyhook.ErrNotFound when no search
	// has that id.
	DeleteSavedSearch(ctx context.Context, id string) error
}

// SearchNameTaken is the error of a SaveSearch whose name is taken.
func SearchNameTaken(name string) error {
	return fmt.Errorf("a saved search named %q exists: %w", name, anyhook.ErrInvalid)
}

// SearchNotFound is the error of a DeleteSavedSearch of an unknown id.
func SearchNotFound(id string) error {
	return fmt.Errorf("saved search %s: %w", id, anyhook.ErrNotFound)
}
