package store

import (
	"context"
	"errors"
	"slices"

	"github.com/anyhook/anyhook"
)

// Which id of an event a pasted id matched (FindByID).
const (
	MatchedEventID         = "event_id"          // the AnyHook event id: X-AnyHook-Delivery
	MatchedDeliveryID      = "delivery_id"       // one of its deliveries
	MatchedProviderEventID = "provider_event_id" // the dedup key
)

// EventGetter reads one event and one delivery by id.
type EventGetter interface {
	Event(ctx context.Context, id string) (anyhook.Event, error)
	DeliveryReader
}

// FindByID finds the event id names when it is an AnyHook event id or
// the id of one of its deliveries, in that order; the delivery it names
// is returned too. matched is
// MatchedEventID or MatchedDeliveryID. An id that is neither is
// ErrNotFound: look it up as a provider event id (EventFilter.Q).
func FindByID(ctx context.Context, s EventGetter, id string) (ev anyhook.Event, matched string, via *anyhook.Delivery, err error) {
	if id == "" {
		return ev, "", nil, anyhook.ErrNotFound
	}
	ev, err = s.Event(ctx, id)
	if err == nil || !errors.Is(err, anyhook.ErrNotFound) {
		return ev, MatchedEventID, nil, err
	}
	d, err := s.Delivery(ctx, id)
	if err != nil {
		return ev, "", nil, err
	}
	ev, err = s.Event(ctx, d.EventID)
	return ev, MatchedDeliveryID, &d, err
}

// Matches says whether ev, read whole by Store.Event, passes the filter's
// source, status and time window (not Q, Limit or Cursor).
func (f EventFilter) Matches(ev anyhook.Event) bool {
	if f.Source != "" && ev.Source != f.Source {
		return false
	}
	if !f.Since.IsZero() && ev.ReceivedAt.Before(f.Since) {
		return false
	}
	if !f.Until.IsZero() && !ev.ReceivedAt.Before(f.Until) {
		return false
	}
	return f.Status == "" || slices.ContainsFunc(ev.Deliveries, func(d anyhook.Delivery) bool { return d.Status == f.Status })
}

// SearchByID is the first step of a search for Q, whatever id it is: on
// the first page (no cursor), when Q is an AnyHook event id or a delivery
// id of an event the filter passes, that event is the whole answer
// (found true). Otherwise the caller lists by provider event id as
// usual.
func SearchByID(ctx context.Context, s EventGetter, f EventFilter) (anyhook.Event, bool, error) {
	if f.Q == "" || f.Cursor != "" {
		return anyhook.Event{}, false, nil
	}
	ev, _, _, err := FindByID(ctx, s, f.Q)
	switch {
	case errors.Is(err, anyhook.ErrNotFound):
		return ev, false, nil
	case err != nil:
		return ev, false, err
	}
	return ev, f.Matches(ev), nil
}
