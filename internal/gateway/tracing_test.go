package gateway_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// traced runs a gateway like setup's, on the SQLite file db (its log key
// beside it), whose spans go to an in-memory exporter as each ends; extra
// is appended to the destination's settings.
func traced(t *testing.T, sk *sinktest.Sink, db string, extra ...string) (*env, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
database: %q
log: {key_file: %q}
delivery: {poll_interval: 50ms, grace: 1s}
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  billing:
    url: %s/hooks?token=secret-in-url
    sources: [stripe]
    backoff: {initial: 10ms, max: 40ms}
%s`, "sqlite:"+db, db+".key", stripeSecret, sk.URL, strings.Join(extra, ""))
	sig := newSignals()
	base, g := gatewaytest.Start(t, yaml, gateway.Options{Observer: sig, Tracer: tp})
	return &env{url: base, gw: g, store: g.Store(), sink: sk, signals: sig}, exp
}

// spans are the ended spans named name.
func spans(exp *tracetest.InMemoryExporter, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// waitSpans waits until n spans named name have ended, and returns them.
func waitSpans(t *testing.T, exp *tracetest.InMemoryExporter, name string, n int) []tracetest.SpanStub {
	t.Helper()
	return testwait.Value(t, fmt.Sprintf("%d %q spans", n, name), func() ([]tracetest.SpanStub, error) {
		got := spans(exp, name)
		if len(got) < n {
			return nil, fmt.Errorf("%d spans", len(got))
		}
		return got, nil
	})
}

func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// traceparent parses a W3C traceparent header.
func traceparent(t *testing.T, v string) trace.SpanContext {
	t.Helper()
	parts := strings.Split(v, "-")
	if len(parts) != 4 || parts[0] != "00" {
		t.Fatalf("traceparent %q is not version 00", v)
	}
	tid, err1 := trace.TraceIDFromHex(parts[1])
	sid, err2 := trace.SpanIDFromHex(parts[2])
	if err1 != nil || err2 != nil {
		t.Fatalf("traceparent %q: %v %v", v, err1, err2)
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid})
}

// A provider's request that carries a trace context: the ingest span
// continues it, verify and record are its children, each delivery attempt
// is a client span in that trace with its status, and the destination
// receives a traceparent naming the attempt's span in the same trace,
// with the provider's tracestate.
func TestTracingContinuesTheProvidersTrace(t *testing.T) {
	t.Parallel()
	e, exp := traced(t, sinktest.New(t, 503, 200), filepath.Join(t.TempDir(), "anyhook.db"))
	const (
		incomingTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		incomingSpan  = "00f067aa0ba902b7"
	)
	body := []byte(`{"id":"evt_traced","object":"event","type":"invoice.paid","created":1700000000,"data":{"object":{"id":"in_1"}}}`)
	req := stripeRequest(t, e.url+"/webhooks/stripe", stripeSecret, body, time.Now())
	req.Header.Set("Traceparent", "00-"+incomingTrace+"-"+incomingSpan+"-01")
	req.Header.Set("Tracestate", "vendor=abc")
	a := do(t, req)
	if a.Code != 200 {
		t.Fatalf("ingest answered %d %s", a.Code, a.Error)
	}
	e.waitStatus(t, a.ID, anyhook.StatusDelivered)

	server := waitSpans(t, exp, "POST /webhooks/{source}", 1)[0]
	if server.SpanKind != trace.SpanKindServer || server.SpanContext.TraceID().String() != incomingTrace ||
		!server.Parent.IsRemote() || server.Parent.SpanID().String() != incomingSpan {
		t.Fatalf("ingest span: kind %v, trace %s, parent %s (remote %v); want a server span continuing %s-%s",
			server.SpanKind, server.SpanContext.TraceID(), server.Parent.SpanID(), server.Parent.IsRemote(), incomingTrace, incomingSpan)
	}
	if c := attr(server, "http.response.status_code").AsInt64(); c != 200 {
		t.Errorf("ingest span http.response.status_code = %d", c)
	}
	if got := attr(server, "anyhook.event.ids").AsStringSlice(); !slices.Equal(got, []string{a.ID}) {
		t.Errorf("ingest span anyhook.event.ids = %v, want [%s]", got, a.ID)
	}
	if attr(server, "anyhook.source").AsString() != "stripe" || attr(server, "http.route").AsString() != "/webhooks/{source}" ||
		attr(server, "anyhook.outcome").AsString() != "accepted" {
		t.Errorf("ingest span attributes = %v", server.Attributes)
	}
	if server.SpanContext.TraceState().Get("vendor") != "abc" {
		t.Errorf("ingest span tracestate = %q, want the provider's", server.SpanContext.TraceState())
	}
	for _, name := range []string{"verify", "record"} {
		s := spans(exp, name)
		if len(s) != 1 || s[0].Parent.SpanID() != server.SpanContext.SpanID() || s[0].SpanContext.TraceID() != server.SpanContext.TraceID() {
			t.Fatalf("%q spans = %+v; want one, a child of the ingest span", name, s)
		}
	}
	if v := attr(spans(exp, "verify")[0], "anyhook.verification").AsString(); v == "" {
		t.Error("verify span names no scheme")
	}

	// The event keeps the ingest span's context with its headers.
	ev, err := e.store.Event(t.Context(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got := traceparent(t, ev.Header.Get("Traceparent")); got.SpanID() != server.SpanContext.SpanID() || got.TraceID() != server.SpanContext.TraceID() {
		t.Errorf("stored traceparent = %s, want the ingest span's", ev.Header.Get("Traceparent"))
	}

	attempts := waitSpans(t, exp, "POST", 2)
	claimedBy := 0 // attempts that link to a claim
	got := e.sink.Requests()
	if len(attempts) != 2 || len(got) != 2 {
		t.Fatalf("%d attempt spans, %d requests; want 2 each", len(attempts), len(got))
	}
	for i, s := range attempts {
		if s.SpanKind != trace.SpanKindClient || s.Parent.SpanID() != server.SpanContext.SpanID() || s.SpanContext.TraceID() != server.SpanContext.TraceID() {
			t.Errorf("attempt %d span: kind %v, parent %s; want a client span, child of the ingest span %s", i+1, s.SpanKind, s.Parent.SpanID(), server.SpanContext.SpanID())
		}
		if n := attr(s, "anyhook.delivery.attempt").AsInt64(); n != int64(i+1) {
			t.Errorf("attempt %d span anyhook.delivery.attempt = %d", i+1, n)
		}
		if attr(s, "http.request.method").AsString() != "POST" || attr(s, "anyhook.destination").AsString() != "billing" ||
			attr(s, "server.address").AsString() != "127.0.0.1" || attr(s, "anyhook.event.id").AsString() != a.ID {
			t.Errorf("attempt %d span attributes = %v", i+1, s.Attributes)
		}
		for _, kv := range s.Attributes {
			if strings.Contains(kv.Value.String(), "secret-in-url") {
				t.Errorf("attempt %d span attribute %s holds the destination URL's query: %s", i+1, kv.Key, kv.Value.String())
			}
		}
		// An attempt links to the claim that took it. The first attempt
		// is usually claimed as the event is recorded (claim at ingest),
		// with no claim span of its own; the retry is claimed by the
		// dispatcher and links to its claim.
		if len(s.Links) > 1 || (i == 1 && len(s.Links) != 1) {
			t.Errorf("attempt %d span links = %v; want its claim's (the first attempt may have none)", i+1, s.Links)
		}
		claimedBy += len(s.Links)
		// The destination got this attempt's span as its parent.
		tp := traceparent(t, got[i].Header.Get("Traceparent"))
		if tp.TraceID() != server.SpanContext.TraceID() || tp.SpanID() != s.SpanContext.SpanID() {
			t.Errorf("attempt %d sent traceparent %s; want trace %s, span %s", i+1, got[i].Header.Get("Traceparent"), server.SpanContext.TraceID(), s.SpanContext.SpanID())
		}
		if ts := got[i].Header.Get("Tracestate"); ts != "vendor=abc" {
			t.Errorf("attempt %d sent tracestate %q, want the provider's", i+1, ts)
		}
	}
	failed, ok := attempts[0], attempts[1]
	if attr(failed, "http.response.status_code").AsInt64() != 503 || attr(failed, "error.type").AsString() != "503" ||
		failed.Status.Code != codes.Error || attr(failed, "anyhook.delivery.status").AsString() != "pending" {
		t.Errorf("failed attempt span: status %v, attributes %v", failed.Status, failed.Attributes)
	}
	if attr(ok, "http.response.status_code").AsInt64() != 200 || ok.Status.Code == codes.Error ||
		attr(ok, "http.request.resend_count").AsInt64() != 1 || attr(ok, "anyhook.delivery.status").AsString() != "delivered" {
		t.Errorf("delivered attempt span: status %v, attributes %v", ok.Status, ok.Attributes)
	}

	// Each claim that took the event links to the event's trace.
	linked := 0
	for _, c := range spans(exp, "claim") {
		if attr(c, "anyhook.claim.count").AsInt64() < 1 {
			t.Errorf("a claim span of an empty claim: %v", c.Attributes)
		}
		for _, l := range c.Links {
			if l.SpanContext.SpanID() == server.SpanContext.SpanID() {
				linked++
			}
		}
	}
	if linked != claimedBy {
		t.Errorf("%d claim spans link to the event's trace, want %d (one per attempt the dispatcher claimed)", linked, claimedBy)
	}
}

// A request without a trace context starts a trace, and a delivery made
// later by another gateway process (a restart) continues it: the trace
// context is kept with the event.
func TestTracingContinuesAfterRestart(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "anyhook.db")
	sk := sinktest.New(t)
	first, exp1 := traced(t, sk, db)
	a := first.sendStripe(t, "evt_restart")
	first.waitStatus(t, a.ID, anyhook.StatusDelivered)
	server := waitSpans(t, exp1, "POST /webhooks/{source}", 1)[0]
	if server.Parent.IsValid() {
		t.Fatalf("ingest span of a request without traceparent has parent %s", server.Parent.SpanID())
	}
	if err := first.gw.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}

	second, exp2 := traced(t, sk, db)
	if _, err := second.store.Replay(t.Context(), a.ID, []string{"billing"}, store.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	got := sk.Wait(t, 2)
	replayed := got[1]
	if replayed.Header.Get("X-AnyHook-Replay") != "true" {
		t.Fatalf("second request is not the replay: %v", replayed.Header)
	}
	attempt := waitSpans(t, exp2, "POST", 1)[0]
	tp := traceparent(t, replayed.Header.Get("Traceparent"))
	if attempt.SpanContext.TraceID() != server.SpanContext.TraceID() || attempt.Parent.SpanID() != server.SpanContext.SpanID() {
		t.Errorf("replayed attempt span in trace %s under %s; want the first process's ingest span %s-%s",
			attempt.SpanContext.TraceID(), attempt.Parent.SpanID(), server.SpanContext.TraceID(), server.SpanContext.SpanID())
	}
	if tp.TraceID() != server.SpanContext.TraceID() || tp.SpanID() != attempt.SpanContext.SpanID() {
		t.Errorf("replay sent traceparent %s; want trace %s, span %s", replayed.Header.Get("Traceparent"), server.SpanContext.TraceID(), attempt.SpanContext.SpanID())
	}
	if attr(attempt, "anyhook.delivery.replay").AsBool() != true {
		t.Errorf("replayed attempt span attributes = %v", attempt.Attributes)
	}
}

// Tracing off (no Tracer): nothing is added to the stored headers, and a
// provider's traceparent is passed on untouched, as any other header.
func TestTracingOffPassesTraceparentThrough(t *testing.T) {
	t.Parallel()
	e := setup(t, sinktest.New(t), "")
	body := []byte(`{"id":"evt_untraced","object":"event","type":"invoice.paid","created":1700000000,"data":{"object":{"id":"in_1"}}}`)
	req := stripeRequest(t, e.url+"/webhooks/stripe", stripeSecret, body, time.Now())
	const incoming = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	req.Header.Set("Traceparent", incoming)
	a := do(t, req)
	e.waitStatus(t, a.ID, anyhook.StatusDelivered)
	if got := e.sink.Requests()[0].Header.Get("Traceparent"); got != incoming {
		t.Errorf("destination got traceparent %q, want the provider's %q", got, incoming)
	}
	a = e.sendStripe(t, "evt_no_trace")
	e.waitStatus(t, a.ID, anyhook.StatusDelivered)
	ev, err := e.store.Event(t.Context(), a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if v := ev.Header.Get("Traceparent"); v != "" {
		t.Errorf("tracing off stored a traceparent %q", v)
	}
	if got := e.sink.Requests()[1].Header.Get("Traceparent"); got != "" {
		t.Errorf("tracing off sent a traceparent %q", got)
	}
}

// An attempt that got no answer (the destination refuses connections)
// is an error span without a status code, and says it led to dead.
func TestTracingAttemptWithoutAnswer(t *testing.T) {
	t.Parallel()
	sk := sinktest.New(t)
	sk.Close() // its port now refuses connections
	e, exp := traced(t, sk, filepath.Join(t.TempDir(), "anyhook.db"), "    max_attempts: 1\n")
	a := e.sendStripe(t, "evt_refused")
	e.waitStatus(t, a.ID, anyhook.StatusDead)
	s := waitSpans(t, exp, "POST", 1)[0]
	if s.Status.Code != codes.Error || !strings.Contains(s.Status.Description, "billing") ||
		attr(s, "error.type").AsString() != "_OTHER" || attr(s, "anyhook.delivery.status").AsString() != "dead" {
		t.Errorf("attempt span: status %+v, attributes %v", s.Status, s.Attributes)
	}
	if attr(s, "http.response.status_code").Type() != attribute.EMPTY {
		t.Errorf("attempt span without an answer has http.response.status_code %v", attr(s, "http.response.status_code"))
	}
}
