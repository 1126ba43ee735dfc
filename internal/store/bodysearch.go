package store

import (
	"context"
	"time"

	"github.com/anyhook/anyhook"
)

// BodyBudget bounds what one search inside the bodies looks at, besides
// its time window (PrefixWindow): no index answers "the body contains",
// so every event in the window is read, and a busy hour could hold more
// than a request should read.
type BodyBudget struct {
	Rows  int   // events examined
	Bytes int64 // bytes of body and headers examined
	// Window is how far back before Until the search looks; 0 is
	// PrefixWindow.
	Window time.Duration
	// Matches stops the search once it has this many; 0 is f.Limit (as
	// a page: PageLimit).
	Matches int
}

// MaxFilterReplay bounds the events one bulk replay by a CEL filter
// replays: their ids are a parameter list.
const MaxFilterReplay = 5000

// DefaultBodyBudget bounds one search request: 20,000 events of 2.4 KB
// took 0.55–0.7 s on SQLite here (2 shared cores), so a quarter of that
// keeps a search near the read side's 100–200 ms; a busier hour is
// searched in several requests (back_to).
var DefaultBodyBudget = BodyBudget{Rows: 5_000, Bytes: 12 << 20}

// ReplayBodyBudget bounds what a bulk replay by filter reads: a rare act
// that a person asked for, refused whole beyond it, so larger than a
// search's.
var ReplayBodyBudget = BodyBudget{Rows: 20_000, Bytes: 48 << 20}

// bodyPage is how many events one read of a body search asks for.
const bodyPage = 500

// SearchBodies lists the events f selects whose body and headers match
// says, newest first by receive time: at most f.Limit (plus those received
// in the same instant as the last), looking at the events received in
// PrefixWindow (b.Window) before f.Until (before now when unset), unless
// f.Since is later, and at no more of them than b allows. f.Status and f.Cursor must
// be unset: the search walks receive time, and continues with Until =
// Searched.BackTo.
//
// It stops only between two receive times, so that every event received
// at or after BackTo was looked at (Until is exclusive).
func SearchBodies(ctx context.Context, s EventLister, f EventFilter, match func(*anyhook.Event) bool, now time.Time, b BodyBudget) ([]anyhook.Event, Searched, error) {
	until := f.Until
	if until.IsZero() {
		until = now
	}
	window := b.Window
	if window == 0 {
		window = PrefixWindow
	}
	from := until.Add(-window)
	windowed := false
	if f.Since.IsZero() || f.Since.Before(from) {
		f.Since, windowed = from, true
	}
	f.Until = until
	limit := PageLimit(f.Limit)
	if b.Matches > 0 {
		limit = b.Matches
	}
	f.Limit, f.Cursor, f.Status = bodyPage, "", ""
	var out []anyhook.Event
	var rows int
	var bytes int64
	var last time.Time // receive time of the last event looked at
	for {
		evs, next, err := s.ListEvents(ctx, f)
		if err != nil {
			return nil, Searched{}, err
		}
		for i := range evs {
			ev := &evs[i]
			full := len(out) >= limit || rows >= b.Rows || bytes >= b.Bytes
			if full && !ev.ReceivedAt.Equal(last) {
				return out, Searched{BackTo: last}, nil
			}
			rows++
			bytes += int64(len(ev.Body))
			for k, vs := range ev.Header {
				for _, v := range vs {
					bytes += int64(len(k) + len(v))
				}
			}
			last = ev.ReceivedAt
			if match(ev) {
				out = append(out, *ev)
			}
		}
		if next == "" {
			break
		}
		f.Cursor = next
	}
	if windowed {
		sr, err := windowEnd(ctx, s, from)
		return out, sr, err
	}
	return out, Searched{Complete: true}, nil
}

// windowEnd is how far a search that read its whole window, back to
// from, looked: complete when no event at all was received before from,
// so that "search further" does not step back an hour at a time for ever
// past the first event. One row through the index on receive time; it
// ignores the search's filters, which could make it read every older
// event.
func windowEnd(ctx context.Context, s EventLister, from time.Time) (Searched, error) {
	older, _, err := s.ListEvents(ctx, EventFilter{Until: from, Limit: 1})
	if err != nil {
		return Searched{}, err
	}
	if len(older) == 0 {
		return Searched{Complete: true}, nil
	}
	return Searched{BackTo: from}, nil
}
