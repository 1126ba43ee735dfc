package postgres_test

import (
	"context"
	"hash/fnv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
)

// A delivery claimed at ingest is leased from when the ingest claims it,
// not from its transaction's start: an ingest that waited (here for a
// concurrent ingest of the same event id, holding its key's lock) would
// otherwise commit a lease already partly spent, and its send could
// outlast it (the rescuer then hands the delivery out again).
func TestClaimAtIngestLeaseStartsAtTheClaim(t *testing.T) {
	t.Parallel()
	dsn := pgtest.DSN(t)
	s := openDSN(t, dsn)
	blocker, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close(context.Background())
	// The lock an ingest of (stripe, evt_wait) takes first (ingestLocks).
	h := fnv.New32a()
	h.Write([]byte("stripe\x00d\x00evt_wait"))
	key := int32(h.Sum32())
	tx, err := blocker.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(t.Context(), `SELECT pg_advisory_xact_lock($1::int4, $2::int4)`, int32(0x61686b79), key); err != nil {
		t.Fatal(err)
	}
	ne := newEvent("stripe", "evt_wait", "billing")
	ne.Lease = []time.Duration{time.Minute}
	done := make(chan []store.IngestResult, 1)
	go func() {
		res, err := s.Ingest(context.Background(), []store.NewEvent{ne})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	for { // until the ingest waits for the lock
		var waiting bool
		if err := blocker.QueryRow(t.Context(), `SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = $1::int4::oid)`, key).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	var released time.Time
	if err := tx.QueryRow(t.Context(), `SELECT clock_timestamp()`).Scan(&released); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(t.Context()); err != nil {
		t.Fatal(err)
	}
	res := <-done
	if len(res) != 1 || len(res[0].Claims) != 1 {
		t.Fatalf("results = %+v, want one claim", res)
	}
	var lease, claimed time.Time
	if err := blocker.QueryRow(t.Context(), `SELECT lease_until, claimed_at FROM deliveries WHERE id = $1`, res[0].Claims[0].Delivery.ID).Scan(&lease, &claimed); err != nil {
		t.Fatal(err)
	}
	if want := released.Add(time.Minute); lease.Before(want) || claimed.Before(released) {
		t.Fatalf("lease_until %v, claimed_at %v; want from after the wait (lock released at %v): at least %v", lease, claimed, released, want)
	}
}
