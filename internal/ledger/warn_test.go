package ledger_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/ledger"
	"github.com/anyhook/anyhook/internal/testkit/syncio"
)

// TestSequencerFailureLoggedOncePerSecond: a sequencer whose every round
// fails (its hashes table is gone) runs rounds every few milliseconds,
// as SQLite's runs every 100 ms, and logs the failure at most once a
// second, not once a round.
func TestSequencerFailureLoggedOncePerSecond(t *testing.T) {
	e := setup(t, backends[0])
	e.ingest(t, 1)
	if _, err := e.raw.Exec(`DROP TABLE ledger_hashes`); err != nil {
		t.Fatal(err)
	}
	var logs syncio.Buffer
	seq := ledger.NewSequencer(e.st, ledger.SequencerOptions{Interval: 2 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	const msg = "ledger: sequencing failed"
	start := time.Now()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	seq.Start(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(logs.String(), msg) == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // a hundred rounds more, all failing
	seq.Stop()
	elapsed := time.Since(start)
	got := strings.Count(logs.String(), msg)
	if got == 0 {
		t.Fatal("the failing rounds were never logged")
	}
	if limit := 1 + int(elapsed/time.Second); got > limit {
		t.Errorf("logged %d failures in %v, want at most %d (one a second)", got, elapsed, limit)
	}
}
