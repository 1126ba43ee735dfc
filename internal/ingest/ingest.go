// Package ingest is the POST /webhooks/{source} handler. Its order of work
// never changes: read at most max_body bytes, verify the signature over the
// exact bytes, derive the dedup key (and, where that key is not signed, the
// content key), record the event and its deliveries in one durable
// transaction, and only then answer 2xx.
package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/route"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/tracing"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Recorder records verified events durably; a store.Store or a Batcher in
// front of one.
type Recorder interface {
	Ingest(ctx context.Context, evs []store.NewEvent) ([]store.IngestResult, error)
}

// Source is one configured inbound URL.
type Source struct {
	Name         string
	Provider     provider.Provider
	MaxBody      int64
	PublicURL    string   // for URL-bound schemes; "" rebuilds it from the request
	Destinations []string // each new event gets one delivery per destination its filter accepts
	// Filters are the destinations' filters, by destination name; a
	// destination without one receives every event.
	Filters   map[string]*route.Filter
	StaleSkip bool // stale events are skipped (else delivered, flagged)
	// Secret headers carry the source's secret itself: verified, then
	// never stored (so never shown or forwarded).
	SecretHeaders []string
	// Shed: past Options.MaxQueueWait, this source's requests are
	// answered 503 at once (its provider retries them) rather than
	// queued.
	Shed bool
}

// Backlogger is implemented by a Recorder that queues (the Batcher): how
// long a request recorded now would wait for the store, and how long the
// store takes to commit n events at its recent pace (0: not known, or n
// too few to tell).
type Backlogger interface {
	Backlog() time.Duration
	// Pace is the recent commit rate, events per second; 0: not known.
	Pace() float64
	// Drain is 0 too while n is less than batches of the smallest
	// batches that time the pace.
	Drain(n int64, batches int) time.Duration
}

// Options configure a Handler.
type Options struct {
	Sources  []Source
	Recorder Recorder
	Logger   *slog.Logger
	Now      func() time.Time // default time.Now
	NewID    func() string    // default store.NewID
	// Recorded is called after new events were committed (to wake the
	// delivery workers); may be nil.
	Recorded func()
	// Observer is told the outcome of every request (metrics); nil:
	// nobody.
	Observer Observer
	// Rejections is told of every request answered with a 4xx (the
	// rejection log); nil: nobody.
	Rejections RejectionLog
	// Tracer, when set, traces each request (internal/tracing): a server
	// span continuing the request's traceparent, with verify and record
	// children; the event's stored headers then carry the server span's
	// traceparent, which its deliveries continue. nil: no tracing, at no
	// cost.
	Tracer trace.TracerProvider
	// MaxQueueWait bounds admission: a request of a source that sheds
	// (Source.Shed) is answered 503 with Retry-After, before its body is
	// read, while the Recorder's backlog is longer, or the requests in
	// progress would take longer at its pace. 0: never shed.
	MaxQueueWait time.Duration
}

// RejectionLog keeps a record of refused requests (internal/rejectlog).
// Record is called on the request's goroutine and must not block. rej
// carries the source name as requested, whether it is configured, the
// reason, the answer, the remote address and the announced Content-Length
// (BodySize); header is the request's; body is what was read of the body
// (nil when it was not read), not to be kept after the call.
type RejectionLog interface {
	Record(rej anyhook.Rejection, header http.Header, body []byte)
}

// Observer is told the outcome of each ingest request. Its method is
// called on the request's goroutine and must not block.
type Observer interface {
	// Ingested reports one request: the source (OutcomeUnknownSource
	// requests report "", so that made-up names cannot grow a label set),
	// one of the Outcome* values and how long the request took.
	Ingested(source, outcome string, took time.Duration)
}

// RoutingObserver is optionally implemented by an Observer (metrics): it
// is told the type of each event recorded as new, and of each filter
// evaluation that failed. Its methods must not block.
type RoutingObserver interface {
	EventRecorded(source, eventType string)
	FilterFailed(destination string)
}

// Request outcomes as reported to an Observer.
const (
	OutcomeAccepted          = "accepted"
	OutcomeDuplicate         = "duplicate"
	OutcomeRejectedSignature = anyhook.RejectSignature // missing or invalid signature, stale timestamp
	OutcomeInvalid           = anyhook.RejectInvalid   // verified, but no event could be read from it
	OutcomeTooLarge          = anyhook.RejectTooLarge
	OutcomeUnknownSource     = anyhook.RejectUnknownSource
	OutcomeUnavailable       = "unavailable" // the store could not record it
	OutcomeChallenge         = "challenge"   // a provider's URL verification, answered
	OutcomeShed              = "shed"        // over capacity: answered 503 at once, to be retried
	OutcomeClientGone        = "client_gone" // the client went away before it was recorded
)

