package storetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/store"
)

// runAlerts holds a backend's store.AlertOutbox to the same behaviour:
// folding, claims in order per channel and fold, retries, giving up, and
// exactly one message per fold when raises, flushes and claims race (on
// PostgreSQL, in transactions of their own, as several processes would).
//
// The store judges windows by its own clock, which a conformance test
// cannot move on PostgreSQL: a window of an hour is open for the whole
// test, one of zero is always over.
func runAlerts(t *testing.T, open Open) {
	runTable(t, []named[func(*testing.T, store.AlertOutbox)]{
		{"FoldAndFlush", testAlertFoldAndFlush},
		{"WindowOverCarriesFolded", testAlertWindowOverCarriesFolded},
		{"RepeatableNotDropped", testAlertRepeatable},
		{"ClaimInOrderPerChannelAndFold", testAlertClaimOrder},
		{"LeaseAndFence", testAlertLeaseAndFence},
		{"Retry", testAlertRetry},
		{"GiveUp", testAlertGiveUp},
		{"ConcurrentRaisesOneMessage", testAlertConcurrentRaises},
		{"ConcurrentFlushesOneSummary", testAlertConcurrentFlushes},
		{"ConcurrentClaimsExclusive", testAlertConcurrentClaims},
	}, func(t *testing.T, fn func(*testing.T, store.AlertOutbox)) {
		fn(t, open(t))
	})
}

const (
	windowOpen = time.Hour // a window that stays open through a test
	windowOver = 0         // a window that is always over
	alertLease = time.Hour
)

var alertChannels = []string{"webhook:a", "pagerduty:b"}

// alertOf is alert n of (kind, dest); its identity holds bytes no text
// column keeps (a NUL, bytes that are not UTF-8).
func alertOf(kind, dest string, n int) store.RaisedAlert {
	return store.RaisedAlert{Fold: kind, Destination: dest, Kind: kind, Identity: fmt.Sprintf("%s\x00d:\xff%d", kind, n),
		Action: store.AlertTrigger, DedupKey: "anyhook/" + kind + "/" + dest, Message: fmt.Appendf(nil, `{"n":%d}`, n)}
}

func raiseAlerts(t *testing.T, o store.AlertOutbox, window time.Duration, as ...store.RaisedAlert) {
	t.Helper()
	if err := o.RaiseAlerts(ctx(t), as, alertChannels, window); err != nil {
		t.Fatalf("RaiseAlerts: %v", err)
	}
}

func flushAlerts(t *testing.T, o store.AlertOutbox, window time.Duration) int {
	t.Helper()
	n, err := o.FlushAlerts(ctx(t), alertChannels, window)
	if err != nil {
		t.Fatalf("FlushAlerts: %v", err)
	}
	return n
}

func claimAlerts(t *testing.T, o store.AlertOutbox, channels []string, limit int, lease time.Duration) []store.AlertMessage {
	t.Helper()
	ms, err := o.ClaimAlerts(ctx(t), channels, limit, lease)
	if err != nil {
		t.Fatalf("ClaimAlerts: %v", err)
	}
	return ms
}

func finishAlert(t *testing.T, o store.AlertOutbox, out store.AlertOutcome) bool {
	t.Helper()
	held, err := o.FinishAlert(ctx(t), out)
	if err != nil {
		t.Fatalf("FinishAlert: %v", err)
	}
	return held
}

// sendAll claims and marks sent every due message of the channels and
// returns them, (channel, message, more) in claim order.
func sendAll(t *testing.T, o store.AlertOutbox, channels ...string) []string {
	t.Helper()
	var out []string
	for {
		ms := claimAlerts(t, o, channels, 100, alertLease)
		if len(ms) == 0 {
			return out
		}
		for _, m := range ms {
			out = append(out, fmt.Sprintf("%s %s %d", m.Channel, m.Message, m.More))
			if !finishAlert(t, o, store.AlertOutcome{ID: m.ID, Attempt: m.Attempt, Sent: true}) {
				t.Fatalf("FinishAlert of a held claim %+v: not held", m)
			}
		}
	}
}

