package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlstore"
)

// Ingest implements store.Store. The batch runs first without a
// savepoint per item (two statements per event saved); only when an item
// fails is the whole transaction rolled back and the batch run again with
// each item in a savepoint of its own, so that the failing item alone
// gets the error. An item whose fields no store can keep
// (store.CheckEvent) fails before any of this, as on PostgreSQL.
func (s *Store) Ingest(ctx context.Context, evs []store.NewEvent) ([]store.IngestResult, error) {
	return store.IngestValid(evs, func(evs []store.NewEvent) ([]store.IngestResult, error) {
		res, err := s.ingest(ctx, evs, false)
		if errors.Is(err, errItemFailed) {
			res, err = s.ingest(ctx, evs, true)
		}
		if err != nil {
			return nil, err
		}
		return res, nil
	})
}

// errItemFailed aborts a batch run without savepoints when an item fails.
var errItemFailed = errors.New("an ingest item failed")

// ingest runs the batch in one transaction; isolated puts each item in a
// savepoint, and without it the first failing item aborts the batch with
// errItemFailed. Without savepoints the deliveries of the whole batch are
// inserted at its end, in multi-row statements.
func (s *Store) ingest(ctx context.Context, evs []store.NewEvent, isolated bool) ([]store.IngestResult, error) {
	res := make([]store.IngestResult, len(evs))
	err := s.tx(ctx, opIngest, func(tx *sql.Tx) error {
		now := clocks{s.now(), s.leaseNow()}
		st := s.stmts(ctx, tx)
		paused, err := s.pausedOf(st, evs)
		if err != nil {
			return store.Unavailable("ingest", err)
		}
		var dl []newDelivery
		for i := range evs {
			if !isolated {
				r, err := s.ingestOne(st, i, &evs[i], paused, &dl)
				if err != nil {
					return errItemFailed
				}
				res[i] = r
				continue
			}
			if _, err := st.exec(qSavepoint); err != nil {
				return store.Unavailable("ingest", err)
			}
			r, err := s.ingestOne(st, i, &evs[i], paused, &dl)
			if err == nil {
				err = s.insertDeliveries(st, dl, now)
			}
			if err != nil {
				if _, rerr := st.exec(qRollbackTo); rerr != nil {
					return store.Unavailable("ingest", rerr)
				}
				r = store.IngestResult{Err: err}
			}
			if _, err := st.exec(qRelease); err != nil {
				return store.Unavailable("ingest", err)
			}
			res[i] = r
			if r.Err == nil {
				claimsOf(dl, evs, res, now)
			}
			dl = dl[:0]
		}
		if err := s.insertDeliveries(st, dl, now); err != nil {
			return errItemFailed
		}
		claimsOf(dl, evs, res, now)
		return nil
	})
	return res, err
}

// newDelivery is a delivery an ingested event gets: evs[item]'s, claimed
// at ingest for lease when lease > 0.
type newDelivery struct {
	id, event, source, typ, destination string
	status                              anyhook.DeliveryStatus
	stale                               bool
	item                                int
	lease                               time.Duration
}

// clocks are the store's two clocks read at one moment: the wall clock
// and the lease clock (leaseclock.go).
type clocks struct{ wall, lease time.Time }

func (s *Store) insertDeliveries(st *stmts, dl []newDelivery, now clocks) error {
	at, lat := micros(now.wall), micros(now.lease)
	return insertRows(st, &deliveryInserts, len(dl), func(i int, args []any) []any {
		d := &dl[i]
		d.id = s.newID()
		if d.lease != 0 {
			return append(args, d.id, d.event, d.source, sqlstore.Nullable(d.typ), d.destination, anyhook.StatusDelivering, d.stale, at, at, at, 1, micros(now.lease.Add(d.lease)), lat)
		}
		return append(args, d.id, d.event, d.source, sqlstore.Nullable(d.typ), d.destination, d.status, d.stale, at, at, at, 0, nil, nil)
	})
}

// claimsOf adds the deliveries of dl claimed at ingest to their items'
// results, as Claim would have returned them.
func claimsOf(dl []newDelivery, evs []store.NewEvent, res []store.IngestResult, clk clocks) {
	now, lnow := time.UnixMicro(micros(clk.wall)), time.UnixMicro(micros(clk.lease)) // as stored
	for _, d := range dl {
		if d.lease == 0 {
			continue
		}
		ev := evs[d.item].Event
		ev.Stale = res[d.item].Stale
		res[d.item].Claims = append(res[d.item].Claims, store.Claim{
			Delivery: anyhook.Delivery{ID: d.id, EventID: d.event, Destination: d.destination, Status: anyhook.StatusDelivering,
				Stale: d.stale, AttemptCount: 1, NextAttemptAt: now, LeaseUntil: time.UnixMicro(micros(lnow.Add(d.lease))),
				ClaimedAt: lnow, CreatedAt: now, UpdatedAt: now},
			Event: ev,
		})
	}
}

// pausedOf reads, once per transaction, whether each destination that an
// item of evs asks to claim at ingest is paused: a paused destination's
// deliveries are created pending, as Claim would not take them.
func (s *Store) pausedOf(st *stmts, evs []store.NewEvent) (map[string]bool, error) {
	var paused map[string]bool
	for i := range evs {
		for j, lease := range evs[i].Lease {
			dest := evs[i].Destinations[j]
			if _, seen := paused[dest]; lease == 0 || seen {
				continue
			}
			if paused == nil {
				paused = map[string]bool{}
			}
			var p bool
			if err := st.queryRow(qPaused, dest).Scan(&p); err != nil && !errors.Is(err, sql.ErrNoRows) {
				return nil, err
			}
			paused[dest] = p
		}
	}
	return paused, nil
}

