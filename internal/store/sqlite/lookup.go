package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

var _ store.DeliveryReader = (*Store)(nil)

// Delivery implements store.DeliveryReader.
func (s *Store) Delivery(ctx context.Context, id string) (anyhook.Delivery, error) {
	d, err := sqlstore.ScanDelivery(s.r.QueryRowContext(ctx, `SELECT `+deliveryCols+` FROM deliveries WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return d, fmt.Errorf("delivery %s: %w", id, anyhook.ErrNotFound)
	}
	if err != nil {
		return d, store.Unavailable("delivery", err)
	}
	return d, nil
}
