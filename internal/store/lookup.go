package store

import (
	"context"

	"github.com/anyhook/anyhook"
)

// DeliveryReader reads one delivery by its id (ErrNotFound when there is
// none), without its attempts: it lets a person paste whichever id they
// have (see docs/operations.md, "Ids").
type DeliveryReader interface {
	Delivery(ctx context.Context, id string) (anyhook.Delivery, error)
}

// QueueRow is what the dead and held queues show of a delivery beside
// the delivery itself.
type QueueRow struct {
	ProviderEventID string          // its event's dedup key; "" when it has none
	Last            anyhook.Attempt // its latest attempt without the response; Number 0 when none
}

// QueueReader reads the queue rows of the given deliveries (at most
// 500); a delivery that does not exist is absent from the map.
type QueueReader interface {
	QueueRows(ctx context.Context, deliveryIDs []string) (map[string]QueueRow, error)
}

// DestinationDiscarder discards in bulk the deliveries of a destination
// the config no longer names (orphaned).
type DestinationDiscarder interface {
	// DiscardDestination resolves (resolution discarded, by the actor)
	// every pending (paused included), held or dead delivery to
	// destination, records one discard action per delivery, and returns
	// how many. A delivering one is left alone: a process may still hold
	// its claim. Callers refuse a configured destination.
	DiscardDestination(ctx context.Context, destination string, by Actor) (int, error)
}
