package store

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/anyhook/anyhook"
)

// Queued is one unfinished delivery (pending, delivering or held) of an
// object to a destination that delivers each object's events in order
// (order: per_object), as ClaimInOrder and WaitsBehind read it.
type Queued struct {
	ID, EventID    string
	Destination    string
	Source, Object string
	Version        string
	Status         anyhook.DeliveryStatus // as stored
	Due            bool                   // pending and due now
	Arrived        time.Time              // the event's received_at
	CreatedAt      time.Time              // the delivery's
}

// before orders the deliveries of one object: by version (CompareVersions,
// as the stale rule compares them), then by the arrival of their events
// (received_at, then the event id, a UUIDv7: the order of a batch's
// items), then by the delivery's creation. A replay delivery is newer
// than the later events of its version, but its event is not: it goes
// where its event arrived.
func before(a, b Queued) int {
	if c := CompareVersions(a.Version, b.Version); c != 0 {
		return c
	}
	if c := a.Arrived.Compare(b.Arrived); c != 0 {
		return c
	}
	if c := cmp.Compare(a.EventID, b.EventID); c != 0 {
		return c
	}
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// objectKey is an object of a source.
type objectKey struct{ source, object string }

// head is the delivery an object's queue qs (all of one object) waits on:
// one in flight (delivering), one a person must resolve (held) or one
// waiting for its retry (pending, not due), the earliest of them by
// version; else the earliest pending one, which may be claimed now
// (claimable).
func head(qs []Queued) (h Queued, claimable bool) {
	var blocking []Queued
	for _, q := range qs {
		if q.Status != anyhook.StatusPending || !q.Due {
			blocking = append(blocking, q)
		}
	}
	if len(blocking) > 0 {
		return slices.MinFunc(blocking, before), false
	}
	return slices.MinFunc(qs, before), true
}

// byObject groups qs by (source, object), keeping the order of first
// appearance; qs without an object are left out.
func byObject(qs []Queued) [][]Queued {
	idx := map[objectKey]int{}
	var groups [][]Queued
	for _, q := range qs {
		if q.Object == "" {
			continue
		}
		k := objectKey{q.Source, q.Object}
		i, ok := idx[k]
		if !ok {
			i = len(groups)
			idx[k] = i
			groups = append(groups, nil)
		}
		groups[i] = append(groups[i], q)
	}
	return groups
}

// Heads returns the deliveries to claim now among qs, the unfinished
// deliveries of some objects to one ordered destination: per object, none
// while one of its deliveries is delivering, held or waiting for a retry;
// else its earliest pending delivery by version, then arrival.
func Heads(qs []Queued) []string {
	var ids []string
	for _, g := range byObject(qs) {
		if h, ok := head(g); ok {
			ids = append(ids, h.ID)
		}
	}
	return ids
}

// Blocker is the delivery another one waits behind.
type Blocker struct {
	DeliveryID, EventID string
	Version             string // the blocking delivery's ordering version
}

// Behind returns, for each pending delivery among qs (the unfinished
// deliveries of some objects to ordered destinations), the delivery of
// its object it waits behind: the head of its object's queue when that
// is not itself.
func Behind(qs []Queued) map[string]Blocker {
	type destObject struct {
		dest string
		objectKey
	}
	groups := map[destObject][]Queued{}
	for _, q := range qs {
		if q.Object != "" {
			k := destObject{q.Destination, objectKey{q.Source, q.Object}}
			groups[k] = append(groups[k], q)
		}
	}
	out := map[string]Blocker{}
	for _, g := range groups {
		h, _ := head(g)
		for _, q := range g {
			if q.ID != h.ID && q.Status == anyhook.StatusPending {
				out[q.ID] = Blocker{DeliveryID: h.ID, EventID: h.EventID, Version: h.Version}
			}
		}
	}
	return out
}

// OrderCandidates is how many due deliveries ClaimInOrder looks at to
// claim up to limit: several deliveries of one object may come first, and
// only one of them is claimed.
func OrderCandidates(limit int) int { return 4 * limit }

// FillWaitsBehind sets WaitsBehind on the deliveries among ds that are
// pending (or paused) to a destination inOrder names and wait behind
// another delivery of their object, asking s.
func FillWaitsBehind(ctx context.Context, s interface {
	WaitsBehind(ctx context.Context, ids []string) (map[string]Blocker, error)
}, ds []anyhook.Delivery, inOrder map[string]bool) error {
	var ids []string
	for _, d := range ds {
		if inOrder[d.Destination] && d.Status.Waiting() {
			ids = append(ids, d.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	behind, err := s.WaitsBehind(ctx, ids)
	if err != nil {
		return err
	}
	for i := range ds {
		if b, ok := behind[ds[i].ID]; ok {
			ds[i].WaitsBehind, ds[i].WaitsBehindEvent, ds[i].WaitsBehindVersion = b.DeliveryID, b.EventID, b.Version
		}
	}
	return nil
}

// OrderCandidate is a due pending delivery ClaimInOrder looks at, with
// its event's source and object ("" when it has none).
type OrderCandidate struct {
	ID, Source, Object string
}

// ToClaim chooses, among cands, the deliveries ClaimInOrder claims, at
// most limit: those without an object, and the heads (Heads) of the
// objects of the others, whose queues queue reads, given one delivery of
// each object (several candidates of one object would make it read that
// object's queue once per candidate).
func ToClaim(cands []OrderCandidate, limit int, queue func(ids []string) ([]Queued, error)) ([]string, error) {
	var ids, objects []string
	seen := map[objectKey]bool{}
	for _, c := range cands {
		k := objectKey{c.Source, c.Object}
		switch {
		case c.Object == "":
			ids = append(ids, c.ID)
		case !seen[k]:
			seen[k] = true
			objects = append(objects, c.ID)
		}
	}
	if len(objects) > 0 {
		qs, err := queue(objects)
		if err != nil {
			return nil, err
		}
		ids = append(ids, Heads(qs)...)
	}
	return ids[:min(len(ids), limit)], nil
}
