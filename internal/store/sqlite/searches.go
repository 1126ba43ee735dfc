package sqlite

import (
	"context"
	"database/sql"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// SaveSearch implements store.SavedSearches.
func (s *Store) SaveSearch(ctx context.Context, ss store.SavedSearch) error {
	return s.tx(ctx, "save search", func(tx *sql.Tx) error {
		q, args := sqlstore.SaveSearch(sqlstore.SQLite, ss)
		res, err := tx.ExecContext(ctx, q, args...)
		if err != nil {
			return store.Unavailable("save search", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return store.Unavailable("save search", err)
		} else if n == 0 {
			return store.SearchNameTaken(ss.Name)
		}
		return nil
	})
}

// ListSavedSearches implements store.SavedSearches.
func (s *Store) ListSavedSearches(ctx context.Context) ([]store.SavedSearch, error) {
	out, err := query(ctx, s.r, sqlstore.ScanSavedSearch, sqlstore.ListSavedSearches)
	if err != nil {
		return nil, store.Unavailable("saved searches", err)
	}
	return out, nil
}

// DeleteSavedSearch implements store.SavedSearches.
func (s *Store) DeleteSavedSearch(ctx context.Context, id string) error {
	return s.tx(ctx, "delete saved search", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, sqlstore.DeleteSavedSearch(sqlstore.SQLite), id)
		if err != nil {
			return store.Unavailable("delete saved search", err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return store.Unavailable("delete saved search", err)
		} else if n == 0 {
			return store.SearchNotFound(id)
		}
		return nil
	})
}