// Handler serves POST /webhooks/{source}.
type Handler struct {
	sources  map[string]*Source
	rec      Recorder
	log      *slog.Logger
	now      func() time.Time
	newID    func() string
	recorded func()
	observer Observer
	rejected RejectionLog
	routing  RoutingObserver // nil when the observer is not one
	tracer   trace.Tracer    // nil: tracing is off
	backlog  Backlogger      // nil: never shed
	maxWait  time.Duration
	inFlight atomic.Int64 // requests being answered, their body read
	late     lateness
	shedLog  atomic.Int64 // when shedding was last logged (Unix nanoseconds)
	shed     atomic.Int64 // requests shed since the last log

	failMu sync.Mutex
	failed map[failure]bool // the filter errors already logged
}

// failure is one distinct filter error of one destination.
type failure struct{ destination, err string }

// maxFailures bounds the filter errors remembered as logged; past it,
// new ones are no longer logged (they are still counted).
const maxFailures = 1000

// New returns a Handler for the given sources.
func New(opt Options) *Handler {
	h := &Handler{sources: map[string]*Source{}, rec: opt.Recorder, log: opt.Logger,
		now: opt.Now, newID: opt.NewID, recorded: opt.Recorded, observer: opt.Observer, rejected: opt.Rejections}
	h.routing, _ = opt.Observer.(RoutingObserver)
	if b, ok := opt.Recorder.(Backlogger); ok && opt.MaxQueueWait > 0 {
		h.backlog, h.maxWait = b, opt.MaxQueueWait
	}
	if opt.Tracer != nil {
		h.tracer = opt.Tracer.Tracer("github.com/anyhook/anyhook/internal/ingest")
	}
	for i := range opt.Sources {
		h.sources[opt.Sources[i].Name] = &opt.Sources[i]
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.now == nil {
		h.now = time.Now
	}
	h.late.epoch = h.now()
	if h.newID == nil {
		h.newID = store.NewID
	}
	return h
}

// Result is the JSON answer to a provider.
type Result struct {
	Status string        `json:"status"` // accepted | duplicate
	ID     string        `json:"id"`     // the event id (the first, for a batch)
	Events []EventResult `json:"events,omitempty"`
}

// EventResult is one item of a batch request.
type EventResult struct {
	Status string `json:"status"`
	ID     string `json:"id"`
}

// rejection is an answer other than 2xx: a status and a message safe to
// show the sender.
type rejection struct {
	code    int
	msg     string
	err     error  // for the log only
	outcome string // for the Observer; "" is OutcomeInvalid
	body    []byte // what was read of the body, for the rejection log; nil when not read
	shed    *verdict
}

func (r *rejection) Error() string { return r.msg }

// ServeHTTP implements http.Handler for the route POST /webhooks/{source}.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h.tracer == nil {
		h.answer(w, r)
		return
	}
	ctx, span := h.tracer.Start(tracing.Extract(r.Context(), r.Header), "POST /webhooks/{source}",
		trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(semconv.HTTPRequestMethodPost, semconv.HTTPRoute("/webhooks/{source}"),
			semconv.URLPath(r.URL.Path), semconv.ClientAddress(r.RemoteAddr), tracing.Source.String(r.PathValue("source"))))
	defer span.End()
	code, outcome := h.answer(w, r.WithContext(ctx))
	span.SetAttributes(semconv.HTTPResponseStatusCode(code), tracing.Outcome.String(outcome))
	if code >= 500 {
		// A server span's 4xx is the client's error, not the server's.
		span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(code)))
		span.SetStatus(codes.Error, outcome)
	}
}