// testAlertFoldAndFlush: the first alert of a fold is queued at once,
// once per channel; the rest of the window are counted (an exact repeat
// dropped) and become one summary, their latest standing for the others,
// when the window is over, and not before. Other folds are apart.
func testAlertFoldAndFlush(t *testing.T, o store.AlertOutbox) {
	raiseAlerts(t, o, windowOpen, alertOf("delivery_dead", "billing", 1))
	if got, want := sendAll(t, o, alertChannels...), []string{`webhook:a {"n":1} 0`, `pagerduty:b {"n":1} 0`}; !slices.Equal(got, want) {
		t.Fatalf("first alert: %q, want %q", got, want)
	}
	raiseAlerts(t, o, windowOpen, alertOf("delivery_dead", "billing", 2), alertOf("delivery_dead", "billing", 3),
		alertOf("delivery_dead", "billing", 3), // an exact repeat: dropped
		alertOf("delivery_dead", "billing", 1), // the window's first again: dropped too
		alertOf("delivery_dead", "billing", 4))
	raiseAlerts(t, o, windowOpen, alertOf("delivery_dead", "shipping", 9), alertOf("delivery_held", "billing", 8))
	got := sendAll(t, o, alertChannels[0])
	if want := []string{`webhook:a {"n":9} 0`, `webhook:a {"n":8} 0`}; !slices.Equal(got, want) {
		t.Fatalf("other folds: %q, want %q", got, want)
	}
	if n := flushAlerts(t, o, windowOpen); n != 0 {
		t.Fatalf("flush inside the window queued %d summaries", n)
	}
	if n := flushAlerts(t, o, windowOver); n != 1 {
		t.Fatalf("flush after the window queued %d summaries, want 1", n)
	}
	if got, want := sendAll(t, o, alertChannels[0]), []string{`webhook:a {"n":4} 2`}; !slices.Equal(got, want) {
		t.Fatalf("summary: %q, want %q", got, want)
	}
	if n := flushAlerts(t, o, windowOver); n != 0 {
		t.Fatalf("a second flush queued %d summaries", n)
	}
	// pagerduty:b was never claimed: it has every message, in order.
	got = sendAll(t, o, alertChannels[1])
	if want := []string{`pagerduty:b {"n":9} 0`, `pagerduty:b {"n":8} 0`, `pagerduty:b {"n":4} 2`}; !slices.Equal(got, want) {
		t.Fatalf("the other channel: %q, want %q", got, want)
	}
}

// testAlertWindowOverCarriesFolded: an alert raised after the window,
// with folded alerts no flush has queued, goes out at once standing for
// them; after a quiet window the next is alone.
func testAlertWindowOverCarriesFolded(t *testing.T, o store.AlertOutbox) {
	raiseAlerts(t, o, windowOpen, alertOf("delivery_dead", "billing", 1), alertOf("delivery_dead", "billing", 2), alertOf("delivery_dead", "billing", 3))
	raiseAlerts(t, o, windowOver, alertOf("delivery_dead", "billing", 4))
	flushAlerts(t, o, windowOver) // nothing folded since the 4th: the fold is forgotten
	raiseAlerts(t, o, windowOpen, alertOf("delivery_dead", "billing", 5))
	got := sendAll(t, o, alertChannels[0])
	if want := []string{`webhook:a {"n":1} 0`, `webhook:a {"n":4} 2`, `webhook:a {"n":5} 0`}; !slices.Equal(got, want) {
		t.Fatalf("messages %q, want %q", got, want)
	}
}

// testAlertRepeatable: a repeatable alert (a destination's health) is
// never dropped as a repeat, and its summary is the latest.
func testAlertRepeatable(t *testing.T, o store.AlertOutbox) {
	health := func(kind string, n int) store.RaisedAlert {
		a := alertOf(kind, "billing", n)
		a.Fold, a.Identity, a.Repeatable = "destination_health", "m:same", true
		if kind == "destination_recovered" {
			a.Action, a.DedupKey = store.AlertResolve, "anyhook/destination_failing/billing"
		}
		return a
	}
	raiseAlerts(t, o, windowOpen, health("destination_failing", 1), health("destination_recovered", 2), health("destination_failing", 3),
		health("destination_recovered", 4))
	flushAlerts(t, o, windowOver)
	ms := claimAlerts(t, o, alertChannels[:1], 10, alertLease)
	if len(ms) != 1 || string(ms[0].Message) != `{"n":1}` {
		t.Fatalf("claimed %+v, want the first only (the summary waits behind it)", ms)
	}
	finishAlert(t, o, store.AlertOutcome{ID: ms[0].ID, Attempt: ms[0].Attempt, Sent: true})
	ms = claimAlerts(t, o, alertChannels[:1], 10, alertLease)
	if len(ms) != 1 || string(ms[0].Message) != `{"n":4}` || ms[0].More != 2 || ms[0].Kind != "destination_recovered" ||
		ms[0].Action != store.AlertResolve || ms[0].DedupKey != "anyhook/destination_failing/billing" || ms[0].Destination != "billing" {
		t.Fatalf("summary %+v, want the latest (a resolve) standing for 2", ms)
	}
}

