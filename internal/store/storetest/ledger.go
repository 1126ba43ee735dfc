package storetest

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/ledger"
	"github.com/anyhook/anyhook/internal/store"
)

// runLedger runs the conformance tests of store.Ledger (the tamper-evident
// log's storage). Each test gets the store and, to say which part it is
// about, the store as a store.Ledger.
func runLedger(t *testing.T, open Open) {
	runTable(t, []named[func(*testing.T, store.Store, store.Ledger)]{
		{"SequenceInIDOrderWithoutGaps", testLedgerSequence},
		{"SequenceRefusesBadBatch", testLedgerBadBatch},
		{"Unsequenced", testLedgerUnsequenced},
		{"Checkpoints", testLedgerCheckpoints},
		{"CheckpointsInInsertionOrder", testLedgerCheckpointList},
		{"PruneBodiesKeepsHashes", testLedgerPrune},
		{"PruneKeepsBodiesStillNeeded", testLedgerPruneNeeded},
		{"PruneStepsAreBounded", testLedgerPruneSteps},
		{"PrunedEventNotSentAgain", testLedgerPrunedNotSent},
		{"ReplayRacesPrune", testLedgerReplayRacesPrune},
		{"ConcurrentSequencers", testLedgerConcurrent},
		{"CheckpointAndVerify", testLedgerCheckpointVerify},
		{"LatenessFromSignedTimes", testLedgerLateness},
		{"PruningJudgedByRetention", testLedgerPruneVerify},
		{"LedgerKeys", testLedgerLogKeys},
		{"PruneActivity", testLedgerPruneActivity},
	}, func(t *testing.T, fn func(*testing.T, store.Store, store.Ledger)) {
		s := open(t)
		fn(t, s, s)
	})
}

func sequenceAll(t *testing.T, l store.Ledger) int {
	t.Helper()
	n, err := ledger.NewSequencer(l, ledger.SequencerOptions{BatchSize: 7}).Run(ctx(t))
	if err != nil {
		t.Fatalf("sequence: %v", err)
	}
	return n
}

func records(t *testing.T, l store.Ledger) []store.LedgerRecord {
	t.Helper()
	var out []store.LedgerRecord
	for {
		recs, err := l.LedgerRecords(ctx(t), int64(len(out)), 10)
		if err != nil {
			t.Fatalf("LedgerRecords: %v", err)
		}
		if len(recs) == 0 {
			return out
		}
		out = append(out, recs...)
	}
}

