package storetest

import (
	"testing"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// walkDeliveries lists every page of f's deliveries, following the
// cursor; it fails t after 1,000 pages.
func walkDeliveries(t *testing.T, s store.Store, f store.DeliveryFilter) []anyhook.Delivery {
	t.Helper()
	var got []anyhook.Delivery
	for range 1000 {
		ds, next, err := s.ListDeliveries(ctx(t), f)
		if err != nil {
			t.Fatalf("ListDeliveries(%+v): %v", f, err)
		}
		got = append(got, ds...)
		if next == "" {
			return got
		}
		f.Cursor = next
	}
	t.Fatalf("ListDeliveries(%+v): pages never end", f)
	return nil
}

// walkEvents lists the ids of every page of f's events, following the
// cursor; it fails t after 1,000 pages.
func walkEvents(t *testing.T, s store.Store, f store.EventFilter) []string {
	t.Helper()
	var got []string
	for range 1000 {
		evs, next, err := s.ListEvents(ctx(t), f)
		if err != nil {
			t.Fatalf("ListEvents(%+v): %v", f, err)
		}
		for _, ev := range evs {
			got = append(got, ev.ID)
		}
		if next == "" {
			return got
		}
		f.Cursor = next
	}
	t.Fatalf("ListEvents(%+v): pages never end", f)
	return nil
}

// deliveryIDs are the ids of ds.
func deliveryIDs(ds []anyhook.Delivery) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		out = append(out, d.ID)
	}
	return out
}
