package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	Settled(name string) (<-chan delivery.LeaseRef, func())
	Held(ctx context.Context, name string, refs []delivery.LeaseRef) (map[delivery.LeaseRef]bool, error)
	PullStopped() <-chan struct{}
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
	return leaseIDOf(delivery.LeaseRef{EventID: l.Event.ID, DeliveryID: l.Delivery.ID, Attempt: l.Delivery.AttemptCount})
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
	// The server's write timeout runs from the request's headers: a long
	// poll near its limit would have its answer, and the leases in it,
	// cut off unseen.
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(wait + 30*time.Second))
	ls, err := a.pull.LeasePull(r.Context(), r.PathValue("name"), n, wait, lease)
	if err != nil {
		return pullErr(err)
	}
	now := a.now()
	out := leaseResponse{Deliveries: make([]leasedJSON, 0, len(ls))}
	for _, l := range ls {
		out.Deliveries = append(out.Deliveries, toLeased(l, now))
	}
	return writeJSON(w, http.StatusOK, out)
}

func toLeased(l delivery.Leased, now time.Time) leasedJSON {
	body, enc := encodeBytes(l.Event.Body)
	return leasedJSON{
		LeaseID: leaseID(l), DeliveryID: l.Delivery.ID, EventID: l.Event.ID, Attempt: l.Delivery.AttemptCount,
		Replay: l.Delivery.Replay, LeaseUntil: l.Until.UTC(), LeaseRemainingMS: max(0, l.Until.Sub(now).Milliseconds()),
		Headers: l.Header, Body: body, BodyEncoding: enc,
	}
}

// streamKeepAlive is how often an idle stream sends a comment line, so
// that proxies and load balancers see it alive.
const streamKeepAlive = 15 * time.Second

// stream is the streaming lease: Server-Sent Events, one "delivery"
// event per lease, at most max_in_flight unsettled at once. Each is
// acked, nacked or extended with the same POSTs as a polled lease. A
// lease stops counting once this process settles it, or at its end
// (settled by another process, or never).
func (a *API) stream(w http.ResponseWriter, r *http.Request) error {
	if a.pull == nil {
		return pullErr(delivery.ErrNotPull)
	}
	q := r.URL.Query()
	window := defaultPullMax
	if v := q.Get("max_in_flight"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > delivery.MaxPullBatch {
			return badParam("max_in_flight", "%q is out of 1..%d", clip(v), delivery.MaxPullBatch)
		}
		window = n
	}
	lease, err := parseDur("lease", q.Get("lease"), defaultPullLease)
	if err != nil {
		return err
	}
	if lease < delivery.MinPullLease || lease > delivery.MaxPullLease {
		return badParam("lease", "%s is out of %s..%s", lease, delivery.MinPullLease, delivery.MaxPullLease)
	}
	name := r.PathValue("name")
	// Told of settles before the first lease, so that none is missed.
	settled, stop := a.pull.Settled(name)
	defer stop()
	// The first lease, before the answer starts: an unknown destination
	// is a plain 404, not an event stream.
	first, err := a.pull.LeasePull(r.Context(), name, window, 0, lease)
	if err != nil {
		return pullErr(err)
	}
	rc := http.NewResponseController(w)
	// The server's write timeout would cut a stream that outlives it.
	rc.SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	// open are the leases sent and not known to be settled. A settle
	// this process records is told at once (settled); one recorded by
	// another process, a lease the rescuer took back, or one extended,
	// the store says when the window is full (refresh).
	open := map[string]delivery.LeaseRef{}
	send := func(ls []delivery.Leased) error {
		now := a.now()
		for _, l := range ls {
			b, err := json.Marshal(toLeased(l, now))
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(w, "event: delivery\nid: %s\ndata: %s\n\n", leaseID(l), b); err != nil {
				return err
			}
			open[leaseID(l)] = delivery.LeaseRef{EventID: l.Event.ID, DeliveryID: l.Delivery.ID, Attempt: l.Delivery.AttemptCount}
		}
		return rc.Flush()
	}
	refresh := func() {
		refs := make([]delivery.LeaseRef, 0, len(open))
		for _, ref := range open {
			refs = append(refs, ref)
		}
		still, err := a.pull.Held(r.Context(), name, refs)
		if err != nil {
			return // the store failed: ask again at the next tick
		}
		for id, ref := range open {
			if !still[ref] {
				delete(open, id)
			}
		}
	}
	if err := send(first); err != nil {
		return nil // the client went away
	}
	keepAlive := time.Now()
	for {
		select {
		case ref := <-settled:
			delete(open, leaseIDOf(ref))
			continue
		case <-a.pull.PullStopped():
			return nil
		case <-r.Context().Done():
			return nil
		default:
		}
		if free := window - len(open); free > 0 {
			ls, err := a.pull.LeasePull(r.Context(), name, free, streamKeepAlive, lease)
			if err != nil {
				return nil // the client went away, or the store failed: it reconnects
			}
			if len(ls) > 0 {
				if err := send(ls); err != nil {
					return nil
				}
				continue
			}
		} else {
			// Full: wait for a settle, else look again each second.
			t := time.NewTimer(streamRefresh)
			select {
			case ref := <-settled:
				delete(open, leaseIDOf(ref))
			case <-t.C:
				refresh()
			case <-a.pull.PullStopped():
				t.Stop()
				return nil
			case <-r.Context().Done():
				t.Stop()
				return nil
			}
			t.Stop()
		}
		if time.Since(keepAlive) >= streamKeepAlive {
			keepAlive = time.Now()
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return nil
			}
			if rc.Flush() != nil {
				return nil // the client went away
			}
		}
	}
}

// streamRefresh is how often a full stream asks the store which of its
// leases still hold.
const streamRefresh = time.Second

func leaseIDOf(ref delivery.LeaseRef) string {
	return ref.EventID + "." + ref.DeliveryID + "." + strconv.Itoa(ref.Attempt)
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
