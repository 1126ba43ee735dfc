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
//	InFlight, Held, Released, Uncertain     503 + Retry-After (try again)
//	Conflict                                422
//	zero Outcome (an error)                 503 + Retry-After
//
// Never a 2xx before the work is durable, and never a 4xx for something a
// retry can fix: many senders do not retry 4xx.
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

// HandlerConfig configures NewHandler.
type HandlerConfig struct {
	// Verifier authenticates each request before anything else happens.
	// Required: use NewStandardWebhooks behind AnyHook, or a VerifierFunc.
	Verifier Verifier
	// Handle processes a verified delivery, typically with Apply or Do, and
	// returns the outcome. Required.
	Handle func(ctx context.Context, d Delivery) (Outcome, error)
	// Source is Event.Source for every delivery. Default "anyhook". It is
	// never taken from a request header: X-AnyHook-Source is not signed,
	// and a replayed request with another source would escape the dedup
	// key. (AnyHook's event ids are unique across sources; route on the
	// header in Handle if you like.)
	Source string
	// MaxBody is the largest body accepted, in bytes; larger → 413.
	// Default 1 MiB.
	MaxBody int64
	// RetryAfter is the Retry-After sent with 503. Default 5s.
	RetryAfter time.Duration
	// Logger receives one record per request that did not end in 200.
	// Default: discard.
	Logger *slog.Logger
}

// Handler is an http.Handler for a webhook endpoint; see NewHandler.
type Handler struct {
	cfg HandlerConfig
}

// NewHandler returns a handler that, for each POST:
//
//  1. reads the body once, bounded by MaxBody (413 if larger);
//  2. verifies it (400 on failure, nothing written, Handle not called);
//  3. takes the event id from the signed webhook-id, else X-AnyHook-Delivery
//     (400 if neither, or if the two differ), and the source from
//     HandlerConfig.Source, never from a header;
//  4. calls Handle and answers with Outcome.HTTPStatus.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if cfg.Verifier == nil {
		return nil, fmt.Errorf("%w: HandlerConfig.Verifier is required", ErrInvalid)
	}
	if cfg.Handle == nil {
		return nil, fmt.Errorf("%w: HandlerConfig.Handle is required", ErrInvalid)
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 1 << 20
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
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
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		h.cfg.Logger.WarnContext(r.Context(), "inbox: read body", "err", err)
		http.Error(w, "cannot read body", http.StatusBadRequest)
		return
	}
	if err := h.cfg.Verifier.Verify(body, r.Header); err != nil {
		h.cfg.Logger.WarnContext(r.Context(), "inbox: rejected request", "err", err)
		http.Error(w, "invalid signature", http.StatusBadRequest)
		return
	}
	// The id is the dedup key, so it must be one the signature covers:
	// webhook-id (AnyHook sets it to the X-AnyHook-Delivery value). An
	// unsigned X-AnyHook-Delivery is used only when there is no
	// webhook-id (a caller-supplied verifier), and must not contradict it.
	id, delivery := r.Header.Get("webhook-id"), r.Header.Get("X-AnyHook-Delivery")
	switch {
	case id != "" && delivery != "" && delivery != id:
		http.Error(w, "X-AnyHook-Delivery does not match the signed webhook-id", http.StatusBadRequest)
		return
	case id == "":
		id = delivery
	}
	if id == "" {
		http.Error(w, "missing webhook-id or X-AnyHook-Delivery", http.StatusBadRequest)
		return
	}
	src := h.cfg.Source
	if src == "" {
		src = "anyhook"
	}
	ev := Event{Source: src, ID: id, Body: body}
	out, err := h.cfg.Handle(r.Context(), Delivery{Event: ev, Header: r.Header})
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
	if code == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", strconv.Itoa(int(max(h.cfg.RetryAfter.Round(time.Second), time.Second)/time.Second)))
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	fmt.Fprintln(w, out)
}
