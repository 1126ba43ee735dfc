package admin

import (
	"context"
	"net/http"

	"github.com/anyhook/anyhook/internal/ledger"
)

// Ledger is the tamper-evident ledger as the admin API reads it
// (ledger.Reader).
type Ledger interface {
	Checkpoint(ctx context.Context) (ledger.CheckpointInfo, error)
	Proof(ctx context.Context, eventID string) (*ledger.Proof, error)
}

var errNoLedger = &Error{Status: http.StatusNotFound, Code: "log_disabled", Message: "this gateway keeps no tamper-evident log"}

// GET /api/log/checkpoint
func (a *API) logCheckpoint(w http.ResponseWriter, r *http.Request) error {
	if a.ledger == nil {
		return errNoLedger
	}
	cp, err := a.ledger.Checkpoint(r.Context())
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, cp)
}

// GET /api/events/{id}/proof
func (a *API) eventProof(w http.ResponseWriter, r *http.Request) error {
	if a.ledger == nil {
		return errNoLedger
	}
	p, err := a.ledger.Proof(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, p)
}
