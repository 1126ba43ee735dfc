package admin

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/anyhook/anyhook/internal/delivery"
)

// Puller is the pull side of the delivery engine (delivery.Engine): the
// leases of pull destinations (docs/pull.md).
type Puller interface {
	LeasePull(ctx context.Context, name string, max int, wait, lease time.Duration) ([]delivery.Leased, error)
	Ack(ctx context.Context, name string, ref delivery.LeaseRef, by string) error
	Nack(ctx context.Context, name string, ref delivery.LeaseRef, retryAfter time.Duration, dead bool, reason, by string) error
	Extend(ctx context.Context, name string, ref delivery.LeaseRef, lease time.Duration) (time.Time, error)
}

// The defaults of a lease request.
const (
	defaultPullMax   = 10
	defaultPullLease = 30 * time.Second
)

type leaseRequest struct {
	Max   *int   `json:"max"`
	Wait  string `json:"wait"`
	Lease string `json:"lease"`
}

// leasedJSON is one leased delivery: what a push delivery's request
// would carry, and the lease.
type leasedJSON struct {
	LeaseID          string              `json:"lease_id"`
	DeliveryID       string              `json:"delivery_id"`
	EventID          string              `json:"event_id"`
	Attempt          int                 `json:"attempt"`
	Replay           bool                `json:"replay"`
	LeaseUntil       time.Time           `json:"lease_until"`
	LeaseRemainingMS int64               `json:"lease_remaining_ms"`
	Headers          map[string][]string `json:"headers"`
	Body             string              `json:"body"`
	BodyEncoding     string              `json:"body_encoding"`
}

type leaseResponse struct {
	Deliveries []leasedJSON `json:"deliveries"`
}

type settleRequest struct {
	LeaseID    string `json:"lease_id"`
	RetryAfter string `json:"retry_after"` // nack
	Dead       bool   `json:"dead"`        // nack
	Reason     string `json:"reason"`      // nack
	Lease      string `json:"lease"`       // extend
}

type extendResponse struct {
	LeaseUntil       time.Time `json:"lease_until"`
	LeaseRemainingMS int64     `json:"lease_remaining_ms"`
}

// leaseID names a lease to its consumer: the event, the delivery and
// the attempt, the fence of every ack, nack and extend.
func leaseID(l delivery.Leased) string {
	return l.Event.ID + "." + l.Delivery.ID + "." + strconv.Itoa(l.Delivery.AttemptCount)
}

func parseLeaseID(s string) (delivery.LeaseRef, error) {
	ev, rest, ok1 := strings.Cut(s, ".")
	dl, n, ok2 := strings.Cut(rest, ".")
	attempt, err := strconv.Atoi(n)
	if !ok1 || !ok2 || ev == "" || dl == "" || err != nil || attempt < 1 {
		return delivery.LeaseRef{}, badParam("lease_id", "%q is not a lease id from this gateway's lease answer", clip(s))
	}
	return delivery.LeaseRef{EventID: ev, DeliveryID: dl, Attempt: attempt}, nil
}

// clip shortens what a client sent before it is quoted back.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

func parseDur(name, s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, badParam(name, "%q is not a duration such as 30s", clip(s))
	}
	return d, nil
}

// pullErr answers the engine's pull errors: an unknown or push
// destination is 404, a lease that ended 409.
func pullErr(err error) error {
	switch {
	case errors.Is(err, delivery.ErrNotPull):
		return &Error{Status: http.StatusNotFound, Code: "not_pull_destination", Message: err.Error()}
	case errors.Is(err, delivery.ErrLeaseEnded):
		return &Error{Status: http.StatusConflict, Code: "lease_ended", Message: err.Error() +
			": the gateway took the delivery back (its lease ran out, or it was settled); it is leased again as a new attempt or held, as the destination's on_stale_claim says"}
	}
	return err
}