// answer serves the request and returns the status code and outcome of
// its answer.
func (h *Handler) answer(w http.ResponseWriter, r *http.Request) (code int, outcome string) {
	name := r.PathValue("source")
	start := h.now()
	res, err := h.serve(w, r, name)
	if err != nil {
		var rej *rejection
		if !errors.As(err, &rej) {
			rej = &rejection{code: http.StatusInternalServerError, msg: "internal error", err: err, outcome: OutcomeUnavailable}
		}
		h.observe(name, rej.outcomeName(), start)
		switch rej.outcome {
		case OutcomeClientGone:
			// Nothing was recorded and nobody reads the answer: the
			// client's to retry, not the store's failure.
			h.log.Info("ingest abandoned: the client went away before the event was recorded", "source", name,
				"spent", h.now().Sub(start).String(), "err", rej.err)
			return rej.code, rej.outcome
		case OutcomeShed:
			w.Header().Set("Retry-After", "1")
			h.logShed(name, rej.shed)
			writeJSON(w, rej.code, map[string]string{"error": rej.msg})
			return rej.code, rej.outcome
		}
		level := slog.LevelInfo
		if rej.code >= 500 {
			level = slog.LevelError
			w.Header().Set("Retry-After", "5")
		}
		h.log.Log(r.Context(), level, "ingest rejected", "source", name, "status", rej.code, "reason", rej.msg, "err", rej.err)
		if rej.code < 500 && h.rejected != nil {
			outcome := rej.outcomeName()
			h.rejected.Record(anyhook.Rejection{Source: name, KnownSource: outcome != OutcomeUnknownSource,
				Reason: outcome, Status: rej.code, Message: rej.msg, RemoteAddr: r.RemoteAddr, BodySize: r.ContentLength},
				r.Header, rej.body)
		}
		writeJSON(w, rej.code, map[string]string{"error": rej.msg})
		return rej.code, rej.outcomeName()
	}
	if res.challenge != nil {
		if res.challenge.ContentType != "" {
			w.Header().Set("Content-Type", res.challenge.ContentType)
		}
		w.WriteHeader(http.StatusOK)
		w.Write(res.challenge.Body)
		h.observe(name, OutcomeChallenge, start)
		return http.StatusOK, OutcomeChallenge
	}
	writeResult(w, &res.result)
	outcome = OutcomeAccepted
	if res.result.Status == "duplicate" {
		outcome = OutcomeDuplicate
	}
	h.observe(name, outcome, start)
	return http.StatusOK, outcome
}

func (r *rejection) outcomeName() string {
	if r.outcome == "" {
		return OutcomeInvalid
	}
	return r.outcome
}

// Admission is what admission judges by now (for metrics).
type Admission struct {
	Pace       float64 // the store's recent commit rate, events per second; 0: not known, or admission is off
	InProgress int64   // requests being answered, their body read
	Halved     bool    // the requests recorded were late: the bound on those in progress is halved
}

// Admission reports what admission judges by now.
func (h *Handler) Admission() Admission {
	a := Admission{InProgress: h.inFlight.Load()}
	if h.backlog != nil {
		a.Pace, a.Halved = h.backlog.Pace(), h.late.late(h.now())
	}
	return a
}

// OverCapacityMessage is the message logged while requests are shed.
const OverCapacityMessage = "ingest over capacity: answering 503 to requests of sources that shed"

// logShed logs that requests are being shed, at most once every 10
// seconds with how many were since the last time (an overload of
// thousands a second must not become as many log lines), and what the
// request that logs it was refused on.
func (h *Handler) logShed(source string, v *verdict) {
	n := h.shed.Add(1)
	now := h.now().UnixNano()
	last := h.shedLog.Load()
	if now-last < int64(10*time.Second) || !h.shedLog.CompareAndSwap(last, now) {
		return
	}
	h.shed.Add(-n)
	h.log.Warn(OverCapacityMessage, "source", source,
		"shed", n, "backlog", v.backlog.String(), "in_flight", v.inFlight,
		"in_flight_wait", v.wait.String(), "bound", v.bound.String(),
		"late", v.late, "max_queue_wait", h.maxWait.String())
}

// verdict is what one admission decision was made on.
type verdict struct {
	backlog  time.Duration // the store's backlog, judged against MaxQueueWait
	inFlight int64         // the requests being answered, this one not counted
	wait     time.Duration // their estimated wait with this one, judged against bound
	bound    time.Duration
	late     bool // the requests recorded were late: bound is halved
}

// overCapacity reports whether a request of a source that sheds is
// refused now, and on what: the store's backlog is longer than
// MaxQueueWait, or the requests being answered, and this one, would take
// longer than the bound at the store's recent pace. Past the CPU's
// capacity a request waits for a CPU at every step (verifying, queueing,
// committing), not only in the commit queue, whose own backlog stays
// short while the CPU is the bottleneck (BENCHMARKS.md, "Past capacity,
// the queue is the CPU"): a bound on what is in progress follows the
// commit rate wherever the requests wait. The requests of sources that
// queue count too: they take the same store. While the requests
// recorded were late (lateness), the bound is MaxQueueWait halved, and
// fewer of them are let in before it applies: one timed batch instead
// of two.
func (h *Handler) overCapacity() (verdict, bool) {
	v := verdict{backlog: h.backlog.Backlog(), inFlight: h.inFlight.Load(), bound: h.maxWait, late: h.late.late(h.now())}
	batches := 2
	if v.late {
		v.bound, batches = h.maxWait/2, 1
	}
	v.wait = h.backlog.Drain(v.inFlight+1, batches)
	return v, v.backlog > h.maxWait || v.wait > v.bound
}

