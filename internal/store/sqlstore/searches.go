package sqlstore

import (
	"time"

	"github.com/anyhook/anyhook/internal/store"
)

// SaveSearch inserts s unless its name is taken (then it affects no row).
func SaveSearch(d Dialect, s store.SavedSearch) (string, []any) {
	return d.Rebind(`INSERT INTO saved_searches (id, name, query, created_at, created_by) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (name) DO NOTHING`), []any{s.ID, s.Name, s.Query, d.Time(s.CreatedAt), s.CreatedBy}
}

// ListSavedSearches selects every saved search, by name.
const ListSavedSearches = `SELECT id, name, query, created_at, created_by FROM saved_searches ORDER BY name, id`

// ScanSavedSearch scans one row of ListSavedSearches.
func ScanSavedSearch(sc Scanner) (store.SavedSearch, error) {
	var s store.SavedSearch
	var at time.Time
	err := sc.Scan(&s.ID, &s.Name, &s.Query, Time(&at), &s.CreatedBy)
	s.CreatedAt = at
	return s, err
}

// DeleteSavedSearch deletes one saved search by id.
func DeleteSavedSearch(d Dialect) string {
	return d.Rebind(`DELETE FROM saved_searches WHERE id = ?`)
}
