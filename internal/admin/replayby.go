package admin

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// EventSelection is what a bulk replay by filter or by saved search
// replays the deliveries of: the events of Source (and Type) received in
// its window that Match accepts, in Status when set. The API and the CLI
// (anyhook replay --filter, --search) build it alike.
type EventSelection struct {
	Source, Type string
	Status       anyhook.DeliveryStatus
	Match        store.Matcher
}

// FilterSelection selects the events of source that the CEL expression
// filter accepts; the error names the field filter.
func FilterSelection(source, filter string) (EventSelection, *Error) {
	filter = strings.TrimSpace(filter)
	match, perr := BodyMatcher("", filter)
	if perr != nil {
		return EventSelection{}, perr
	}
	return EventSelection{Source: source, Match: match}, nil
}

// SearchSelection selects the events the saved search named name finds
// (its source, type, status and q of body: or filter:). Its errors name
// the field search: no search by that name (404), or one that is not a
// search inside the bodies (by id, or by nothing but a source: replay
// those by event or by source and status).
func SearchSelection(ctx context.Context, st store.SavedSearches, name string) (EventSelection, error) {
	name = strings.TrimSpace(name)
	ss, err := st.ListSavedSearches(ctx)
	if err != nil {
		return EventSelection{}, err
	}
	var found *store.SavedSearch
	var names []string
	for i := range ss {
		names = append(names, ss[i].Name)
		if ss[i].Name == name {
			found = &ss[i]
		}
	}
	if found == nil {
		known := "none is saved"
		if len(names) > 0 {
			known = "saved: " + strings.Join(names, ", ")
		}
		return EventSelection{}, &Error{Status: http.StatusNotFound, Code: "not_found",
			Message: fmt.Sprintf("search: no saved search is named %q (%s)", name, known)}
	}
	v, err := url.ParseQuery(found.Query)
	if err != nil {
		return EventSelection{}, badParam("search", "saved search %q: its query %q is not URL-encoded parameters", name, found.Query)
	}
	body, filter, ok := BodySearch(v.Get("q"))
	if !ok {
		return EventSelection{}, badParam("search", "saved search %q (%s) does not search inside the bodies (q=body:… or q=filter:…); replay by source and status, or one event by id", name, found.Query)
	}
	match, perr := BodyMatcher(body, filter)
	if perr != nil {
		return EventSelection{}, badParam("search", "saved search %q: %s", name, perr.Message)
	}
	return EventSelection{Source: v.Get("source"), Type: v.Get("type"), Status: anyhook.DeliveryStatus(v.Get("status")), Match: match}, nil
}

// FilterEvents returns the ids of the events sel selects received from
// since to until (now when zero), for a bulk replay. It reads at most
// store.ReplayBodyBudget of them and keeps at most store.MaxFilterReplay:
// a window holding more is refused whole, naming how far back the budget
// reached, so that a replay never covers part of what it was asked for.
// The error names the field (filter, since) as the API's do; the CLI's
// flags have the same names.
func FilterEvents(ctx context.Context, st store.BodyLister, sel EventSelection, since, until, now time.Time) ([]string, error) {
	if until.IsZero() {
		until = now
	}
	b := store.ReplayBodyBudget
	b.Window, b.Matches = until.Sub(since), store.MaxFilterReplay+1
	evs, sr, err := store.SearchBodies(ctx, st, store.EventFilter{Source: sel.Source, Type: sel.Type, Since: since, Until: until}, sel.Match, now, b)
	if err != nil {
		return nil, err
	}
	if len(evs) > store.MaxFilterReplay {
		return nil, badParam("filter", "it matches more than %d events from since to until; replay a shorter window at a time", store.MaxFilterReplay)
	}
	if !sr.Complete {
		return nil, badParam("since", "a replay by filter reads at most %d events (%d MiB) of bodies and spends a filter cost of %d at most, which reached back to %s only; replay a shorter window at a time (until=%s is where this one stopped)",
			b.Rows, b.Bytes>>20, b.Cost, sr.BackTo.UTC().Format(time.RFC3339Nano), sr.BackTo.UTC().Format(time.RFC3339Nano))
	}
	ids := make([]string, len(evs)) // not nil: no event selects no delivery
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	return ids, nil
}