// ingestOne inserts the event first (a new event is the common case) and
// looks for the event it duplicates only when the insert met a uniqueness
// conflict; the object's version is compared after the insert, so that a
// duplicate never raises it. The event's deliveries are appended to dl.
func (s *Store) ingestOne(st *stmts, item int, ne *store.NewEvent, paused map[string]bool, dl *[]newDelivery) (store.IngestResult, error) {
	ev := &ne.Event
	headers, err := store.EncodeHeader(ev.Header)
	if err != nil {
		return store.IngestResult{}, err
	}
	vm, vs, vk := store.VerificationArgs(ev.Verification)
	res, err := st.exec(qInsertEvent,
		ev.ID, ev.Source, sqlstore.Nullable(ev.DedupKey), micros(ev.ReceivedAt), ev.Method, ev.Path, headers, sqlstore.NonNil(ev.Body),
		sqlstore.Nullable(ev.Object), sqlstore.Nullable(ev.Version), sqlstore.Nullable(ne.ContentKey),
		sqlstore.Nullable(ev.RemoteAddr), vm, vs, vk, sqlstore.Nullable(ev.Type), store.NotRoutedArg(ev.NotRouted), store.OriginArg(ev.Origin))
	if err != nil {
		return store.IngestResult{}, err
	}
	if n, err := res.RowsAffected(); err != nil {
		return store.IngestResult{}, err
	} else if n == 0 {
		return duplicate(st, ne)
	}
	stale := false
	if ev.Object != "" {
		var mark string
		err := st.queryRow(qVersion, ev.Source, ev.Object).Scan(&mark)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			_, err = st.exec(qInsertVersion, ev.Source, ev.Object, ev.Version)
		case err == nil:
			switch c := store.CompareVersions(ev.Version, mark); {
			case c < 0:
				stale = true
				_, err = st.exec(qMarkStale, ev.ID)
			case c > 0:
				_, err = st.exec(qRaiseVersion, ev.Version, ev.Source, ev.Object)
			}
		}
		if err != nil {
			return store.IngestResult{}, err
		}
	}
	status := anyhook.StatusPending
	if stale && ne.StaleSkip {
		status = anyhook.StatusSkipped
	}
	for j, dest := range ne.Destinations {
		d := newDelivery{event: ev.ID, source: ev.Source, typ: ev.Type, destination: dest, status: status, stale: stale && !ne.StaleSkip, item: item}
		if j < len(ne.Lease) && status == anyhook.StatusPending && !paused[dest] {
			d.lease = ne.Lease[j]
		}
		*dl = append(*dl, d)
	}
	return store.IngestResult{ID: ev.ID, Stale: stale}, nil
}

// duplicate counts ne, whose insert met a uniqueness conflict, as a
// duplicate of the event with its provider's id or else its signed
// content. A conflict on neither is one on the event id itself: an error.
func duplicate(st *stmts, ne *store.NewEvent) (store.IngestResult, error) {
	ev := &ne.Event
	// A duplicate by the provider's id first, then by the signed content.
	// An event fetched from the provider's API (a backfill) that is
	// already recorded is not an arrival: the provider did not send it.
	keys := [2]struct{ q, key string }{{qCountDup, ev.DedupKey}, {qCountContent, ne.ContentKey}}
	fetched := store.OriginArg(ev.Origin) != nil
	if fetched {
		keys[0].q, keys[1].q = qFindDup, qFindContent
	}
	for _, k := range keys {
		if k.key == "" {
			continue
		}
		var id string
		var n int64
		err := st.queryRow(k.q, ev.Source, k.key).Scan(&id, &n)
		if err == nil {
			if fetched {
				return store.IngestResult{ID: id, Duplicate: true}, nil
			}
			return store.IngestResult{ID: id, Duplicate: true}, arrive(st, id, n, ev)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return store.IngestResult{}, err
		}
	}
	return store.IngestResult{}, fmt.Errorf("event id %s is taken", ev.ID)
}

// qInsertArrival records a duplicate's arrival, with its body's hash when
// the body differs from its event's (compared in the database: the
// event's body is not read into the process) and that was not pruned.
const qInsertArrival = `INSERT INTO arrivals (event_id, seq, received_at, remote_addr, headers, headers_cut, body_sha256)
SELECT id, ?, ?, ?, ?, ?, CASE WHEN body = ? OR ` + prunedCol + ` THEN NULL ELSE ? END FROM events WHERE id = ?`

// arrive records the arrival of ev, a duplicate that raised the duplicate
// counter of event id to n, if it is among the first store.MaxArrivals.
func arrive(st *stmts, id string, n int64, ev *anyhook.Event) error {
	if n > store.MaxArrivals {
		return nil
	}
	h, cut := store.ArrivalHeader(ev.Header)
	_, err := st.exec(qInsertArrival, n, micros(ev.ReceivedAt), ev.RemoteAddr, h, cut, sqlstore.NonNil(ev.Body), store.BodySHA256(ev.Body), id)
	return err
}
