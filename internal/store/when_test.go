package store

import (
	"strings"
	"testing"
	"time"
)

func TestParseWhen(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"1h":                          now.Add(-time.Hour),
		"90m":                         now.Add(-90 * time.Minute),
		"0s":                          now,
		"2026-02-28T10:00:00Z":        time.Date(2026, 2, 28, 10, 0, 0, 0, time.UTC),
		"2026-02-28T10:00:00.5+01:00": time.Date(2026, 2, 28, 9, 0, 0, 5e8, time.UTC),
	} {
		if got, err := ParseWhen(in, now); err != nil || !got.Equal(want) {
			t.Errorf("ParseWhen(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for in, want := range map[string]string{
		"7d":         "(days are written in hours: 168h)",
		"-1h":        "is a negative duration",
		"yesterday":  "is neither an RFC 3339 time",
		"2026-02-28": "is neither an RFC 3339 time",
	} {
		if _, err := ParseWhen(in, now); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseWhen(%q) = %v; want an error with %q", in, err, want)
		}
	}
}
