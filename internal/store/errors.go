package store

import (
	"errors"
	"fmt"

	"github.com/anyhook/anyhook"
)

// Unavailable marks err as an error of the database itself, not of one
// item, so that ingest answers 503 and workers back off; op names what the
// store was doing ("claim", "list events"). Both backends wrap every
// database failure with it, in one shape: "op: store unavailable: err".
// nil stays nil, and an error already marked is returned as it is.
func Unavailable(op string, err error) error {
	if err == nil || errors.Is(err, anyhook.ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%s: %w: %w", op, anyhook.ErrUnavailable, err)
}

// CheckOutcomes refuses, with anyhook.ErrInvalid, a Finish call holding an
// outcome whose status is not delivered, pending or dead: an attempt ends
// in one of those three (SPEC §5). Any other status (held, skipped, "")
// would leave the delivery where no claim, rescue or operator action
// reaches it again. The whole call is refused before anything is written.
func CheckOutcomes(outs []Outcome) error {
	for _, o := range outs {
		switch o.Status {
		case anyhook.StatusDelivered, anyhook.StatusPending, anyhook.StatusDead:
		default:
			return fmt.Errorf("finish delivery %s: status %q is not delivered, pending or dead: %w", o.DeliveryID, o.Status, anyhook.ErrInvalid)
		}
	}
	return nil
}

// OutcomeOf is the outcome an attempt is stored with: its own, or
// unknown when it names none (a rescued claim: nobody knows what became
// of its request).
func OutcomeOf(a anyhook.Attempt) string {
	if a.Outcome == "" {
		return anyhook.OutcomeUnknown
	}
	return a.Outcome
}
