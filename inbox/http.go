package inbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"
)

// HTTPStatus is the status code a webhook endpoint should answer with for o:
//
//	Processed, Duplicate, Failed            200  (durable; stop retrying)
//	InFlight, Held, Released, Uncertain     503  (try again)
//	Conflict                                422
//	zero Outcome (an error)                 503
//
// Never a 2xx before the work is durable, and never a 4xx for something a
// retry can fix: many senders do not retry 4xx. See NewHandler for the
// Retry-After sent with each 503.
func (o Outcome) HTTPStatus() int {
	switch o {
	case Processed, Duplicate, Failed:
		return http.StatusOK
	case Conflict:
		return http.StatusUnprocessableEntity
	}
	return http.StatusServiceUnavailable
}

// Delivery is one verified webhook request, handed to HandlerConfig.Handle.
type Delivery struct {
	// Event has Source, ID and the exact Body bytes.
	Event Event
	// Header is the request's header.
	Header http.Header
}

// DefaultSource is Event.Source of every delivery when HandlerConfig.Source
// is empty. It is part of the dedup key, so Held lists it and Resolve needs
// it back.
const DefaultSource = "anyhook"

// HandlerConfig configures NewHandler.
type HandlerConfig struct {
	// Verifier authenticates each request before anything else happens.
	// Required: use NewStandardWebhooks behind AnyHook, or a VerifierFunc
	// for a provider's own scheme (then EventID is required too).
	Verifier Verifier
	// EventID takes the event id, the dedup key, from the verified
	// request. It must read only what Verifier authenticated; see
	// EventIDFunc. Default, when Verifier is a *StandardWebhooks:
	// WebhookID, the signed webhook-id. Required with any other Verifier:
	// the unsigned X-AnyHook-Delivery header is never used on its own.
	EventID EventIDFunc
	// Handle processes a verified delivery, typically with Apply or Do, and
	// returns the outcome. Required.
	Handle func(ctx context.Context, d Delivery) (Outcome, error)
	// Source is Event.Source for every delivery. Default DefaultSource
	// ("anyhook"). It is never taken from a request header:
	// X-AnyHook-Source is not signed, and a replayed request with another
	// source would escape the dedup key. (AnyHook's event ids are unique
	// across sources; route on the header in Handle if you like.)
	Source string
	// MaxBody is the largest body accepted, in bytes; larger → 413.
	// Default 1 MiB.
	MaxBody int64
	// RetryAfter is the shortest Retry-After sent with a 503 (see
	// NewHandler). Default 5s.
	RetryAfter time.Duration
	// Logger receives one record per request that did not end in 200:
	// rejected requests (400, 413) at warn with the reason, handler and
	// store errors and conflicts at error, other 503s at info. Default
	// slog.Default(); use slog.New(slog.DiscardHandler) to silence it.
	Logger *slog.Logger
}

// Handler is an http.Handler for a webhook endpoint; see NewHandler.
type Handler struct {
	cfg HandlerConfig
}

