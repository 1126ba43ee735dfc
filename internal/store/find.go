package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

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

// Resolver reads what Resolve needs.
type Resolver interface {
	EventGetter
	ListEvents(ctx context.Context, f EventFilter) ([]anyhook.Event, string, error)
}

// Found is the event a pasted id names (Resolve).
type Found struct {
	Event   anyhook.Event
	Matched string            // MatchedEventID, MatchedDeliveryID or MatchedProviderEventID
	Via     *anyhook.Delivery // the delivery a delivery id named
}

// AmbiguousError is a provider event id that several events have: a
// provider's ids are unique within one source only. Candidates are the
// events (without their deliveries), newest first within each source.
type AmbiguousError struct {
	ID         string
	Candidates []anyhook.Event
}

func (e *AmbiguousError) Error() string {
	var matches []string
	for _, c := range e.Candidates {
		matches = append(matches, fmt.Sprintf("%s in source %s (received %s)", c.ID, c.Source, c.ReceivedAt.UTC().Format(time.RFC3339)))
	}
	return fmt.Sprintf("provider event id %q matches %d events: %s", e.ID, len(e.Candidates), strings.Join(matches, ", "))
}

// Sources are the sources of the candidates, in order, once each.
func (e *AmbiguousError) Sources() []string {
	var out []string
	for _, c := range e.Candidates {
		if !slices.Contains(out, c.Source) {
			out = append(out, c.Source)
		}
	}
	return out
}

// WrongSourceError is an AnyHook event id or delivery id of an event from
// another source than the one the caller named. It is anyhook.ErrInvalid.
type WrongSourceError struct {
	ID, Matched  string // the id, and which id it is (Matched*)
	Source, Want string // the event's source, the one named
}

func (e *WrongSourceError) Error() string {
	what := "event id"
	if e.Matched == MatchedDeliveryID {
		what = "delivery id"
	}
	return fmt.Sprintf("%s %s is of an event from source %q, not %q", what, e.ID, e.Source, e.Want)
}

func (e *WrongSourceError) Is(target error) bool { return target == anyhook.ErrInvalid }

// Resolve finds the one event id names, whichever id a person has: its
// AnyHook event id, the id of one of its deliveries, or its provider
// event id. The replays of the CLI and of the API resolve alike with it.
// source, when set, is the source the event must be from (a
// *WrongSourceError otherwise) and the one a provider event id is looked
// up in; else a provider event id is looked up in each of sources (the
// configured ones, through their (source, dedup key) index), then, when
// none has it, in any source (one since removed from the config). An id
// several events have as their provider event id is an *AmbiguousError;
// one that names nothing wraps anyhook.ErrNotFound.
func Resolve(ctx context.Context, st Resolver, id, source string, sources []string) (Found, error) {
	ev, matched, via, err := FindByID(ctx, st, id)
	switch {
	case err == nil:
		if source != "" && ev.Source != source {
			return Found{}, &WrongSourceError{ID: id, Matched: matched, Source: ev.Source, Want: source}
		}
		return Found{Event: ev, Matched: matched, Via: via}, nil
	case !errors.Is(err, anyhook.ErrNotFound):
		return Found{}, err
	}
	evs, err := findProviderID(ctx, st, id, source, sources)
	if err != nil {
		return Found{}, err
	}
	switch len(evs) {
	case 0:
		where := ""
		if source != "" {
			where = " in source " + source
		}
		return Found{}, fmt.Errorf("no event has %q as its AnyHook event id, a delivery id or its provider event id%s: %w", id, where, anyhook.ErrNotFound)
	case 1:
		ev, err := st.Event(ctx, evs[0].ID)
		if err != nil {
			return Found{}, err
		}
		return Found{Event: ev, Matched: MatchedProviderEventID}, nil
	}
	return Found{}, &AmbiguousError{ID: id, Candidates: evs}
}

// findProviderID returns the events whose provider event id is id, as
// Resolve looks them up.
func findProviderID(ctx context.Context, st Resolver, id, source string, sources []string) ([]anyhook.Event, error) {
	if source != "" {
		evs, _, err := st.ListEvents(ctx, EventFilter{Source: source, Q: id, Limit: 20})
		return evs, err
	}
	var out []anyhook.Event
	for _, src := range sources {
		evs, _, err := st.ListEvents(ctx, EventFilter{Source: src, Q: id, Limit: 20})
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	if len(out) > 0 {
		return out, nil
	}
	evs, _, err := st.ListEvents(ctx, EventFilter{Q: id, Limit: 20})
	return evs, err
}

// PrefixWindow is how far back one prefix search looks (SearchPrefix):
// an hour holds some 14,000 events at ten million a month, which a search
// reads in about 100 ms.
const PrefixWindow = time.Hour

// Searched says how far back a bounded search looked.
type Searched struct {
	// Complete is set when every event the filter allows was looked at.
	Complete bool
	// BackTo, when not Complete, is the receive time before which nothing
	// was looked at: the same search with Until = BackTo looks further.
	BackTo time.Time
}

// EventLister lists events.
type EventLister interface {
	ListEvents(ctx context.Context, f EventFilter) ([]anyhook.Event, string, error)
}

// SearchPrefix lists the events f.Prefix names (EventFilter.Prefix). No
// index answers a prefix of any of those ids in the lists' order, so it
// looks at the events received in PrefixWindow before f.Until (before now
// when unset) — through the index on receive time — unless f.Since is
// later, and says so.
func SearchPrefix(ctx context.Context, s EventLister, f EventFilter, now time.Time) ([]anyhook.Event, string, Searched, error) {
	until := f.Until
	if until.IsZero() {
		until = now
	}
	from := until.Add(-PrefixWindow)
	sr := Searched{Complete: true}
	if f.Since.IsZero() || f.Since.Before(from) {
		f.Since, sr = from, Searched{BackTo: from}
	}
	evs, next, err := s.ListEvents(ctx, f)
	if err == nil && !sr.Complete {
		sr, err = windowEnd(ctx, s.ListEvents, from)
	}
	return evs, next, sr, err
}