// testAlertClaimOrder: a channel gets a fold's messages one after the
// other: the second is not claimed while the first is unsent, even when
// the first failed and waits for its retry; other folds and channels are
// not held back.
func testAlertClaimOrder(t *testing.T, o store.AlertOutbox) {
	raiseAlerts(t, o, windowOver, alertOf("delivery_dead", "billing", 1), alertOf("delivery_dead", "billing", 2))
	raiseAlerts(t, o, windowOver, alertOf("delivery_dead", "shipping", 3))
	ms := claimAlerts(t, o, alertChannels[:1], 10, alertLease)
	if len(ms) != 2 || string(ms[0].Message) != `{"n":1}` || string(ms[1].Message) != `{"n":3}` {
		t.Fatalf("claimed %+v, want billing's first and shipping's", ms)
	}
	for _, m := range ms {
		if m.Channel != alertChannels[0] || m.Attempt != 1 || m.CreatedAt.IsZero() || m.Action != store.AlertTrigger {
			t.Errorf("claim %+v", m)
		}
	}
	if !finishAlert(t, o, store.AlertOutcome{ID: ms[0].ID, Attempt: 1, RetryIn: time.Hour, Error: "status 503"}) {
		t.Fatal("retry: claim not held")
	}
	if again := claimAlerts(t, o, alertChannels[:1], 10, alertLease); len(again) != 0 {
		t.Fatalf("claimed %+v while the fold's first waits for its retry", again)
	}
	if other := claimAlerts(t, o, alertChannels[1:], 10, alertLease); len(other) != 2 {
		t.Fatalf("the other channel: %+v, want 2 (its own order)", other)
	}
}

// testAlertLeaseAndFence: a leased message is not claimed again until
// its lease runs out; then the next claim is a new attempt, and the old
// claim's outcome changes nothing.
func testAlertLeaseAndFence(t *testing.T, o store.AlertOutbox) {
	raiseAlerts(t, o, windowOver, alertOf("log_verification_failed", "", 1))
	first := claimAlerts(t, o, alertChannels[:1], 10, -time.Second) // a lease already over: a sender that died
	if len(first) != 1 || first[0].Destination != "" {
		t.Fatalf("claim %+v", first)
	}
	second := claimAlerts(t, o, alertChannels[:1], 10, alertLease)
	if len(second) != 1 || second[0].ID != first[0].ID || second[0].Attempt != 2 {
		t.Fatalf("reclaim %+v, want attempt 2 of %d", second, first[0].ID)
	}
	if again := claimAlerts(t, o, alertChannels[:1], 10, alertLease); len(again) != 0 {
		t.Fatalf("claimed %+v under a live lease", again)
	}
	if finishAlert(t, o, store.AlertOutcome{ID: first[0].ID, Attempt: 1, Sent: true}) {
		t.Error("the expired claim's outcome was taken")
	}
	if !finishAlert(t, o, store.AlertOutcome{ID: second[0].ID, Attempt: 2, Sent: true}) {
		t.Error("the live claim's outcome was refused")
	}
	if finishAlert(t, o, store.AlertOutcome{ID: second[0].ID, Attempt: 2, Sent: true}) {
		t.Error("a sent message finished twice")
	}
}

// testAlertRetry: a failed attempt is due again after RetryIn, with its
// error kept for the next attempt.
func testAlertRetry(t *testing.T, o store.AlertOutbox) {
	raiseAlerts(t, o, windowOver, alertOf("delivery_dead", "billing", 1))
	m := claimAlerts(t, o, alertChannels[:1], 10, alertLease)[0]
	finishAlert(t, o, store.AlertOutcome{ID: m.ID, Attempt: m.Attempt, RetryIn: time.Hour, Error: "status 500: boom"})
	if ms := claimAlerts(t, o, alertChannels[:1], 10, alertLease); len(ms) != 0 {
		t.Fatalf("claimed %+v before its retry", ms)
	}
	m = claimAlerts(t, o, alertChannels[1:], 10, alertLease)[0]
	finishAlert(t, o, store.AlertOutcome{ID: m.ID, Attempt: m.Attempt, RetryIn: 0, Error: "dial tcp: refused"})
	ms := claimAlerts(t, o, alertChannels[1:], 10, alertLease)
	if len(ms) != 1 || ms[0].Attempt != 2 || ms[0].LastError != "dial tcp: refused" {
		t.Fatalf("retry %+v, want attempt 2 with the last error", ms)
	}
}

