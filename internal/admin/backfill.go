package admin

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/backfill"
)

// Backfills starts and watches backfills (internal/gateway).
type Backfills interface {
	// Start checks that source can be backfilled (an error says why not,
	// naming the config key) and starts a backfill of it in the
	// background; backfill.ErrRunning while one runs.
	// anyhook.ErrUnavailable when the database does not answer.
	Start(source string, from, to time.Time, dryRun bool, by string) (backfill.Job, error)
	// Get returns the latest backfill of source, false when none was
	// started; an error when that cannot be told.
	Get(source string) (backfill.Job, bool, error)
	Wait(ctx context.Context, source string) (backfill.Job, bool, error)
}

type backfillRequest struct {
	Since  string `json:"since"` // a duration ago, e.g. 24h
	From   string `json:"from"`  // RFC 3339
	To     string `json:"to"`    // RFC 3339; default now
	DryRun bool   `json:"dry_run"`
	// Wait answers once the backfill finished (200), instead of at once
	// with the job running (202).
	Wait bool `json:"wait"`
}

// POST /api/sources/{name}/backfill {"since": "24h"} or {"from", "to"},
// "dry_run", "wait"
func (a *API) startBackfill(w http.ResponseWriter, r *http.Request) error {
	name, err := a.backfillSource(r)
	if err != nil {
		return err
	}
	var req backfillRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	from, to, err := backfill.Window(strings.TrimSpace(req.Since), strings.TrimSpace(req.From), strings.TrimSpace(req.To), a.now())
	if err != nil {
		return &Error{Status: http.StatusBadRequest, Code: "invalid", Message: err.Error()}
	}
	by := actor(r, "").Name
	job, err := a.backfills.Start(name, from, to, req.DryRun, by)
	switch {
	case errors.Is(err, backfill.ErrRunning):
		return &Error{Status: http.StatusConflict, Code: "conflict", Message: err.Error()}
	case errors.Is(err, anyhook.ErrUnavailable):
		return err // 503, without the database's words
	case err != nil:
		return &Error{Status: http.StatusBadRequest, Code: "invalid", Message: err.Error()}
	}
	toAttr := slog.Time("to", to)
	if to.IsZero() {
		toAttr = slog.String("to", "now") // the window's end: when it runs
	}
	a.log.LogAttrs(r.Context(), slog.LevelInfo, "admin: backfill started", slog.String("source", name),
		slog.Time("from", from), toAttr, slog.Bool("dry_run", req.DryRun), slog.String("by", by))
	if req.Wait {
		if job, _, err = a.backfills.Wait(r.Context(), name); err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, job)
	}
	return writeJSON(w, http.StatusAccepted, job)
}

// GET /api/sources/{name}/backfill: the latest backfill of the source,
// started by any process sharing the database.
func (a *API) getBackfill(w http.ResponseWriter, r *http.Request) error {
	name, err := a.backfillSource(r)
	if err != nil {
		return err
	}
	job, ok, err := a.backfills.Get(name)
	if err != nil {
		return err // 503: whether one runs cannot be told
	}
	if !ok {
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: "no backfill of source " + strconv.Quote(name) + " was ever started through the API or the dashboard"}
	}
	return writeJSON(w, http.StatusOK, job)
}

func (a *API) backfillSource(r *http.Request) (string, error) {
	name := r.PathValue("name")
	if _, ok := a.sources[name]; !ok || a.backfills == nil {
		return "", &Error{Status: http.StatusNotFound, Code: "not_found", Message: "unknown source " + strconv.Quote(name)}
	}
	return name, nil
}
