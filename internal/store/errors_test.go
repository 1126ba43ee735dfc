package store

import (
	"errors"
	"testing"

	"github.com/anyhook/anyhook"
)

func TestUnavailable(t *testing.T) {
	if err := Unavailable("claim", nil); err != nil {
		t.Fatalf("Unavailable(nil) = %v, want nil", err)
	}
	cause := errors.New("disk I/O error")
	err := Unavailable("claim", cause)
	if !errors.Is(err, anyhook.ErrUnavailable) || !errors.Is(err, cause) {
		t.Fatalf("%v: want both ErrUnavailable and the cause", err)
	}
	if got, want := err.Error(), "claim: store unavailable: disk I/O error"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if again := Unavailable("finish", err); again != err {
		t.Fatalf("an error already marked is wrapped again: %v", again)
	}
}

func TestCheckOutcomes(t *testing.T) {
	ok := []Outcome{{DeliveryID: "a", Status: anyhook.StatusDelivered}, {DeliveryID: "b", Status: anyhook.StatusPending}, {DeliveryID: "c", Status: anyhook.StatusDead}}
	if err := CheckOutcomes(ok); err != nil {
		t.Fatal(err)
	}
	for _, st := range []anyhook.DeliveryStatus{"", anyhook.StatusHeld, anyhook.StatusSkipped, anyhook.StatusDelivering, anyhook.StatusResolved, anyhook.StatusPaused} {
		err := CheckOutcomes(append(ok, Outcome{DeliveryID: "d", Status: st}))
		if !errors.Is(err, anyhook.ErrInvalid) {
			t.Fatalf("status %q: %v, want ErrInvalid", st, err)
		}
	}
}