// testAlertGiveUp: a message not sent within giveUp is given up (and
// returned, to be logged) unless it is leased now; a sent one never is.
func testAlertGiveUp(t *testing.T, o store.AlertOutbox) {
	raiseAlerts(t, o, windowOver, alertOf("delivery_dead", "billing", 1), alertOf("delivery_dead", "shipping", 2), alertOf("delivery_dead", "refunds", 3))
	ms := claimAlerts(t, o, alertChannels[:1], 2, alertLease)
	finishAlert(t, o, store.AlertOutcome{ID: ms[0].ID, Attempt: ms[0].Attempt, Sent: true})
	prune := func(giveUp time.Duration) []string {
		gone, err := o.PruneAlerts(ctx(t), giveUp, time.Hour)
		if err != nil {
			t.Fatalf("PruneAlerts: %v", err)
		}
		var out []string
		for _, m := range gone {
			out = append(out, m.Channel+" "+m.Destination)
		}
		slices.Sort(out)
		return out
	}
	if got := prune(time.Hour); len(got) != 0 {
		t.Fatalf("gave up %q within the hour", got)
	}
	// Raised folds queue in (fold, destination) order: webhook:a's billing
	// (sent) and refunds (leased) were claimed.
	want := []string{"pagerduty:b billing", "pagerduty:b refunds", "pagerduty:b shipping", "webhook:a shipping"}
	if got := prune(0); !slices.Equal(got, want) {
		t.Fatalf("gave up %q, want %q (not the sent one, not the leased one)", got, want)
	}
	if left := claimAlerts(t, o, alertChannels, 10, alertLease); len(left) != 0 {
		t.Fatalf("claimed %+v after giving up", left)
	}
	// Still leased, so not given up: its outcome stands.
	if !finishAlert(t, o, store.AlertOutcome{ID: ms[1].ID, Attempt: ms[1].Attempt, RetryIn: 0}) {
		t.Error("the leased message was given up under its lease")
	}
}

// testAlertConcurrentRaises: alerts of one fold raised at once, in
// transactions of their own, queue one message per channel for the first
// and fold the others: the summary stands for all of them.
func testAlertConcurrentRaises(t *testing.T, o store.AlertOutbox) {
	const n = 24
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			errs <- o.RaiseAlerts(ctx(t), []store.RaisedAlert{alertOf("delivery_dead", "billing", i)}, alertChannels, windowOpen)
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("RaiseAlerts: %v", err)
		}
	}
	first := sendAll(t, o, alertChannels[0])
	if len(first) != 1 {
		t.Fatalf("%d messages for %d concurrent alerts of one fold, want 1: %q", len(first), n, first)
	}
	flushAlerts(t, o, windowOver)
	summary := claimAlerts(t, o, alertChannels[:1], 10, alertLease)
	if len(summary) != 1 || summary[0].More != n-2 {
		t.Fatalf("summary %+v, want one standing for %d more", summary, n-2)
	}
}

// testAlertConcurrentFlushes: flushes racing (several processes' ticks)
// queue each fold's summary once.
func testAlertConcurrentFlushes(t *testing.T, o store.AlertOutbox) {
	for d := range 6 {
		dest := fmt.Sprintf("dest%d", d)
		raiseAlerts(t, o, windowOpen, alertOf("delivery_dead", dest, 1), alertOf("delivery_dead", dest, 2), alertOf("delivery_dead", dest, 3))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for range 8 {
		wg.Go(func() {
			n, err := o.FlushAlerts(ctx(t), alertChannels, windowOver)
			if err != nil {
				t.Errorf("FlushAlerts: %v", err)
			}
			mu.Lock()
			total += n
			mu.Unlock()
		})
	}
	wg.Wait()
	if total != 6 {
		t.Fatalf("concurrent flushes queued %d summaries, want 6", total)
	}
	got := sendAll(t, o, alertChannels[0])
	if len(got) != 12 { // each fold's first and its summary
		t.Fatalf("%d messages, want 12: %q", len(got), got)
	}
}

// testAlertConcurrentClaims: senders claiming at once (several processes)
// never claim one message twice, and between them claim every one.
func testAlertConcurrentClaims(t *testing.T, o store.AlertOutbox) {
	const folds = 40
	for d := range folds {
		raiseAlerts(t, o, windowOver, alertOf("delivery_dead", fmt.Sprintf("dest%02d", d), d))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	seen := map[int64]int{}
	for range 6 {
		wg.Go(func() {
			for {
				ms, err := o.ClaimAlerts(ctx(t), alertChannels, 3, alertLease)
				if err != nil {
					t.Errorf("ClaimAlerts: %v", err)
					return
				}
				if len(ms) == 0 {
					return
				}
				mu.Lock()
				for _, m := range ms {
					seen[m.ID]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != folds*len(alertChannels) {
		t.Errorf("%d messages claimed, want %d", len(seen), folds*len(alertChannels))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("message %d claimed %d times", id, n)
		}
	}
}
