package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// SaveSearch implements store.SavedSearches.
func (s *Store) SaveSearch(ctx context.Context, ss store.SavedSearch) error {
	q, args := sqlstore.SaveSearch(sqlstore.Postgres, ss)
	tag, err := s.pool.Exec(ctx, q, args...)
	if err != nil {
		return store.Unavailable("save search", err)
	}
	if tag.RowsAffected() == 0 {
		return store.SearchNameTaken(ss.Name)
	}
	return nil
}

// ListSavedSearches implements store.SavedSearches.
func (s *Store) ListSavedSearches(ctx context.Context) ([]store.SavedSearch, error) {
	rows, err := s.pool.Query(ctx, sqlstore.ListSavedSearches)
	if err != nil {
		return nil, store.Unavailable("saved searches", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.SavedSearch, error) { return sqlstore.ScanSavedSearch(r) })
	if err != nil {
		return nil, store.Unavailable("saved searches", err)
	}
	return out, nil
}

// DeleteSavedSearch implements store.SavedSearches.
func (s *Store) DeleteSavedSearch(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, sqlstore.DeleteSavedSearch(sqlstore.Postgres), id)
	if err != nil {
		return store.Unavailable("delete saved search", err)
	}
	if tag.RowsAffected() == 0 {
		return store.SearchNotFound(id)
	}
	return nil
}