func (a *API) lease(w http.ResponseWriter, r *http.Request) error {
	if a.pull == nil {
		return pullErr(delivery.ErrNotPull)
	}
	var req leaseRequest
	if err := decodeBody(w, r, &req); err != nil {
		return err
	}
	n := defaultPullMax
	if req.Max != nil {
		n = *req.Max
	}
	if n < 1 || n > delivery.MaxPullBatch {
		return badParam("max", "%d is out of 1..%d", n, delivery.MaxPullBatch)
	}
	wait, err := parseDur("wait", req.Wait, 0)
	if err != nil {
		return err
	}
	if wait < 0 || wait > delivery.MaxPullWait {
		return badParam("wait", "%s is out of 0s..%s", wait, delivery.MaxPullWait)
	}
	lease, err := parseDur("lease", req.Lease, defaultPullLease)
	if err != nil {
		return err
	}
	if lease < delivery.MinPullLease || lease > delivery.MaxPullLease {
		return badParam("lease", "%s is out of %s..%s", lease, delivery.MinPullLease, delivery.MaxPullLease)
	}
	ls, err := a.pull.LeasePull(r.Context(), r.PathValue("name"), n, wait, lease)
	if err != nil {
		return pullErr(err)
	}
	now := a.now()
	out := leaseResponse{Deliveries: make([]leasedJSON, 0, len(ls))}
	for _, l := range ls {
		body, enc := encodeBytes(l.Event.Body)
		out.Deliveries = append(out.Deliveries, leasedJSON{
			LeaseID: leaseID(l), DeliveryID: l.Delivery.ID, EventID: l.Event.ID, Attempt: l.Delivery.AttemptCount,
			Replay: l.Delivery.Replay, LeaseUntil: l.Until.UTC(), LeaseRemainingMS: max(0, l.Until.Sub(now).Milliseconds()),
			Headers: l.Header, Body: body, BodyEncoding: enc,
		})
	}
	return writeJSON(w, http.StatusOK, out)
}

// settleReq decodes an ack, nack or extend.
func (a *API) settleReq(w http.ResponseWriter, r *http.Request) (settleRequest, delivery.LeaseRef, error) {
	var req settleRequest
	if a.pull == nil {
		return req, delivery.LeaseRef{}, pullErr(delivery.ErrNotPull)
	}
	if err := decodeBody(w, r, &req); err != nil {
		return req, delivery.LeaseRef{}, err
	}
	ref, err := parseLeaseID(req.LeaseID)
	return req, ref, err
}

func (a *API) ack(w http.ResponseWriter, r *http.Request) error {
	req, ref, err := a.settleReq(w, r)
	if err != nil {
		return err
	}
	if req.RetryAfter != "" || req.Dead || req.Reason != "" || req.Lease != "" {
		return badParam("lease_id", "an ack takes only lease_id")
	}
	if err := a.pull.Ack(r.Context(), r.PathValue("name"), ref, actor(r, "").Name); err != nil {
		return pullErr(err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) nack(w http.ResponseWriter, r *http.Request) error {
	req, ref, err := a.settleReq(w, r)
	if err != nil {
		return err
	}
	if req.Lease != "" {
		return badParam("lease", "a nack takes lease_id, retry_after or dead, and reason")
	}
	after, err := parseDur("retry_after", req.RetryAfter, 0)
	if err != nil {
		return err
	}
	if after < 0 || after > delivery.MaxPullLease {
		return badParam("retry_after", "%s is out of 0s..%s", after, delivery.MaxPullLease)
	}
	if req.Dead && after > 0 {
		return badParam("dead", "a nack is either dead or retried after retry_after, not both")
	}
	reason, err := checkReason(req.Reason)
	if err != nil {
		return err
	}
	by := actor(r, reason)
	if err := a.pull.Nack(r.Context(), r.PathValue("name"), ref, after, req.Dead, reason, by.Name); err != nil {
		return pullErr(err)
	}
	if req.Dead {
		a.log.LogAttrs(r.Context(), slog.LevelInfo, "admin: pull delivery refused as dead", slog.String("destination", r.PathValue("name")),
			slog.String("delivery_id", ref.DeliveryID), slog.String("actor", by.Name), slog.String("reason", reason))
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *API) extend(w http.ResponseWriter, r *http.Request) error {
	req, ref, err := a.settleReq(w, r)
	if err != nil {
		return err
	}
	if req.RetryAfter != "" || req.Dead || req.Reason != "" {
		return badParam("lease_id", "an extend takes lease_id and lease")
	}
	lease, err := parseDur("lease", req.Lease, defaultPullLease)
	if err != nil {
		return err
	}
	if lease < delivery.MinPullLease || lease > delivery.MaxPullLease {
		return badParam("lease", "%s is out of %s..%s", lease, delivery.MinPullLease, delivery.MaxPullLease)
	}
	until, err := a.pull.Extend(r.Context(), r.PathValue("name"), ref, lease)
	if err != nil {
		return pullErr(err)
	}
	return writeJSON(w, http.StatusOK, extendResponse{LeaseUntil: until.UTC(), LeaseRemainingMS: max(0, until.Sub(a.now()).Milliseconds())})
}