// observe reports a finished request to the Observer, if any.
func (h *Handler) observe(source, outcome string, start time.Time) {
	if h.observer == nil {
		return
	}
	if outcome == OutcomeUnknownSource {
		source = ""
	}
	h.observer.Ingested(source, outcome, h.now().Sub(start))
}

type served struct {
	result    Result
	challenge *provider.Challenge
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, name string) (served, error) {
	src, ok := h.sources[name]
	if !ok {
		return served{}, &rejection{code: http.StatusNotFound, msg: "unknown source " + strconv.Quote(name), outcome: OutcomeUnknownSource}
	}
	if src.Shed && h.backlog != nil {
		if v, over := h.overCapacity(); over {
			shed := v // to the heap only when shed
			return served{}, &rejection{code: http.StatusServiceUnavailable, outcome: OutcomeShed, shed: &shed,
				msg: "over capacity: the gateway is not taking this request; retry later"}
		}
	}
	received := h.now()
	body, err := readBody(w, r, src.MaxBody)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return served{}, &rejection{code: http.StatusRequestEntityTooLarge, msg: "body larger than max_body (" + strconv.FormatInt(src.MaxBody, 10) + " bytes)", outcome: OutcomeTooLarge}
		}
		return served{}, &rejection{code: http.StatusBadRequest, msg: "could not read the request body", err: err}
	}
	// In progress from here: a body still on its way costs the gateway
	// nothing, and a few slow senders must not make it shed everyone.
	began := h.now()
	queued := false // behind at least one timed batch: see lateness
	if n := h.inFlight.Add(1); h.backlog != nil {
		queued = h.backlog.Drain(n, 1) > 0
		defer func() {
			if h.inFlight.Add(-1) == 0 {
				h.late.drained(h.now())
			}
		}()
	} else {
		defer h.inFlight.Add(-1)
	}
	preq := &provider.Request{Method: r.Method, URL: publicURL(src, r), Header: r.Header, Body: body}
	verified, err := h.verify(r.Context(), src, preq, received)
	if err != nil {
		return served{}, &rejection{code: http.StatusBadRequest, msg: safeMessage(err), err: err, outcome: OutcomeRejectedSignature, body: body}
	}
	ext, err := src.Provider.Extract(preq)
	if err != nil {
		return served{}, &rejection{code: http.StatusBadRequest, msg: safeMessage(err), err: err, body: body}
	}
	if ext.Challenge != nil {
		return served{challenge: ext.Challenge}, nil
	}
	if len(ext.Events) == 0 {
		return served{}, &rejection{code: http.StatusBadRequest, msg: "the request carries no event", body: body}
	}
	header := r.Header.Clone()
	for _, k := range src.SecretHeaders {
		header.Del(k)
	}
	if h.tracer != nil {
		// The event keeps the trace context of this request's span: its
		// deliveries, however much later, continue this trace.
		tracing.Inject(r.Context(), header)
	}
	path := requestPath(r)
	evs := make([]store.NewEvent, len(ext.Events))
	for i, pe := range ext.Events {
		b := body
		if pe.Body != nil {
			b = pe.Body
		}
		evs[i] = store.NewEvent{
			Event: anyhook.Event{
				ID: h.newID(), Source: src.Name, DedupKey: pe.DedupKey, ReceivedAt: received,
				Method: r.Method, Path: path, Header: header, Body: b,
				Type: pe.Type, Object: pe.Object, Version: pe.Version,
				RemoteAddr: r.RemoteAddr, Verification: verified,
			},
			ContentKey:   pe.ContentKey,
			Destinations: src.Destinations,
			StaleSkip:    src.StaleSkip,
		}
		// Before anything is stored: no store keeps such a field, and
		// retrying would not change it.
		if err := store.CheckEvent(&evs[i]); err != nil {
			msg := err.Error()
			if len(ext.Events) > 1 {
				msg = "event " + strconv.Itoa(i+1) + " of " + strconv.Itoa(len(ext.Events)) + ": " + msg
			}
			return served{}, &rejection{code: http.StatusBadRequest, msg: msg, err: err, body: body}
		}
		if len(src.Filters) > 0 {
			h.route(r.Context(), src, &evs[i])
		}
	}
	results, err := h.record(r.Context(), evs)
	if err == nil && h.backlog != nil {
		now := h.now()
		h.late.recorded(now, now.Sub(began), h.maxWait, queued)
	}
	if err != nil && errors.Is(err, context.Canceled) && r.Context().Err() != nil {
		// Withdrawn from the queue unrecorded when the client left.
		return served{}, &rejection{code: http.StatusServiceUnavailable, msg: "the client went away", err: err, outcome: OutcomeClientGone}
	}
	if err != nil {
		return served{}, &rejection{code: http.StatusServiceUnavailable, msg: "the event store is unavailable; retry later", err: err, outcome: OutcomeUnavailable}
	}
	var out Result
	fresh := false
	for i, res := range results {
		if errors.Is(res.Err, anyhook.ErrInvalid) {
			// The store refuses it for good: a retry would be refused
			// again, for ever. (The check above leaves nothing of the
			// request's for this; the cause is in the log.)
			return served{}, &rejection{code: http.StatusBadRequest, msg: "the event store refuses a field of the event", err: res.Err, body: body}
		}
		if res.Err != nil {
			return served{}, &rejection{code: http.StatusServiceUnavailable, msg: "the event could not be recorded; retry later", err: res.Err, outcome: OutcomeUnavailable}
		}
		er := EventResult{Status: "accepted", ID: res.ID}
		if res.Duplicate {
			er.Status = "duplicate"
		} else {
			fresh = true
		}
		h.log.Debug("ingested", "source", src.Name, "event_id", er.ID, "provider_event_id", evs[i].Event.DedupKey, "status", er.Status)
		if !res.Duplicate && h.routing != nil {
			h.routing.EventRecorded(src.Name, evs[i].Event.Type)
		}
		out.Events = append(out.Events, er)
	}
	out.Status, out.ID = out.Events[0].Status, out.Events[0].ID
	if fresh {
		out.Status = "accepted"
	}
	if len(out.Events) == 1 {
		out.Events = nil
	}
	if fresh && h.recorded != nil {
		h.recorded()
	}
	return served{result: out}, nil
}

