package gateway

import (
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/config"
)

// TestSequenceInterval: on SQLite the log is sequenced every
// sqliteSequenceInterval unless a test sets its own; PostgreSQL keeps the
// ledger's default (0 here).
func TestSequenceInterval(t *testing.T) {
	for _, tc := range []struct {
		database string
		set      time.Duration
		want     time.Duration
	}{
		{"sqlite:/var/lib/anyhook/anyhook.db", 0, sqliteSequenceInterval},
		{"sqlite:/var/lib/anyhook/anyhook.db", time.Hour, time.Hour},
		{"postgres://postgres@127.0.0.1:5432/anyhook", 0, 0},
		{"postgresql://postgres@127.0.0.1:5432/anyhook", 0, 0},
		{"postgresql://postgres@127.0.0.1:5432/anyhook", time.Hour, time.Hour},
	} {
		if got := sequenceInterval(&config.Config{Database: tc.database}, tc.set); got != tc.want {
			t.Errorf("sequenceInterval(%s, %v) = %v, want %v", tc.database, tc.set, got, tc.want)
		}
	}
}
