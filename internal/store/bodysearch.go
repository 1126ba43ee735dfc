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
	Rows int // events examined
	// Bytes bounds the bytes of body and headers (as stored) the search
	// reads, and so holds: an event is read only when it fits in what is
	// left (EventSize first), except in the first receive time looked at.
	Bytes int64
	// Cost bounds the CEL cost (route.CostLimit's units) the filter
	// spends on all the events together; 0 is no bound (no filter).
	Cost uint64
	// Window is how far back before Until the search looks; 0 is
	// PrefixWindow.
	Window time.Duration
	// Matches stops the search once it has this many; 0 is f.Limit (as
	// a page: PageLimit).
	Matches int
	// Time stops the search after a page of bodyPage events that ended
	// this long after it started; 0 is no bound. The other bounds are in
	// rows and bytes; what those cost differs by store, size and machine.
	Time time.Duration
}

// MaxFilterReplay bounds the events one bulk replay by a CEL filter
// replays: their ids are a parameter list.
const MaxFilterReplay = 5000

// DefaultBodyBudget bounds one search request: 20,000 events of 2.4 KB
// took 0.55–0.7 s on SQLite here (2 shared cores), so a quarter of that
// keeps a search near the read side's 100–200 ms; a busier hour is
// searched in several requests (back_to). Its cost, 2,000,000 units, is
// 20 evaluations at the per-evaluation limit (route.CostLimit): a unit
// took some 170 ns here (an evaluation at the limit 17 ms), so a filter
// that spends the limit on every event stops after some 0.35 s, while
// one reading a field or two of the body costs under 100 units an event
// and reaches the 5,000 rows first. At ten million events those 5,000
// took 83–361 ms p95 (a page of 500 bodies 10–36 ms): the time bound
// ends the search after the page (bodyPage) that passes 50 ms, so that a
// search answers within the read side's 100 ms.
var DefaultBodyBudget = BodyBudget{Rows: 5_000, Bytes: 12 << 20, Cost: 2_000_000, Time: 50 * time.Millisecond, Window: BodyWindow}

// BodyWindow is how far back one search inside the bodies looks at most
// (DefaultBodyBudget.Window): on a busy store its budget stops it much
// sooner, but a quiet one (300 events an hour) took a request, and a
// click on "search further", per hour: two weeks back was 336 clicks.
const BodyWindow = 24 * time.Hour

// ReplayBodyBudget bounds what a bulk replay by filter reads: a rare act
// that a person asked for, refused whole beyond it, so larger than a
// search's.
var ReplayBodyBudget = BodyBudget{Rows: 20_000, Bytes: 48 << 20, Cost: 8_000_000}

// bodyPage is how many event sizes one read of a body search asks for.
// It was 500: at that LIMIT, a search with a source and a type (over a
// day's window) was planned on PostgreSQL as a bitmap of every event of
// the pair (424,836 at ten million events, 110-130 ms a page), where at
// 100 the planner walks the window's time index (about 5 ms); a smaller
// page also holds a search nearer its time bound.
const bodyPage = 100

// EventSize is an event as a search inside the bodies first lists it
// (BodyLister.ListEventSizes): its body is read only if it fits.
type EventSize struct {
	ID         string
	ReceivedAt time.Time
	Size       int64 // bytes of body and headers as stored
}

// BodyLister is the read a search inside the bodies walks: sizes first,
// then the bodies that fit its budget (SearchBodies holds the rule).
type BodyLister interface {
	// ListEventSizes is ListEvents (the same filter, order and cursor)
	// reading each event's id, receive time and size only.
	ListEventSizes(ctx context.Context, f EventFilter) ([]EventSize, string, error)
	// EventBodies reads the events ids names as ListEvents does, in any
	// order; one pruned away since is left out.
	EventBodies(ctx context.Context, ids []string) ([]anyhook.Event, error)
}

// Matcher says whether an event matches a search inside the bodies, and
// the CEL cost that spent (0 without a filter).
type Matcher func(*anyhook.Event) (ok bool, cost uint64)