// verify checks the request's signature, in a span when tracing is on.
func (h *Handler) verify(ctx context.Context, src *Source, preq *provider.Request, received time.Time) (anyhook.Verification, error) {
	if h.tracer == nil {
		return src.Provider.Verify(preq, received)
	}
	_, span := h.tracer.Start(ctx, "verify")
	defer span.End()
	verified, err := src.Provider.Verify(preq, received)
	if err != nil {
		span.SetStatus(codes.Error, safeMessage(err))
		return verified, err
	}
	span.SetAttributes(tracing.Verification.String(verified.Scheme))
	return verified, nil
}

// record hands evs to the recorder and waits until they are durable, in
// a span when tracing is on.
func (h *Handler) record(parent context.Context, evs []store.NewEvent) ([]store.IngestResult, error) {
	if h.tracer == nil {
		return h.rec.Ingest(parent, evs)
	}
	ctx, span := h.tracer.Start(parent, "record", trace.WithAttributes(tracing.EventCount.Int(len(evs))))
	defer span.End()
	results, err := h.rec.Ingest(ctx, evs)
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
		return results, err
	}
	dups := 0
	for _, res := range results {
		if res.Duplicate {
			dups++
		}
	}
	span.SetAttributes(tracing.Duplicates.Int(dups))
	// The request's span names its events, so that a trace is found by
	// the event id (X-AnyHook-Delivery).
	ids := make([]string, len(results))
	for i, res := range results {
		ids[i] = res.ID
	}
	trace.SpanFromContext(parent).SetAttributes(tracing.EventIDs.StringSlice(ids))
	return results, nil
}

// route evaluates the filters of src's destinations on ne: the
// destinations whose filter is false, or fails, move from
// ne.Destinations to ne.Event.NotRouted. A failed evaluation is logged
// once per (destination, error) and counted every time.
func (h *Handler) route(ctx context.Context, src *Source, ne *store.NewEvent) {
	ev := &ne.Event
	ne.Destinations, ev.NotRouted = route.Split(src.Filters, route.NewInput(route.FromEvent(ev)), src.Destinations,
		func(dest string, err error) { h.filterFailed(ctx, dest, ev, err) })
}

