package backfill

import (
	"strings"
	"testing"
	"time"
)

// TestWindowErrors: each bad window is refused with the next step in the
// message, and good ones give the window asked for.
func TestWindowErrors(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	past := now.Add(-6 * time.Hour).Format(time.RFC3339)
	future := now.Add(time.Hour).Format(time.RFC3339)
	for _, c := range []struct{ since, from, to, want string }{
		{"2d", "", "", "days are written in hours: 48h"},
		{"-1h", "", "", "not a positive duration"},
		{"0", "", "", "not a positive duration"},
		{"", future, "", "is in the future"},
		{"", "", past, "to needs from"},
		{"", past, now.Add(-7 * time.Hour).Format(time.RFC3339), "from must be before to"},
		{"", "", "", "give since"},
		{"800h", "", "", "split it with from and to"},
	} {
		_, _, err := Window(c.since, c.from, c.to, now)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Window(%q, %q, %q): %v, want an error with %q", c.since, c.from, c.to, err, c.want)
		}
	}
	start, end, err := Window("", past, "", now)
	if err != nil || !start.Equal(now.Add(-6*time.Hour)) || !end.IsZero() {
		t.Errorf("Window(from %s) = %v, %v, %v; want from 6h ago to now", past, start, end, err)
	}
	if start, _, err := Window("6h", "", "", now); err != nil || !start.Equal(now.Add(-6*time.Hour)) {
		t.Errorf("Window(since 6h) = %v, %v", start, err)
	}
}

// TestWindowLongAgo: a window of at most 31 days further back than 31
// days is allowed (Paddle keeps events 90 days).
func TestWindowLongAgo(t *testing.T) {
	now := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	from, to := now.Add(-60*24*time.Hour), now.Add(-40*24*time.Hour)
	if _, _, err := Window("", from.Format(time.RFC3339), to.Format(time.RFC3339), now); err != nil {
		t.Fatalf("a 20-day window 60 days ago: %v", err)
	}
}
