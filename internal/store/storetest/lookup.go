package storetest

import (
	"errors"
	"testing"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
)

// RunLookup checks store.DeliveryReader: a delivery is found by its id,
// an unknown id is ErrNotFound.
func RunLookup(t *testing.T, open Open) {
	t.Run("Delivery", func(t *testing.T) {
		t.Parallel()
		s := open(t)
		dr, ok := s.(store.DeliveryReader)
		if !ok {
			t.Fatalf("%T does not implement store.DeliveryReader", s)
		}
		res := ingest(t, s, newEvent("stripe", "evt_lookup", "billing", "crm"))
		ev := event(t, s, res[0].ID)
		for _, want := range ev.Deliveries {
			got, err := dr.Delivery(ctx(t), want.ID)
			if err != nil {
				t.Fatalf("Delivery(%s): %v", want.ID, err)
			}
			if got.ID != want.ID || got.EventID != ev.ID || got.Destination != want.Destination || got.Status != anyhook.StatusPending {
				t.Errorf("Delivery(%s) = %+v, want %+v", want.ID, got, want)
			}
		}
		if _, err := dr.Delivery(ctx(t), ev.ID); !errors.Is(err, anyhook.ErrNotFound) {
			t.Errorf("Delivery(an event id) = %v, want ErrNotFound", err)
		}
	})
}
