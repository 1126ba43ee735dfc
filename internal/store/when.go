package store

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ParseWhen reads a filter's time bound (since, until) the way every
// caller takes it, the command line and the admin API alike: an RFC 3339
// time, or a duration meaning that long before now ("1h", "90m").
func ParseWhen(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q is a negative duration: a duration counts back from now (1h is an hour ago)", s)
		}
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	msg := fmt.Sprintf("%q is neither an RFC 3339 time such as 2026-01-02T15:04:05Z nor a duration ago such as 24h", s)
	if n, err := strconv.Atoi(strings.TrimSuffix(s, "d")); err == nil && n > 0 && strings.HasSuffix(s, "d") {
		msg += fmt.Sprintf(" (days are written in hours: %dh)", 24*n)
	}
	return time.Time{}, errors.New(msg)
}
