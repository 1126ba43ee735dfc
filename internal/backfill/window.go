package backfill

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// maxWindow bounds a backfill's window: Stripe keeps events for 30 days;
// a longer window (Paddle keeps 90) is read in parts, with from and to.
const maxWindow = 31 * 24 * time.Hour

// Window reads a backfill's window from since, or from and to, as of now:
// the command line and the API read it alike.
func Window(since, from, to string, now time.Time) (start, end time.Time, err error) {
	switch {
	case since != "" && (from != "" || to != ""):
		return start, end, errors.New("give since, or from (and to), not both")
	case since != "":
		d, err := time.ParseDuration(since)
		if err != nil || d <= 0 {
			msg := "since: " + strconv.Quote(since) + " is not a positive duration such as 24h"
			if n, err := strconv.Atoi(strings.TrimSuffix(since, "d")); err == nil && n > 0 && strings.HasSuffix(since, "d") {
				msg += " (days are written in hours: " + strconv.Itoa(24*n) + "h)"
			}
			return start, end, errors.New(msg)
		}
		start = now.Add(-d)
	case from != "":
		if start, err = time.Parse(time.RFC3339, from); err != nil {
			return start, end, errors.New("from: " + strconv.Quote(from) + " is not an RFC 3339 time such as 2026-01-02T15:04:05Z")
		}
		if to != "" {
			if end, err = time.Parse(time.RFC3339, to); err != nil {
				return start, end, errors.New("to: " + strconv.Quote(to) + " is not an RFC 3339 time")
			}
			if !start.Before(end) {
				return start, end, errors.New("from must be before to")
			}
		} else if !start.Before(now) {
			return start, end, errors.New("from: " + strconv.Quote(from) + " is in the future (to defaults to now)")
		}
	case to != "":
		return start, end, errors.New("to needs from: give from (and to), or since")
	default:
		return start, end, errors.New("give since (e.g. 24h) or from (and to)")
	}
	if e := end; now.Sub(start) > maxWindow && (e.IsZero() || e.Sub(start) > maxWindow) {
		return start, end, errors.New("the window is longer than 31 days, the most one backfill reads: split it with from and to (Stripe keeps events 30 days, Paddle 90, GitHub lists 3)")
	}
	return start, end, nil
}