func (h *Handler) filterFailed(ctx context.Context, dest string, ev *anyhook.Event, err error) {
	if h.routing != nil {
		h.routing.FilterFailed(dest)
	}
	k := failure{dest, err.Error()}
	h.failMu.Lock()
	first := !h.failed[k] && len(h.failed) < maxFailures
	if first {
		if h.failed == nil {
			h.failed = map[failure]bool{}
		}
		h.failed[k] = true
	}
	h.failMu.Unlock()
	if first {
		h.log.WarnContext(ctx, "filter failed: the event is not routed to the destination (logged once per destination and error)",
			"destination", dest, "source", ev.Source, "event_id", ev.ID, "event_type", ev.Type, "err", err)
	}
}

// requestPath is the request's path and query as stored: as received,
// but for the bytes of the query that are not UTF-8 or are control
// characters, percent-encoded (the path itself comes escaped). Any URL
// parser reads the same query from either form, and a text column cannot
// hold the raw bytes.
func requestPath(r *http.Request) string {
	p := r.URL.RequestURI()
	plain := func(c rune) bool { return c >= 0x20 && c != 0x7f && c != utf8.RuneError }
	if !strings.ContainsFunc(p, func(c rune) bool { return !plain(c) }) {
		return p
	}
	var b strings.Builder
	for i := 0; i < len(p); {
		c, n := utf8.DecodeRuneInString(p[i:])
		if plain(c) || n > 1 {
			b.WriteString(p[i : i+n])
		} else {
			fmt.Fprintf(&b, "%%%02X", p[i])
		}
		i += n
	}
	return b.String()
}

// publicURL is the URL as the provider called it, for URL-bound schemes.
// It is never rebuilt from Host or X-Forwarded-*: without public_url it is
// "" and URL-bound schemes refuse the request.
func publicURL(src *Source, r *http.Request) string {
	if src.PublicURL == "" {
		return ""
	}
	if r.URL.RawQuery != "" {
		return src.PublicURL + "?" + r.URL.RawQuery
	}
	return src.PublicURL
}

func safeMessage(err error) string {
	var pe *provider.Error
	if errors.As(err, &pe) {
		return pe.Msg
	}
	return "the request could not be verified"
}

// bodyPool holds the buffers that bodies of unknown length are read into.
var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxPresized is the largest announced body read into one exact allocation.
const maxPresized = 64 << 10

// maxPooled is the largest buffer put back in bodyPool.
const maxPooled = 256 << 10

// readBody reads at most max bytes of the request body (more is a
// *http.MaxBytesError). A body whose length was announced within max is
// read into one allocation of exactly that size; any other goes through a
// pooled buffer and is copied out at its exact size. The result is never
// nil, and never shared with a later request.
func readBody(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	rd := http.MaxBytesReader(w, r.Body, max)
	// Pre-size only small announced bodies: a sender that announces 10 MiB
	// and sends two bytes must not make us hold 10 MiB before it is
	// verified. Larger bodies grow as their bytes actually arrive.
	if n := r.ContentLength; n >= 0 && n <= max && n <= maxPresized {
		body := make([]byte, n)
		if _, err := io.ReadFull(rd, body); err != nil {
			return nil, err
		}
		return body, nil // net/http stops the body at Content-Length
	}
	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer func() {
		if buf.Cap() <= maxPooled {
			bodyPool.Put(buf)
		}
	}()
	if _, err := buf.ReadFrom(rd); err != nil {
		return nil, err
	}
	return append([]byte{}, buf.Bytes()...), nil
}

var jsonType = []string{"application/json"}

// writeResult answers 200 with res. The common answer (one event, an id
// that needs no escaping) is written without reflection, byte for byte as
// encoding/json would.
func writeResult(w http.ResponseWriter, res *Result) {
	if len(res.Events) > 0 || !plainID(res.ID) {
		writeJSON(w, http.StatusOK, res)
		return
	}
	w.Header()["Content-Type"] = jsonType
	w.WriteHeader(http.StatusOK)
	b := make([]byte, 0, 32+len(res.Status)+len(res.ID))
	b = append(b, `{"status":"`...)
	b = append(b, res.Status...)
	b = append(b, `","id":"`...)
	b = append(b, res.ID...)
	b = append(b, "\"}\n"...)
	w.Write(b)
}

// plainID reports whether id is written in JSON as is.
func plainID(id string) bool {
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(v)
}
