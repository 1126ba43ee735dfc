package sqlite

import (
	"context"

	"github.com/anyhook/anyhook/internal/store"
)

// SetFewRows moves the bound under which a list reads the rows a filter
// selects and sorts them, instead of walking its index in order.
func SetFewRows(s *Store, n int) { s.fewRows = n }

// EventsSQL and DeliveriesSQL are the queries the lists run for f.
func EventsSQL(s *Store, ctx context.Context, f store.EventFilter) (string, []any, error) {
	return s.eventsSQL(ctx, s.r, f, "events.id")
}

func DeliveriesSQL(s *Store, ctx context.Context, f store.DeliveryFilter) (string, []any, error) {
	return s.deliveriesSQL(ctx, s.r, f)
}

// The claims' queries: the plain one and the ordered one's candidates.
var (
	ClaimQuery      = claimQuery
	OrderCandidates = orderCandidates
)
