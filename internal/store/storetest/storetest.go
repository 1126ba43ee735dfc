// Package storetest is the conformance suite of the store contract. Every
// backend runs the very same tests, every part of store.Store, through one
// entry point:
//
//	func TestConformance(t *testing.T) { storetest.Exercise(t, open) }
//
// where open returns a fresh, empty store for each test.
package storetest

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// Open returns a fresh, empty store for one test; the backend closes it in
// t.Cleanup.
type Open func(t *testing.T) store.Store

// Exercise runs the whole suite against the backend that open makes: the
// queue, operator and reader tests and the model at the top, each other
// part of the contract in a subtest of its own (Ledger, Stats, Arrivals,
// Backfills, Rejections, Lookup, Alerts). Every test runs in parallel on a store
// of its own.
func Exercise(t *testing.T, open Open) {
	runQueue(t, open)
	for _, part := range []named[func(*testing.T, Open)]{
		{"Ledger", runLedger},
		{"Stats", runStats},
		{"Arrivals", runArrivals},
		{"Backfills", runBackfills},
		{"Rejections", runRejections},
		{"Lookup", runLookup},
		{"Alerts", runAlerts},
		{"Incidents", runIncidents},
	} {
		t.Run(part.name, func(t *testing.T) {
			t.Parallel()
			part.fn(t, open)
		})
	}
}

// runQueue runs the tests of the queue, the operator's actions and the
// reads, and the model.
func runQueue(t *testing.T, open Open) {
	tests := []named[storeTest]{
		{"IngestRecordsExactBytes", testIngestRecordsExactBytes},
		{"DuplicateReturnsOriginal", testDuplicateReturnsOriginal},
		{"DuplicateInOneBatch", testDuplicateInOneBatch},
		{"NoDedupKeyAlwaysNew", testNoDedupKeyAlwaysNew},
		{"DedupScopedToSource", testDedupScopedToSource},
		{"ContentKeyDuplicate", testContentKeyDuplicate},
		{"EitherKeyDuplicate", testEitherKeyDuplicate},
		{"ContentKeyInOneBatch", testContentKeyInOneBatch},
		{"ConcurrentContentKeyIngest", testConcurrentContentKeyIngest},
		{"ConcurrentIdenticalIngest", testConcurrentIdenticalIngest},
		{"BatchItemFailureIsolated", testBatchItemFailureIsolated},
		{"FieldsRefusedAlike", testFieldsRefusedAlike},
		{"FieldsAtTheirBounds", testFieldsAtTheirBounds},
		{"StalenessInBatches", testStalenessInBatches},
		{"DuplicateInBatchKeepsMark", testDuplicateInBatchKeepsMark},
		{"ClaimAtIngest", testClaimAtIngest},
		{"ClaimAtIngestPausedAndStale", testClaimAtIngestPausedAndStale},
		{"ClaimAtIngestRescued", testClaimAtIngestRescued},
		{"ClaimAtIngestFailedItem", testClaimAtIngestFailedItem},
		{"ClaimAtIngestConcurrentDuplicates", testClaimAtIngestConcurrentDuplicates},
		{"ClaimAtIngestInvalidItem", testClaimAtIngestInvalidItem},
		{"ClaimAndFinish", testClaimAndFinish},
		{"ClaimLimitNotPositive", testClaimLimitNotPositive},
		{"AttemptErrorKeptAlike", testAttemptErrorKeptAlike},
		{"AttemptOutcomeKept", testAttemptOutcomeKept},
		{"RetryIsNotDueEarly", testRetryIsNotDueEarly},
		{"FinishFencedByAttempt", testFinishFencedByAttempt},
		{"FinishRefusesOtherStatuses", testFinishRefusesOtherStatuses},
		{"ConcurrentClaimsAreExclusive", testConcurrentClaimsAreExclusive},
		{"Release", testRelease},
		{"ReleaseLosesToRescue", testReleaseLosesToRescue},
		{"ReleaseClaimAtIngest", testReleaseClaimAtIngest},
		{"ReleaseKeepsOrder", testReleaseKeepsOrder},
		{"Renew", testRenew},
		{"RescueReclaim", testRescueReclaim},
		{"RescueHold", testRescueHold},
		{"RescueReclaimPastMaxAttempts", testRescueReclaimPastMaxAttempts},
		{"LiveLeaseNotRescued", testLiveLeaseNotRescued},
		{"RescueLeavesUnknownDestination", testRescueLeavesUnknownDestination},
		{"LostAttemptStartsAtClaim", testLostAttemptStartsAtClaim},
		{"Staleness", testStaleness},
		{"StaleDeliver", testStaleDeliver},
		{"ConcurrentVersionsKeepMax", testConcurrentVersionsKeepMax},
		{"ConcurrentOneObjectNoDeadlock", testConcurrentOneObjectNoDeadlock},
		{"ConcurrentContentKeysNoDeadlock", testConcurrentContentKeysNoDeadlock},
		{"Replay", testReplay},
		{"ReplayDeliveries", testReplayDeliveries},
		{"ReplayResolvesDeadAndHeld", testReplayResolvesDeadAndHeld},
		{"BulkReplayTwiceReplaysOnce", testBulkReplayTwiceReplaysOnce},
		{"Resolve", testResolve},
		{"Pause", testPause},
		{"PausedShownEverywhere", testPausedShownEverywhere},
		{"ListEventsPagingAndFilters", testListEvents},
		{"ListEventsByProviderID", testListEventsByProviderID},
		{"SearchBodies", testSearchBodies},
		{"SearchBodiesBounded", testSearchBodiesBounded},
		{"SearchBodiesCost", testSearchBodiesCost},
		{"SearchBodiesTypeGlob", testSearchBodiesTypeGlob},
		{"SavedSearches", testSavedSearches},
		{"DeliveriesOfEvents", testDeliveriesOfEvents},
		{"ListDeliveries", testListDeliveries},
		{"Counts", testCounts},
		{"EventTypeAndNotRouted", testEventTypeAndNotRouted},
		{"TypeGlobPages", testTypeGlobPages},
		{"ListFilters", ListFilters},
		{"BackfillOrigin", testBackfillOrigin},
		{"OrderByVersion", testOrderByVersion},
		{"OrderFailingHeadBlocksOnlyItsObject", testOrderFailingHeadBlocksOnlyItsObject},
		{"OrderDeadReleasesNext", testOrderDeadReleasesNext},
		{"OrderHeldBlocks", testOrderHeldBlocks},
		{"OrderPaused", testOrderPaused},
		{"OrderConcurrentClaims", testOrderConcurrentClaims},
		{"OrderReplayKeepsArrivalOrder", testOrderReplayKeepsArrivalOrder},
		{"BreakerHoldsBack", testBreakerHoldsBack},
		{"BreakerProbes", testBreakerProbes},
		{"BreakerProbesInOrder", testBreakerProbesInOrder},
		{"BreakerReleasedProbe", testBreakerReleasedProbe},
	}
	runTable(t, tests, withStore(open))
	t.Run("Model", func(t *testing.T) {
		t.Parallel()
		testModel(t, open)
	})
}

