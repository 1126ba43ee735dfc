package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

var _ store.DeliveryReader = (*Store)(nil)

// Delivery implements store.DeliveryReader.
func (s *Store) Delivery(ctx context.Context, id string) (anyhook.Delivery, error) {
	d, err := sqlstore.ScanDelivery(s.pool.QueryRow(ctx, `SELECT `+deliveryCols+` FROM deliveries WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return d, fmt.Errorf("delivery %s: %w", id, anyhook.ErrNotFound)
	}
	if err != nil {
		return d, store.Unavailable("delivery", err)
	}
	return d, nil
}