// NewHandler returns a handler that, for each POST:
//
//  1. reads the body once, bounded by MaxBody (413 if larger);
//  2. verifies it (400 naming a safe reason on failure, nothing written,
//     Handle not called);
//  3. takes the event id with HandlerConfig.EventID from the verified
//     request (400 if it fails), and the source from HandlerConfig.Source,
//     never from a header;
//  4. calls Handle and answers with Outcome.HTTPStatus.
//
// A 503 carries a Retry-After that says when a retry can find something
// changed. A sender that honours it (AnyHook does, up to its backoff.max)
// then spends its limited attempts where they can help, instead of giving
// up while a claim is still waiting for its stale policy:
//
//	InFlight (a twin transaction), Released,   RetryAfter: a retry soon succeeds
//	  zero Outcome (store error)
//	InFlight (Do holds a claim)                until the claim goes stale (at least RetryAfter)
//	Uncertain                                  the policy's stale duration (at least RetryAfter)
//	Held                                       none: the sender's own backoff; a person must Resolve
//
// While a claim is held, the sender keeps retrying until it gives up
// (AnyHook: max_attempts, then the delivery is dead, shown and alerted);
// after Resolve, the next retry or a replay gets the answer. Run a Sweeper
// so that a stale claim surfaces even when no retry comes.
//
// It returns ErrInvalid without a Verifier or Handle, and with a Verifier
// other than *StandardWebhooks but no EventID.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if cfg.Verifier == nil {
		return nil, fmt.Errorf("%w: HandlerConfig.Verifier is required", ErrInvalid)
	}
	if cfg.Handle == nil {
		return nil, fmt.Errorf("%w: HandlerConfig.Handle is required", ErrInvalid)
	}
	if cfg.EventID == nil {
		if _, ok := cfg.Verifier.(*StandardWebhooks); !ok {
			return nil, fmt.Errorf("%w: HandlerConfig.EventID is required with a Verifier other than *StandardWebhooks: "+
				"take the event id from what the Verifier authenticates, not from an unsigned header", ErrInvalid)
		}
		cfg.EventID = WebhookID
	}
	if cfg.Source == "" {
		cfg.Source = DefaultSource
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 1 << 20
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Handler{cfg: cfg}, nil
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.cfg.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			h.reject(w, r, http.StatusRequestEntityTooLarge, "body too large", err)
			return
		}
		h.reject(w, r, http.StatusBadRequest, "cannot read body", err)
		return
	}
	if err := h.cfg.Verifier.Verify(body, r.Header); err != nil {
		h.reject(w, r, http.StatusBadRequest, withReason("invalid signature", err), err)
		return
	}
	// The id is the dedup key, so it must be one the verifier covered
	// (see EventIDFunc).
	id, err := h.cfg.EventID(body, r.Header)
	if p := idProblem(id); err == nil && p != "" {
		err = &SignatureError{Reason: "event id " + p} // for good: a retry would be refused again
	}
	if err != nil {
		h.reject(w, r, http.StatusBadRequest, withReason("invalid event id", err), err)
		return
	}
	src := h.cfg.Source
	ev := Event{Source: src, ID: id, Body: body}
	ctx, hint := withRetryHint(r.Context())
	out, err := h.cfg.Handle(ctx, Delivery{Event: ev, Header: r.Header})
	code := out.HTTPStatus()
	log := h.cfg.Logger.With("source", src, "event_id", id, "outcome", out.String())
	switch {
	case out == Conflict:
		log.ErrorContext(r.Context(), "inbox: event id reused with a different body", "err", err)
	case out == 0:
		log.ErrorContext(r.Context(), "inbox: handler error", "err", err)
	case err != nil:
		log.WarnContext(r.Context(), "inbox: handler", "err", err)
	case code != http.StatusOK:
		log.InfoContext(r.Context(), "inbox: retry later")
	}
	if code == http.StatusServiceUnavailable && out != Held {
		after := max(h.cfg.RetryAfter, hint.get())
		w.Header().Set("Retry-After", strconv.FormatInt(int64(max((after+time.Second-1)/time.Second, 1)), 10))
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	if out == 0 {
		fmt.Fprintln(w, "unavailable")
		return
	}
	fmt.Fprintln(w, out)
}

// reject answers a request refused before Handle with code and msg (safe to
// show), and logs the cause at warn.
func (h *Handler) reject(w http.ResponseWriter, r *http.Request, code int, msg string, err error) {
	h.cfg.Logger.WarnContext(r.Context(), "inbox: rejected request", "status", code, "reason", msg, "err", err)
	http.Error(w, msg, code)
}

// withReason appends the safe reason of a *SignatureError to msg.
func withReason(msg string, err error) string {
	var se *SignatureError
	if errors.As(err, &se) && se.Reason != "" {
		return msg + ": " + se.Reason
	}
	return msg
}