func ctx(t *testing.T) context.Context { return t.Context() }

// named is one test of a table: its subtest name and its function.
type named[F any] struct {
	name string
	fn   F
}

// storeTest is a test that needs a fresh store and nothing more.
type storeTest = func(t *testing.T, s store.Store)

// runTable runs each test as a parallel subtest named after it; call runs
// its function on what it needs, opened afresh for it.
func runTable[F any](t *testing.T, tests []named[F], call func(t *testing.T, fn F)) {
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			call(t, tt.fn)
		})
	}
}

// withStore calls a storeTest on a fresh store from open.
func withStore(open Open) func(t *testing.T, fn storeTest) {
	return func(t *testing.T, fn storeTest) { fn(t, open(t)) }
}

// tester is the actor of the suite's replays and resolves.
var tester = store.Actor{Name: "storetest"}

// received is when the suite's events arrive: a minute before the suite
// started, with sub-second digits a store must keep. It is relative to the
// clock, never a fixed date: the log's lateness rule and PostgreSQL's
// sequencing window compare receive times with now, so a fixed date would
// make the suite pass one day and fail the next.
var received = time.Now().UTC().Add(-time.Minute).Truncate(time.Second).Add(123456 * time.Microsecond)

func newEvent(source, key string, dests ...string) store.NewEvent {
	return store.NewEvent{
		Event: anyhook.Event{
			ID: store.NewID(), Source: source, DedupKey: key, ReceivedAt: received,
			Method: "POST", Path: "/webhooks/" + source,
			Header: http.Header{"Content-Type": {"application/json"}, "X-Test": {"a", "b"}},
			Body:   []byte(`{"id":"` + key + `"}`),
		},
		Destinations: dests,
	}
}

func ingest(t *testing.T, s store.Store, evs ...store.NewEvent) []store.IngestResult {
	t.Helper()
	res, err := s.Ingest(ctx(t), evs)
	if err := ingestFailure(res, err, len(evs)); err != nil {
		t.Fatalf("Ingest: %v", err)
	}
	return res
}

// ingestFailure says what went wrong in an Ingest of n events that
// answered res, err: nil when every event was recorded.
func ingestFailure(res []store.IngestResult, err error, n int) error {
	if err != nil {
		return err
	}
	if len(res) != n {
		return fmt.Errorf("%d results for %d events", len(res), n)
	}
	for i, r := range res {
		if r.Err != nil {
			return fmt.Errorf("item %d: %w", i, r.Err)
		}
	}
	return nil
}

func event(t *testing.T, s store.Store, id string) anyhook.Event {
	t.Helper()
	ev, err := s.Event(ctx(t), id)
	if err != nil {
		t.Fatalf("Event(%s): %v", id, err)
	}
	return ev
}

func claim(t *testing.T, s store.Store, dest string, limit int, lease time.Duration) []store.Claim {
	t.Helper()
	cs, err := s.Claim(ctx(t), dest, limit, lease)
	if err != nil {
		t.Fatalf("Claim: %v", err)
	}
	return cs
}

func finish(t *testing.T, s store.Store, outs ...store.Outcome) []string {
	t.Helper()
	lost, err := s.Finish(ctx(t), outs)
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	return lost
}

func delivered(c store.Claim) store.Outcome {
	return store.Outcome{
		DeliveryID: c.Delivery.ID, Attempt: c.Delivery.AttemptCount, Status: anyhook.StatusDelivered,
		Result: anyhook.Attempt{Number: c.Delivery.AttemptCount, StartedAt: received, Duration: 12 * time.Millisecond, StatusCode: 200, ResponseBody: []byte("ok")},
	}
}

func retry(c store.Claim, in time.Duration) store.Outcome {
	return store.Outcome{
		DeliveryID: c.Delivery.ID, Attempt: c.Delivery.AttemptCount, Status: anyhook.StatusPending, RetryIn: in,
		Result: anyhook.Attempt{Number: c.Delivery.AttemptCount, StartedAt: received, StatusCode: 500, Error: "HTTP 500"},
	}
}
