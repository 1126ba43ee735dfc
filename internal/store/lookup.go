package store

import (
	"context"

	"github.com/anyhook/anyhook"
)

// DeliveryReader reads one delivery by its id (ErrNotFound when there is
// none), without its attempts. Both stores implement it; it lets a person
// paste whichever id they have (see docs/operations.md, "Ids").
type DeliveryReader interface {
	Delivery(ctx context.Context, id string) (anyhook.Delivery, error)
}
