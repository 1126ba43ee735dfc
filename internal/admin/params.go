package admin

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// maxLimit is the largest page a list answers.
const maxLimit = 500

// query reads query parameters, keeping the first error, which names the
// parameter. now is the clock a duration ago (since=1h) counts back from.
type query struct {
	v   url.Values
	now time.Time
	err error
}

// query reads r's query parameters.
func (a *API) query(r *http.Request) *query { return &query{v: r.URL.Query(), now: a.now()} }

func (q *query) fail(e *Error) {
	if q.err == nil {
		q.err = e
	}
}

func (q *query) str(name string) string { return strings.TrimSpace(q.v.Get(name)) }

func (q *query) status(name string) anyhook.DeliveryStatus {
	s := anyhook.DeliveryStatus(q.str(name))
	if s != "" && !s.Valid() {
		q.fail(badParam(name, "unknown status %q (want %s)", s, statusList(anyhook.DeliveryStatuses)))
	}
	return s
}

// statusList names statuses for a message: "pending, dead or held".
func statusList(ss []anyhook.DeliveryStatus) string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = string(s)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

func (q *query) time(name string) time.Time {
	return parseTime(q, name, q.str(name))
}

// parseTime reads a since or until: an RFC 3339 time or a duration ago,
// as the command line takes them (store.ParseWhen).
func parseTime(q *query, name, s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := store.ParseWhen(s, q.now)
	if err != nil {
		q.fail(badParam(name, "%s", err))
	}
	return t
}

func (q *query) limit() int {
	s := q.str("limit")
	if s == "" {
		return 0 // the store's default
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > maxLimit {
		q.fail(badParam("limit", "%q is not a whole number from 1 to %d", s, maxLimit))
	}
	return n
}

// window checks that since is before until when both are given.
func (q *query) window(since, until time.Time) {
	if !since.IsZero() && !until.IsZero() && !since.Before(until) {
		q.fail(badParam("until", "must be after since"))
	}
}

// only rejects parameters outside names, so a typo (statu=dead) is an error
// rather than a silently unfiltered list, and one given twice
// (status=dead&status=held), of which only the first would filter, as the
// dashboard's lists do.
func (q *query) only(names ...string) {
	for _, name := range slices.Sorted(maps.Keys(q.v)) {
		if !slices.Contains(names, name) {
			q.fail(badParam(name, "unknown query parameter (known: %s)", strings.Join(names, ", ")))
		} else if n := len(q.v[name]); n > 1 {
			q.fail(badParam(name, "given %d times; a list filters by one value", n))
		}
	}
}
