package admin

import (
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
)

// maxLimit is the largest page a list answers.
const maxLimit = 500

// query reads query parameters, keeping the first error, which names the
// parameter.
type query struct {
	v   url.Values
	err error
}

func (q *query) fail(e *Error) {
	if q.err == nil {
		q.err = e
	}
}

func (q *query) str(name string) string { return strings.TrimSpace(q.v.Get(name)) }

func (q *query) status(name string) anyhook.DeliveryStatus {
	s := anyhook.DeliveryStatus(q.str(name))
	if s != "" && !s.Valid() {
		q.fail(badParam(name, "unknown status %q (want pending, delivering, delivered, dead, held, skipped, paused or resolved)", s))
	}
	return s
}

func (q *query) time(name string) time.Time {
	return parseTime(q, name, q.str(name))
}

func parseTime(q *query, name, s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		q.fail(badParam(name, "%q is not an RFC 3339 time such as 2026-01-02T15:04:05Z", s))
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
// rather than a silently unfiltered list.
func (q *query) only(names ...string) {
	for _, name := range slices.Sorted(maps.Keys(q.v)) {
		if !slices.Contains(names, name) {
			q.fail(badParam(name, "unknown query parameter (known: %s)", strings.Join(names, ", ")))
		}
	}
}