// SearchBodies lists the events f selects whose body and headers match
// says, newest first by receive time: at most f.Limit (plus those received
// in the same instant as the last), looking at the events received in
// PrefixWindow (b.Window) before f.Until (before now when unset), unless
// f.Since is later, and at no more of them than b allows. f.Status and f.Cursor must
// be unset: the search walks receive time, and continues with Until =
// Searched.BackTo.
//
// It stops only between two receive times, so that every event received
// at or after BackTo was looked at (Until is exclusive). An event whose
// body does not fit in what is left of b.Bytes stops it before that
// event's receive time, giving up the events of that instant already
// looked at; only in the first receive time does it read on, or a search
// could never move on (an event larger than the budget is read alone).
func SearchBodies(ctx context.Context, s BodyLister, f EventFilter, match Matcher, now time.Time, b BodyBudget) ([]anyhook.Event, Searched, error) {
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
	w := bodyWalk{b: b, limit: PageLimit(f.Limit)}
	if b.Matches > 0 {
		w.limit = b.Matches
	}
	f.Limit, f.Cursor, f.Status = bodyPage, "", ""
	start := time.Now()
	var out []anyhook.Event
	for {
		page, next, err := s.ListEventSizes(ctx, f)
		if err != nil {
			return nil, Searched{}, err
		}
		// The bodies this page may look at: the walk as if nothing
		// matched (more than it will, never fewer), within the budget.
		plan, ids := w, []string(nil)
		for _, m := range page {
			if look, _, _ := plan.step(m, 0); !look {
				break
			}
			ids = append(ids, m.ID)
		}
		evs, err := s.EventBodies(ctx, ids)
		if err != nil {
			return nil, Searched{}, err
		}
		byID := make(map[string]*anyhook.Event, len(evs))
		for i := range evs {
			byID[evs[i].ID] = &evs[i]
		}
		for _, m := range page {
			look, backTo, drop := w.step(m, len(out))
			if !look {
				for drop && len(out) > 0 && out[len(out)-1].ReceivedAt.Before(backTo) {
					out = out[:len(out)-1]
				}
				return out, Searched{BackTo: backTo}, nil
			}
			ev := byID[m.ID]
			if ev == nil {
				continue // pruned between the two reads
			}
			ok, cost := match(ev)
			w.cost += cost
			if ok {
				out = append(out, *ev)
			}
		}
		if next == "" {
			break
		}
		f.Cursor = next
		// Checked once a page is read, never before the first: a search
		// of a few hundred events does not depend on the machine's speed.
		w.late = b.Time > 0 && time.Since(start) >= b.Time
	}
	if windowed {
		sr, err := windowEnd(ctx, s.ListEventSizes, from)
		return out, sr, err
	}
	return out, Searched{Complete: true}, nil
}

// bodyWalk is where a search inside the bodies is in its budget.
type bodyWalk struct {
	b     BodyBudget
	limit int
	rows  int
	bytes int64
	cost  uint64
	// last is the receive time of the last event looked at, before that
	// of the last one looked at before it.
	last, before time.Time
	late         bool // BodyBudget.Time is spent
}

// step says whether to look at m, having found matches; if not, the
// search stops with BackTo backTo, and drop says to give up the matches
// received at the stopping instant (last), whose events were not all
// looked at.
func (w *bodyWalk) step(m EventSize, matches int) (look bool, backTo time.Time, drop bool) {
	same := w.rows > 0 && m.ReceivedAt.Equal(w.last)
	full := matches >= w.limit || w.rows >= w.b.Rows || w.bytes >= w.b.Bytes || (w.b.Cost > 0 && w.cost >= w.b.Cost) || w.late
	switch {
	case w.rows > 0 && full && !same:
		return false, w.last, false
	case w.rows > 0 && w.bytes+m.Size > w.b.Bytes:
		if !same {
			return false, w.last, false
		}
		if !w.before.IsZero() {
			return false, w.before, true
		}
		// Only the first receive time looked at yet: read on.
	}
	w.rows++
	w.bytes += m.Size
	if !same {
		w.before, w.last = w.last, m.ReceivedAt
	}
	return true, time.Time{}, false
}

// windowEnd is how far a search that read its whole window, back to
// from, looked: complete when no event at all was received before from,
// so that "search further" does not step back an hour at a time for ever
// past the first event. One row through the index on receive time; it
// ignores the search's filters, which could make it read every older
// event.
func windowEnd[T any](ctx context.Context, list func(context.Context, EventFilter) ([]T, string, error), from time.Time) (Searched, error) {
	older, _, err := list(ctx, EventFilter{Until: from, Limit: 1})
	if err != nil {
		return Searched{}, err
	}
	if len(older) == 0 {
		return Searched{Complete: true}, nil
	}
	return Searched{BackTo: from}, nil
}
