package delivery

import (
	"context"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/tracing"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// claimResult is what one claim took, and the span that recorded it.
type claimResult struct {
	claims []store.Claim
	span   trace.SpanContext // invalid when tracing is off
}

// claim claims up to limit due deliveries of d (in order when d says
// order: per_object). With tracing on, a claim
// that took something (or failed) is a span linked to the trace of each
// event it took; an empty claim leaves none, or an idle destination's
// polling would fill the traces.
func (e *Engine) claim(ctx context.Context, d *Destination, limit int) (claimResult, error) {
	claim := e.st.Claim
	if d.InOrder {
		claim = e.st.ClaimInOrder
	}
	if e.tracer == nil {
		cs, err := claim(ctx, d.Name, limit, e.Lease(d))
		return claimResult{claims: cs}, err
	}
	start := time.Now() // spans are on real time, whatever Options.Now says
	cs, err := claim(ctx, d.Name, limit, e.Lease(d))
	if (err == nil && len(cs) == 0) || ctx.Err() != nil {
		return claimResult{claims: cs}, err
	}
	links := make([]trace.Link, 0, len(cs))
	for _, c := range cs {
		if sc := trace.SpanContextFromContext(tracing.Extract(ctx, c.Event.Header)); sc.IsValid() {
			links = append(links, trace.Link{SpanContext: sc})
		}
	}
	_, span := e.tracer.Start(ctx, "claim", trace.WithTimestamp(start), trace.WithLinks(links...),
		trace.WithAttributes(tracing.Destination.String(d.Name), tracing.ClaimLimit.Int(limit), tracing.ClaimCount.Int(len(cs))))
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
	return claimResult{claims: cs, span: span.SpanContext()}, err
}

// peer is the semantic-convention attributes of d's URL: scheme, host
// and port. Not url.full: a destination's URL can hold a secret (a token
// in its path or query), and spans leave the gateway.
func peer(d *Destination) []attribute.KeyValue {
	u, err := url.Parse(d.URL)
	if err != nil {
		return nil
	}
	kv := []attribute.KeyValue{semconv.URLScheme(u.Scheme), semconv.ServerAddress(u.Hostname())}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		port = 80
		if u.Scheme == "https" {
			port = 443
		}
	}
	return append(kv, semconv.ServerPort(port))
}

// startAttempt starts the client span of one attempt of c, in the trace
// of the event's stored traceparent (a new trace when it has none),
// linked to the claim that took it.
func (e *Engine) startAttempt(ctx context.Context, d *Destination, c store.Claim, claim trace.SpanContext) (context.Context, trace.Span) {
	attempt := c.Delivery.AttemptCount
	kv := append(peer(d), semconv.HTTPRequestMethodPost, tracing.Destination.String(d.Name),
		tracing.DeliveryID.String(c.Delivery.ID), tracing.EventID.String(c.Event.ID),
		tracing.Attempt.Int(attempt), tracing.Replay.Bool(c.Delivery.Replay))
	if attempt > 1 {
		kv = append(kv, semconv.HTTPRequestResendCount(attempt-1))
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(kv...)}
	if claim.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: claim}))
	}
	// Named by the semantic conventions' rule for HTTP client spans: the
	// method (the URL's path may hold a secret, and is no template).
	return e.tracer.Start(tracing.Extract(ctx, c.Event.Header), "POST", opts...)
}

// endAttempt ends an attempt's span with its answer (or error) and the
// outcome it led to.
func endAttempt(span trace.Span, code int, err error, out store.Outcome) {
	span.SetAttributes(tracing.Status.String(string(out.Status)))
	switch {
	case err != nil:
		et := semconv.ErrorTypeOther
		if strings.HasPrefix(err.Error(), "timeout") {
			et = semconv.ErrorTypeKey.String("timeout")
		}
		span.SetAttributes(et)
		span.SetStatus(codes.Error, out.Result.Error)
	default:
		span.SetAttributes(semconv.HTTPResponseStatusCode(code))
		if out.Status != anyhook.StatusDelivered {
			// Any answer but a 2xx is a failed delivery (a 3xx too).
			span.SetAttributes(semconv.ErrorTypeKey.String(strconv.Itoa(code)))
			span.SetStatus(codes.Error, out.Result.Error)
		}
	}
	span.End()
}

// endAborted ends the span of an attempt that shutdown aborted.
func endAborted(span trace.Span, err error) {
	span.SetAttributes(semconv.ErrorTypeKey.String("aborted"))
	span.SetStatus(codes.Error, "aborted by shutdown: "+err.Error())
	span.End()
}