func testLedgerSequence(t *testing.T, s store.Store, l store.Ledger) {
	var ids []string
	for b := range 3 {
		var batch []store.NewEvent
		for i := range 6 {
			batch = append(batch, newEvent("stripe", fmt.Sprintf("evt_%d_%d", b, i), "billing"))
		}
		slices.Reverse(batch) // commit order differs from id order within a batch
		for _, r := range ingest(t, s, batch...) {
			ids = append(ids, r.ID)
		}
	}
	if n := sequenceAll(t, l); n != len(ids) {
		t.Fatalf("sequenced %d, want %d", n, len(ids))
	}
	if n := sequenceAll(t, l); n != 0 {
		t.Fatalf("second run sequenced %d, want 0", n)
	}
	size, err := l.LedgerSize(ctx(t))
	if err != nil || size != int64(len(ids)) {
		t.Fatalf("LedgerSize = %d, %v; want %d", size, err, len(ids))
	}
	recs := records(t, l)
	seen := map[string]bool{}
	for i, r := range recs {
		if r.Entry.Index != int64(i) {
			t.Fatalf("record %d has index %d", i, r.Entry.Index)
		}
		if r.Event == nil || r.Event.ID != r.Entry.EventID {
			t.Fatalf("record %d: event %+v for entry %s", i, r.Event, r.Entry.EventID)
		}
		if seen[r.Entry.EventID] {
			t.Fatalf("event %s logged twice", r.Entry.EventID)
		}
		seen[r.Entry.EventID] = true
		leaf := ledger.LeafOf(r.Event)
		if leaf.Hash != r.Entry.LeafHash || leaf.BodyHash != r.Entry.BodyHash || leaf.HeaderHash != r.Entry.HeaderHash {
			t.Errorf("record %d: stored hashes differ from the event's leaf", i)
		}
		if r.Entry.SequencedAt.IsZero() || r.Entry.Late || r.Entry.BodyPruned {
			t.Errorf("record %d: entry %+v", i, r.Entry)
		}
		e, err := l.LedgerEntry(ctx(t), r.Entry.EventID)
		if err != nil || e.Index != r.Entry.Index || e.LeafHash != r.Entry.LeafHash {
			t.Errorf("LedgerEntry(%s) = %+v, %v", r.Entry.EventID, e, err)
		}
	}
	// Each batch of 7 is in id order.
	for start := 0; start < len(recs); start += 7 {
		batch := recs[start:min(start+7, len(recs))]
		if !slices.IsSortedFunc(batch, func(a, b store.LedgerRecord) int { return cmpString(a.Entry.EventID, b.Entry.EventID) }) {
			t.Errorf("batch at %d is not in id order", start)
		}
	}
	for _, id := range ids {
		if !seen[id] {
			t.Errorf("event %s is not in the log", id)
		}
	}
	// The stored tree is the RFC 6962 tree of the leaves.
	var stored []tlog.Hash
	r := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = stored[x]
		}
		return out, nil
	})
	for i, rec := range recs {
		hs, err := tlog.StoredHashesForRecordHash(int64(i), rec.Entry.LeafHash, r)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, hs...)
	}
	want, _ := tlog.TreeHash(size, r)
	got, err := tlog.TreeHash(size, ledger.HashReader(ctx(t), l))
	if err != nil || got != want {
		t.Errorf("stored tree root = %x, %v; want %x", got, err, want)
	}
	if _, err := l.LedgerEntry(ctx(t), "no-such-event"); !errors.Is(err, anyhook.ErrNotFound) {
		t.Errorf("LedgerEntry(unknown) err = %v, want ErrNotFound", err)
	}
	if _, err := l.ReadHashes(ctx(t), []int64{tlog.StoredHashCount(size) + 5}); !errors.Is(err, anyhook.ErrNotFound) {
		t.Errorf("ReadHashes(past the end) err = %v, want ErrNotFound", err)
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func testLedgerBadBatch(t *testing.T, s store.Store, l store.Ledger) {
	ingest(t, s, newEvent("stripe", "evt_1"), newEvent("stripe", "evt_2"))
	bad := []func(evs []anyhook.Event) store.LedgerBatch{
		func(evs []anyhook.Event) store.LedgerBatch { // one entry short
			return store.LedgerBatch{Entries: []store.LedgerEntry{{Index: 0, EventID: evs[0].ID}}}
		},
		func(evs []anyhook.Event) store.LedgerBatch { // a gap
			return store.LedgerBatch{Entries: []store.LedgerEntry{{Index: 0, EventID: evs[0].ID}, {Index: 2, EventID: evs[1].ID}}}
		},
		func(evs []anyhook.Event) store.LedgerBatch { // swapped
			return store.LedgerBatch{Entries: []store.LedgerEntry{{Index: 0, EventID: evs[1].ID}, {Index: 1, EventID: evs[0].ID}}}
		},
		func(evs []anyhook.Event) store.LedgerBatch { // hashes in the wrong place
			return store.LedgerBatch{Entries: []store.LedgerEntry{{Index: 0, EventID: evs[0].ID}, {Index: 1, EventID: evs[1].ID}}, HashIndex: 3}
		},
	}
	for i, fn := range bad {
		_, err := l.Sequence(ctx(t), 10, func(size int64, evs []anyhook.Event, _ func([]int64) ([]store.Hash, error)) (store.LedgerBatch, error) {
			if size != 0 || len(evs) != 2 {
				t.Fatalf("size %d, %d events", size, len(evs))
			}
			return fn(evs), nil
		})
		if !errors.Is(err, anyhook.ErrInvalid) {
			t.Errorf("bad batch %d: err = %v, want ErrInvalid", i, err)
		}
	}
	boom := errors.New("boom")
	if _, err := l.Sequence(ctx(t), 10, func(int64, []anyhook.Event, func([]int64) ([]store.Hash, error)) (store.LedgerBatch, error) {
		return store.LedgerBatch{}, boom
	}); !errors.Is(err, boom) {
		t.Errorf("failing fn: err = %v, want it passed on", err)
	}
	if size, _ := l.LedgerSize(ctx(t)); size != 0 {
		t.Fatalf("size after refused batches = %d, want 0", size)
	}
	if n := sequenceAll(t, l); n != 2 {
		t.Fatalf("sequenced %d after refused batches, want 2", n)
	}
}

func testLedgerUnsequenced(t *testing.T, s store.Store, l store.Ledger) {
	a, b := newEvent("stripe", "evt_a"), newEvent("stripe", "evt_b")
	b.Event.ReceivedAt = received.Add(time.Hour)
	ingest(t, s, b, a)
	got, err := l.Unsequenced(ctx(t), received.Add(2*time.Hour), 10)
	if err != nil || len(got) != 2 || got[0].ID > got[1].ID {
		t.Fatalf("Unsequenced = %+v, %v; want both, in id order", got, err)
	}
	if got[0].ReceivedAt.IsZero() || got[0].Source != "stripe" {
		t.Errorf("Unsequenced item = %+v", got[0])
	}
	got, err = l.Unsequenced(ctx(t), received.Add(time.Minute), 10)
	if err != nil || len(got) != 1 || got[0].ID != a.Event.ID || got[0].DedupKey != "evt_a" {
		t.Fatalf("Unsequenced(before b) = %+v, %v; want only a", got, err)
	}
	sequenceAll(t, l)
	if got, err := l.Unsequenced(ctx(t), received.Add(2*time.Hour), 10); err != nil || len(got) != 0 {
		t.Fatalf("Unsequenced after sequencing = %+v, %v", got, err)
	}
}

func testLedgerCheckpoints(t *testing.T, s store.Store, l store.Ledger) {
	if _, err := l.LatestCheckpoint(ctx(t)); !errors.Is(err, anyhook.ErrNotFound) {
		t.Fatalf("LatestCheckpoint on an empty log: err = %v, want ErrNotFound", err)
	}
	for i, size := range []int64{3, 9} {
		c := store.Checkpoint{Size: size, Root: store.Hash{byte(i + 1)}, Note: fmt.Appendf(nil, "note %d\n\n— sig\n", size)}
		if err := l.SaveCheckpoint(ctx(t), c); err != nil {
			t.Fatal(err)
		}
	}
	c, err := l.LatestCheckpoint(ctx(t))
	if err != nil || c.Size != 9 || c.Root != (store.Hash{2}) || string(c.Note) != "note 9\n\n— sig\n" || c.CreatedAt.IsZero() {
		t.Fatalf("LatestCheckpoint = %+v, %v", c, err)
	}
}

// testLedgerCheckpointList: Checkpoints returns every checkpoint in the
// order saved, not sorted by size or root (two of one size keep their
// order). A checkpoint smaller than the latest stored one is not stored:
// on PostgreSQL the checkpointers of several processes race (one signs 9,
// another stores 10 first), and a 9 stored after the 10 made log verify
// report a rollback that never happened. (A rollback written behind the
// store's back, which Verify must see, is the ledger tests' business.)
func testLedgerCheckpointList(t *testing.T, s store.Store, l store.Ledger) {
	if cps, err := l.Checkpoints(ctx(t)); err != nil || len(cps) != 0 {
		t.Fatalf("Checkpoints on an empty log = %+v, %v; want none", cps, err)
	}
	sizes := []int64{3, 9, 9, 12, 5}
	for i, size := range sizes {
		c := store.Checkpoint{Size: size, Root: store.Hash{byte(i + 1), 0xee, 31: byte(i)}, Note: fmt.Appendf(nil, "note %d\n\n— sig %d\n", size, i)}
		if err := l.SaveCheckpoint(ctx(t), c); err != nil {
			t.Fatal(err)
		}
	}
	sizes = sizes[:4] // the 5 came after the 12
	cps, err := l.Checkpoints(ctx(t))
	if err != nil || len(cps) != len(sizes) {
		t.Fatalf("Checkpoints = %+v, %v; want %d (a smaller checkpoint after a larger one is not stored)", cps, err, len(sizes))
	}
	for i, c := range cps {
		if c.Size != sizes[i] || c.Root != (store.Hash{byte(i + 1), 0xee, 31: byte(i)}) ||
			string(c.Note) != fmt.Sprintf("note %d\n\n— sig %d\n", sizes[i], i) || c.CreatedAt.IsZero() {
			t.Errorf("checkpoint %d = %+v; want size %d, root and note as saved", i, c, sizes[i])
		}
		if i > 0 && c.CreatedAt.Before(cps[i-1].CreatedAt) {
			t.Errorf("checkpoint %d created at %v, before checkpoint %d (%v)", i, c.CreatedAt, i-1, cps[i-1].CreatedAt)
		}
	}
	if c, err := l.LatestCheckpoint(ctx(t)); err != nil || c.Size != 12 || string(c.Note) != string(cps[len(cps)-1].Note) {
		t.Errorf("LatestCheckpoint = %+v, %v; want the last of Checkpoints", c, err)
	}
}

func testLedgerPrune(t *testing.T, s store.Store, l store.Ledger) {
	done := newEvent("stripe", "evt_done")                  // no destination: nothing left to deliver
	waiting := newEvent("stripe", "evt_waiting", "billing") // a pending delivery
	late := newEvent("stripe", "evt_unlogged")
	ingest(t, s, done, waiting)
	sequenceAll(t, l)
	ingest(t, s, late) // not in the log yet: never pruned
	before := records(t, l)
	n, err := pruneAll(ctx(t), l, received.Add(time.Second), 10)
	if err != nil || n != 1 {
		t.Fatalf("PruneBodies = %d, %v; want 1", n, err)
	}
	if n, err := pruneAll(ctx(t), l, received.Add(time.Second), 10); err != nil || n != 0 {
		t.Fatalf("PruneBodies again = %d, %v; want 0", n, err)
	}
	if ev := event(t, s, done.Event.ID); len(ev.Body) != 0 || ev.DedupKey != "evt_done" || len(ev.Header) == 0 {
		t.Errorf("pruned event = %+v, want an empty body, dedup key and headers kept", ev)
	}
	for _, id := range []string{waiting.Event.ID, late.Event.ID} {
		if ev := event(t, s, id); len(ev.Body) == 0 {
			t.Errorf("event %s lost its body", id)
		}
	}
	after := records(t, l)
	for i := range after {
		b, a := before[i].Entry, after[i].Entry
		if a.LeafHash != b.LeafHash || a.BodyHash != b.BodyHash || a.HeaderHash != b.HeaderHash {
			t.Errorf("entry %d hashes changed by pruning", i)
		}
		if a.BodyPruned != (a.EventID == done.Event.ID) {
			t.Errorf("entry %d (%s) BodyPruned = %v", i, a.EventID, a.BodyPruned)
		}
	}
	// A duplicate of the pruned event is still recognised.
	if r := ingest(t, s, newEvent("stripe", "evt_done"))[0]; !r.Duplicate || r.ID != done.Event.ID {
		t.Errorf("duplicate after pruning = %+v", r)
	}
}

// testLedgerConcurrent runs several sequencers (as several processes
// would) while events are ingested: every event gets exactly one position
// and there are no gaps.
func testLedgerConcurrent(t *testing.T, s store.Store, l store.Ledger) {
	const writers, perWriter, sequencers = 4, 40, 4
	stop := make(chan struct{})
	var seqWG, ingWG sync.WaitGroup
	errs := make(chan error, sequencers)
	for range sequencers {
		seqWG.Add(1)
		go func() {
			defer seqWG.Done()
			sq := ledger.NewSequencer(l, ledger.SequencerOptions{BatchSize: 5})
			for {
				if _, err := sq.Run(context.WithoutCancel(ctx(t))); err != nil {
					errs <- err
					return
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	for w := range writers {
		ingWG.Add(1)
		go func() {
			defer ingWG.Done()
			for i := range perWriter {
				if _, err := s.Ingest(context.WithoutCancel(ctx(t)), []store.NewEvent{newEvent("stripe", fmt.Sprintf("evt_%d_%d", w, i))}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	ingWG.Wait()
	close(stop)
	seqWG.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	sequenceAll(t, l)
	recs := records(t, l)
	if len(recs) != writers*perWriter {
		t.Fatalf("%d entries, want %d", len(recs), writers*perWriter)
	}
	seen := map[string]bool{}
	for i, r := range recs {
		if r.Entry.Index != int64(i) || seen[r.Entry.EventID] || r.Event == nil {
			t.Fatalf("entry %d: %+v (seen before: %v)", i, r.Entry, seen[r.Entry.EventID])
		}
		seen[r.Entry.EventID] = true
	}
	rep, err := ledger.Verify(ctx(t), l, ledger.VerifyOptions{})
	if err != nil || !rep.OK() {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
}

func testLedgerCheckpointVerify(t *testing.T, s store.Store, l store.Ledger) {
	key := newKey(t)
	// Signed at the suite's receive time, not by the wall clock: a suite
	// that runs for minutes on a busy machine would sign more than five
	// minutes after the events arrived, and Verify would report those a
	// checkpoint did not hold as inserted later.
	cpr := ledger.NewCheckpointer(l, ledger.CheckpointerOptions{Key: key, Now: func() time.Time { return received }})
	for i := range 25 {
		ingest(t, s, newEvent("stripe", fmt.Sprintf("evt_%d", i)))
		if i%10 == 0 {
			sequenceAll(t, l)
			if _, _, err := cpr.Once(ctx(t)); err != nil {
				t.Fatal(err)
			}
		}
	}
	sequenceAll(t, l)
	cp, fresh, err := cpr.Once(ctx(t))
	if err != nil || !fresh || cp.Size != 25 {
		t.Fatalf("checkpoint = %+v, new %v, %v", cp, fresh, err)
	}
	if _, fresh, err := cpr.Once(ctx(t)); err != nil || fresh {
		t.Fatalf("checkpoint without growth: new %v, %v", fresh, err)
	}
	rep, err := ledger.Verify(ctx(t), l, ledger.VerifyOptions{Verifier: key.Verifier, Origin: key.Name()})
	if err != nil || !rep.OK() || rep.Checkpoint == nil || rep.Checkpoint.Size != 25 {
		t.Fatalf("Verify = %+v, %v", rep, err)
	}
	p, err := ledger.Prove(ctx(t), l, recordsAt(t, l, 17).Entry.EventID)
	if err != nil {
		t.Fatal(err)
	}
	ev := event(t, s, p.EventID)
	if err := ledger.CheckProof(key.Verifier, &ev, p); err != nil {
		t.Errorf("CheckProof: %v", err)
	}
}

func recordsAt(t *testing.T, l store.Ledger, i int64) store.LedgerRecord {
	t.Helper()
	recs, err := l.LedgerRecords(ctx(t), i, 1)
	if err != nil || len(recs) != 1 {
		t.Fatalf("LedgerRecords(%d) = %v, %v", i, recs, err)
	}
	return recs[0]
}

// deliverAs drives the one delivery of dest due now to status: delivered,
// dead (its attempts used up), discarded (dead, then discarded by an
// operator), held, or delivering (claimed, in flight); pending leaves it.
func deliverAs(t *testing.T, s store.Store, dest, status string) {
	t.Helper()
	if status == "pending" {
		return
	}
	lease := time.Minute
	if status == "held" {
		lease = -time.Hour
	}
	cs := claim(t, s, dest, 1, lease)
	if len(cs) != 1 {
		t.Fatalf("%s: claimed %d, want 1", dest, len(cs))
	}
	o := delivered(cs[0])
	switch status {
	case "delivering":
		return
	case "held":
		rescue(t, s, rule(anyhook.Hold, 8))
		return
	case "dead", "discarded":
		o = retry(cs[0], 0)
		o.Status = anyhook.StatusDead
	}
	finish(t, s, o)
	if status == "discarded" {
		if _, err := s.Resolve(ctx(t), cs[0].Delivery.ID, store.ActionDiscard, tester); err != nil {
			t.Fatal(err)
		}
	}
}

// testLedgerPruneNeeded: retention never empties the body of an event that
// a delivery still needs: pending, delivering, held, or dead (a person may
// resend or replay it), unless an operator discarded it.
func testLedgerPruneNeeded(t *testing.T, s store.Store, l store.Ledger) {
	statuses := []string{"pending", "delivering", "held", "dead", "discarded", "delivered"}
	ids := map[string]string{}
	for _, st := range statuses {
		// Each event its own destination, with a second one delivered: one
		// delivery that needs the body is enough to keep it.
		ne := newEvent("stripe", "evt_"+st, "to_"+st, "done_"+st)
		ids[st] = ingest(t, s, ne)[0].ID
		deliverAs(t, s, "to_"+st, st)
		deliverAs(t, s, "done_"+st, "delivered")
	}
	sequenceAll(t, l)
	n, err := pruneAll(ctx(t), l, received.Add(time.Second), 100)
	if err != nil || n != 2 {
		t.Fatalf("PruneBodies = %d, %v; want 2 (discarded and delivered)", n, err)
	}
	for _, st := range statuses {
		ev := event(t, s, ids[st])
		wantPruned := st == "discarded" || st == "delivered"
		if ev.BodyPruned != wantPruned || (len(ev.Body) == 0) != wantPruned {
			t.Errorf("event with a %s delivery: body %q, BodyPruned %v; want pruned %v", st, ev.Body, ev.BodyPruned, wantPruned)
		}
	}
}

// testLedgerPrunedNotSent: once its body is pruned, an event is never sent
// again: replay is refused with ErrPruned and creates nothing, and a bulk
// replay skips it (listing it) and replays the others. (A resend cannot
// meet a pruned body: only a held or dead delivery can be resent, and one
// keeps its event's body.)
func testLedgerPrunedNotSent(t *testing.T, s store.Store, l store.Ledger) {
	gone := ingest(t, s, newEvent("stripe", "evt_gone", "billing"))[0].ID
	deliverAs(t, s, "billing", "discarded")
	done := ingest(t, s, newEvent("stripe", "evt_done", "billing"))[0].ID
	deliverAs(t, s, "billing", "delivered")
	kept := ingest(t, s, newEvent("stripe", "evt_kept", "billing"))[0].ID
	deliverAs(t, s, "billing", "dead")
	sequenceAll(t, l)
	if n, err := pruneAll(ctx(t), l, received.Add(time.Second), 100); err != nil || n != 2 {
		t.Fatalf("PruneBodies = %d, %v; want 2", n, err)
	}
	before := event(t, s, gone)
	beforeDone := event(t, s, done)
	if !before.BodyPruned || !beforeDone.BodyPruned || event(t, s, kept).BodyPruned {
		t.Fatalf("BodyPruned: gone %v, done %v, kept %v", before.BodyPruned, beforeDone.BodyPruned, event(t, s, kept).BodyPruned)
	}
	if _, err := s.Replay(ctx(t), gone, []string{"billing"}, tester); !errors.Is(err, anyhook.ErrPruned) {
		t.Errorf("Replay(pruned) err = %v, want ErrPruned", err)
	}
	if _, err := s.Resolve(ctx(t), before.Deliveries[0].ID, store.ActionResend, tester); !errors.Is(err, anyhook.ErrInvalid) {
		t.Errorf("Resolve(resend) of a discarded (resolved) delivery: err = %v, want ErrInvalid", err)
	}
	// The source's deliveries: gone's is resolved (never selected), done's
	// delivered but its body is pruned (skipped, listed), kept's dead
	// (replayed).
	res, err := s.ReplayDeliveries(ctx(t), store.DeliveryFilter{Source: "stripe"}, tester)
	if err != nil || res.Count != 1 || !slices.Equal(res.Pruned, []string{done}) {
		t.Errorf("ReplayDeliveries(source) = %+v, %v; want 1 replayed (%s), pruned [%s] skipped", res, err, kept, done)
	}
	for _, was := range []anyhook.Event{before, beforeDone} {
		after := event(t, s, was.ID)
		if len(after.Deliveries) != 1 || after.Deliveries[0].Status != was.Deliveries[0].Status || after.Deliveries[0].Note != was.Deliveries[0].Note ||
			len(after.Actions) != len(was.Actions) {
			t.Errorf("deliveries of the pruned event %s after the refusals: %+v", was.DedupKey, after.Deliveries)
		}
	}
	ds := event(t, s, kept).Deliveries
	if len(ds) != 2 || ds[0].Status != anyhook.StatusResolved || !ds[1].Replay {
		t.Errorf("the kept event after the bulk replay: %+v; want its dead delivery resolved by a replay", ds)
	}
	cs := claim(t, s, "billing", 10, time.Minute)
	if len(cs) != 1 || cs[0].Event.ID != kept || cs[0].Event.BodyPruned {
		t.Errorf("claims after the bulk replay: %+v; want the kept event's replay only", cs)
	}
}

// testLedgerReplayRacesPrune: replays race with retention.
// Every event ends either with its new delivery and its body, or pruned
// with the replay refused; never a pending delivery of an empty body.
func testLedgerReplayRacesPrune(t *testing.T, s store.Store, l store.Ledger) {
	const n = 40
	var ids []string
	for i := range n {
		ids = append(ids, ingest(t, s, newEvent("stripe", fmt.Sprint("evt_", i), "billing"))[0].ID)
		// Discarded: prunable, and replayable until pruned.
		deliverAs(t, s, "billing", "discarded")
	}
	sequenceAll(t, l)
	var wg sync.WaitGroup
	refused := make([]bool, n)
	errs := make(chan error, 2*n+1)
	wg.Go(func() {
		for {
			m, err := pruneAll(context.WithoutCancel(ctx(t)), l, received.Add(time.Second), 3)
			if err != nil {
				errs <- err
				return
			}
			if m == 0 {
				return
			}
		}
	})
	for i, id := range ids {
		wg.Go(func() {
			// To its own destination (and resolving nothing: the
			// discarded delivery is resolved already) or to another.
			dest := "billing"
			if i%2 == 1 {
				dest = "audit"
			}
			_, err := s.Replay(context.WithoutCancel(ctx(t)), id, []string{dest}, tester)
			switch {
			case errors.Is(err, anyhook.ErrPruned):
				refused[i] = true
			case err != nil:
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// What the race left is stable: another prune changes nothing.
	if m, err := pruneAll(ctx(t), l, received.Add(time.Second), 100); err != nil || m != 0 {
		t.Fatalf("PruneBodies after the race = %d, %v; want 0", m, err)
	}
	for i, id := range ids {
		ev := event(t, s, id)
		pending := 0
		for _, d := range ev.Deliveries {
			if d.Status == anyhook.StatusPending {
				pending++
			}
		}
		if refused[i] {
			if !ev.BodyPruned || pending != 0 {
				t.Errorf("event %d: refused, but BodyPruned %v and %d pending deliveries", i, ev.BodyPruned, pending)
			}
		} else if ev.BodyPruned || len(ev.Body) == 0 || pending != 1 {
			t.Errorf("event %d: sent again, but BodyPruned %v, body %q, %d pending deliveries", i, ev.BodyPruned, ev.Body, pending)
		}
	}
}

// testLedgerLateness: lateness is judged from the time each checkpoint
// states in its signed text, not from the stored late flag: an event that
// enters the log after a checkpoint signed more than the lag after its
// receive time is reported even though the sequencer did not flag it (here
// a sequencer with a lag of days stands for a flag cleared in the
// database). Clocks are injected: the checkpoint is signed ten minutes
// after the suite's receive time.
func testLedgerLateness(t *testing.T, s store.Store, l store.Ledger) {
	key := newKey(t)
	signedAt := received.Add(10 * time.Minute)
	cpr := ledger.NewCheckpointer(l, ledger.CheckpointerOptions{Key: key, Now: func() time.Time { return signedAt }})
	lenient := ledger.NewSequencer(l, ledger.SequencerOptions{Lag: 1000 * time.Hour})
	ingest(t, s, newEvent("stripe", "evt_on_time_1"), newEvent("stripe", "evt_on_time_2"))
	if _, err := lenient.Run(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if cp, _, err := cpr.Once(ctx(t)); err != nil || cp.Size != 2 {
		t.Fatalf("checkpoint = %+v, %v", cp, err)
	}
	late := ingest(t, s, newEvent("stripe", "evt_late"))[0].ID // received with the others, logged after the checkpoint
	if _, err := lenient.Run(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, _, err := cpr.Once(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if e, err := l.LedgerEntry(ctx(t), late); err != nil || e.Late {
		t.Fatalf("entry of the late event = %+v, %v; want it unflagged", e, err)
	}
	rep, err := ledger.Verify(ctx(t), l, ledger.VerifyOptions{Verifier: key.Verifier, Origin: key.Name(), Now: func() time.Time { return signedAt }})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Problems) != 1 || rep.Problems[0].EventID != late || rep.Problems[0].Kind != ledger.KindInserted ||
		!rep.Checkpoint.Time.Equal(signedAt.Truncate(time.Second)) {
		t.Fatalf("Verify: checkpoint %+v, problems %v; want only %s inserted", rep.Checkpoint, rep.Problems, late)
	}
}

func newKey(t *testing.T) *ledger.Key {
	t.Helper()
	skey, _, err := note.GenerateKey(rand.Reader, "storetest")
	if err != nil {
		t.Fatal(err)
	}
	key, err := ledger.ParseKey(skey)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// testLedgerPruneVerify: bodies pruned by the retention rule verify when
// the verifier is given that retention; the same bodies pruned before
// they were that old are reported. Clocks are injected (the verifier's
// now, and the prune cutoff).
func testLedgerPruneVerify(t *testing.T, s store.Store, l store.Ledger) {
	key := newKey(t)
	const retention = 24 * time.Hour
	ingest(t, s, newEvent("stripe", "evt_1"), newEvent("stripe", "evt_2"))
	kept := ingest(t, s, newEvent("stripe", "evt_dead", "billing"))[0].ID
	deliverAs(t, s, "billing", "dead")
	sequenceAll(t, l)
	cpr := ledger.NewCheckpointer(l, ledger.CheckpointerOptions{Key: key, Now: func() time.Time { return received }})
	if _, _, err := cpr.Once(ctx(t)); err != nil {
		t.Fatal(err)
	}
	verifyAt := func(now time.Time) *ledger.Report {
		t.Helper()
		rep, err := ledger.Verify(ctx(t), l, ledger.VerifyOptions{Verifier: key.Verifier, Origin: key.Name(), Retention: retention,
			Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	// Retention run a day and a minute after the events arrived.
	later := received.Add(retention + time.Minute)
	if n, err := ledger.Prune(ctx(t), l, later.Add(-retention)); err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want 2 (not the one with a dead delivery)", n, err)
	}
	if got, err := l.PrunedStillNeeded(ctx(t), 10); err != nil || len(got) != 0 {
		t.Fatalf("PrunedStillNeeded = %+v, %v; want none", got, err)
	}
	if rep := verifyAt(later); !rep.OK() || rep.Pruned != 2 {
		t.Fatalf("verified a day later: report %+v, problems %v", rep, rep.Problems)
	}
	// Judged an hour after arrival, the same pruning cannot be retention's.
	rep := verifyAt(received.Add(time.Hour))
	if len(rep.Problems) != 2 {
		t.Fatalf("verified an hour later: problems %v; want both pruned bodies reported", rep.Problems)
	}
	for _, p := range rep.Problems {
		if p.Kind != ledger.KindPrunedEarly || p.EventID == kept {
			t.Errorf("problem %v", p)
		}
	}
}

// testLedgerLogKeys: of many processes pinning their keys at once, the
// first writer wins and every one reads its key back; a rotation takes
// effect only from the key in force, and saves its checkpoint with it.
func testLedgerLogKeys(t *testing.T, s store.Store, l store.Ledger) {
	if keys, err := l.LedgerKeys(ctx(t)); err != nil || len(keys) != 0 {
		t.Fatalf("LedgerKeys of a new log = %v, %v", keys, err)
	}
	const n = 8
	got := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i], errs[i] = l.PinLedgerKey(context.WithoutCancel(ctx(t)), fmt.Sprintf("key-%d", i)) })
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil || got[i] != got[0] {
			t.Fatalf("PinLedgerKey %d = %q, %v; want every starter to read the one winning key (%q)", i, got[i], errs[i], got[0])
		}
	}
	first := got[0]
	if keys, err := l.LedgerKeys(ctx(t)); err != nil || !slices.Equal(keys, []string{first}) {
		t.Fatalf("LedgerKeys = %v, %v; want [%s]", keys, err, first)
	}
	bridge := store.Checkpoint{Size: 0, Root: store.Hash{7}, Note: []byte("handover\n\n— sigs\n")}
	if err := l.RotateLedgerKey(ctx(t), "key-not-in-force", "key-next", bridge); !errors.Is(err, anyhook.ErrInvalid) {
		t.Fatalf("RotateLedgerKey from a key not in force: err = %v, want ErrInvalid", err)
	}
	if cps, _ := l.Checkpoints(ctx(t)); len(cps) != 0 {
		t.Fatalf("a refused rotation saved its checkpoint: %+v", cps)
	}
	if err := l.RotateLedgerKey(ctx(t), first, "key-next", bridge); err != nil {
		t.Fatal(err)
	}
	if keys, err := l.LedgerKeys(ctx(t)); err != nil || !slices.Equal(keys, []string{first, "key-next"}) {
		t.Fatalf("LedgerKeys after rotation = %v, %v", keys, err)
	}
	if cur, err := l.PinLedgerKey(ctx(t), first); err != nil || cur != "key-next" {
		t.Fatalf("PinLedgerKey after rotation = %q, %v; want the new key in force", cur, err)
	}
	if cp, err := l.LatestCheckpoint(ctx(t)); err != nil || string(cp.Note) != string(bridge.Note) || cp.Root != bridge.Root {
		t.Fatalf("LatestCheckpoint after rotation = %+v, %v; want the handover", cp, err)
	}
	if err := l.RotateLedgerKey(ctx(t), first, "key-third", bridge); !errors.Is(err, anyhook.ErrInvalid) {
		t.Fatalf("RotateLedgerKey from the retired key: err = %v, want ErrInvalid", err)
	}
}

// testLedgerPruneActivity: the activity rollup's minutes older than a cutoff
// go, a batch at a time, and the newer ones stay.
func testLedgerPruneActivity(t *testing.T, s store.Store, l store.Ledger) {
	now := time.Now()
	at := func(key string, ago time.Duration) store.NewEvent {
		ne := newEvent("stripe", key)
		ne.Event.ReceivedAt = now.Add(-ago)
		return ne
	}
	// Two old minutes (a row each: received) and a recent one.
	ingest(t, s, at("evt_10d", 10*24*time.Hour), at("evt_9d", 9*24*time.Hour), at("evt_1d", 24*time.Hour))
	received := func() int {
		t.Helper()
		act, err := s.Activity(ctx(t), store.ActivityQuery{Window: 14 * 24 * time.Hour, Bucket: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		return store.Sum(act.Received)
	}
	if got := received(); got != 3 {
		t.Fatalf("received over 14 days = %d, want 3", got)
	}
	cutoff := now.Add(-store.ActivityKept)
	if n, err := l.PruneActivity(ctx(t), cutoff, 1); err != nil || n != 1 {
		t.Fatalf("PruneActivity(limit 1) = %d, %v; want 1", n, err)
	}
	if got := received(); got != 2 {
		t.Errorf("after one batch: received %d, want 2 (the oldest minute gone)", got)
	}
	if n, err := ledger.PruneActivity(ctx(t), l, cutoff); err != nil || n != 1 {
		t.Fatalf("PruneActivity = %d, %v; want the other old minute", n, err)
	}
	if n, err := l.PruneActivity(ctx(t), cutoff, 10); err != nil || n != 0 {
		t.Fatalf("PruneActivity again = %d, %v; want 0", n, err)
	}
	if got := received(); got != 1 {
		t.Errorf("after pruning: received %d, want the recent event's 1", got)
	}
}

// pruneAll calls PruneBodies over the whole log, limit entries at a time,
// and returns how many bodies it emptied.
func pruneAll(ctx context.Context, l store.Ledger, before time.Time, limit int) (int, error) {
	n, after := 0, int64(-1)
	for {
		step, err := l.PruneBodies(ctx, before, after, limit)
		n += step.Pruned
		if err != nil || step.Examined < limit {
			return n, err
		}
		if step.Last <= after {
			return n, fmt.Errorf("PruneBodies after %d examined %d entries and ended at %d", after, step.Examined, step.Last)
		}
		after = step.Last
	}
}

// testLedgerPruneSteps: a PruneBodies call looks at no more than its limit
// of entries, whatever the log holds, and says where it stopped and what it
// saw (what ledger.Prune needs to stop at the first step that saw nothing
// old, without walking the rest of the log).
func testLedgerPruneSteps(t *testing.T, s store.Store, l store.Ledger) {
	for i := range 5 {
		ingest(t, s, newEvent("stripe", fmt.Sprint("evt_old_", i), "billing"))
		deliverAs(t, s, "billing", []string{"delivered", "dead"}[i%2])
	}
	sequenceAll(t, l)
	// The cutoff falls after these five and before the rest: received
	// later (the fixtures' events all carry one time, so the rest are
	// told apart by the cutoff: they are received "now").
	for i := range 7 {
		ev := newEvent("stripe", fmt.Sprint("evt_new_", i))
		ev.Event.ReceivedAt = received.Add(time.Hour)
		ingest(t, s, ev)
	}
	sequenceAll(t, l)
	cutoff := received.Add(time.Minute)
	step, err := l.PruneBodies(ctx(t), cutoff, -1, 2)
	if err != nil || step.Examined != 2 || step.Old != 2 || step.Pruned != 1 {
		t.Fatalf("first step = %+v, %v; want 2 examined, 2 old, 1 pruned (the delivered one, not the dead)", step, err)
	}
	next, err := l.PruneBodies(ctx(t), cutoff, step.Last, 2)
	if err != nil || next.Examined != 2 || next.Last <= step.Last || next.Pruned != 1 {
		t.Fatalf("second step = %+v, %v; want 2 examined after %d, 1 pruned", next, err, step.Last)
	}
	// Twelve entries; the walk so far pruned 2 of the 3 delivered ones,
	// and Prune takes the third.
	if n, err := ledger.Prune(ctx(t), l, cutoff); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want 1 (the third delivered event)", n, err)
	}
	// From the front again, nothing old is left to prune, the two dead
	// ones are still kept.
	if n, err := pruneAll(ctx(t), l, cutoff, 3); err != nil || n != 0 {
		t.Fatalf("pruneAll = %d, %v; want 0", n, err)
	}
	last, err := l.PruneBodies(ctx(t), cutoff, 1<<40, 10)
	if err != nil || last.Examined != 0 || last.Last != 1<<40 {
		t.Errorf("a step past the log's end = %+v, %v; want nothing examined, Last unchanged", last, err)
	}
}
