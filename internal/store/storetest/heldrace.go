package storetest

import (
	"sync"
	"testing"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// HeldBackRace: while a destination is paused and resumed, every row of a
// list of pending or paused deliveries or events is shown in the status
// the list asked for. The lists read the held-back names before their
// query; a pause between the two must not put a delivery shown paused in
// a list of pending ones (or the reverse).
func HeldBackRace(t *testing.T, s store.Store, rounds int) {
	for i := range 20 {
		ingest(t, s, newEvent("stripe", "evt_r"+string(rune('a'+i)), "billing"))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for p := true; ; p = !p {
			select {
			case <-stop:
				return
			default:
			}
			if err := s.SetPaused(ctx(t), "billing", p); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	bad := 0
	for i := range rounds {
		st := anyhook.StatusPending
		if i%2 == 1 {
			st = anyhook.StatusPaused
		}
		ds, _, err := s.ListDeliveries(ctx(t), store.DeliveryFilter{Status: st, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if d.Status != st {
				bad++
				if bad <= 3 {
					t.Errorf("round %d: ListDeliveries(status %s) has %s shown %s", i, st, d.ID, d.Status)
				}
				break
			}
		}
	}
	close(stop)
	wg.Wait()
	if bad > 0 {
		t.Errorf("%d of %d lists had a row in another status", bad, rounds)
	}
}
