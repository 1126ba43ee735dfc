// Package tracing is AnyHook's OpenTelemetry tracing: the tracer provider
// set up from the standard OTEL_* environment variables (off unless an
// exporter is configured), and the W3C trace context carried in HTTP
// headers — read from a provider's request, kept with the event in its
// stored headers, written on each delivery attempt.
//
// Off means no provider at all: ingest and delivery are handed a nil
// trace.TracerProvider and skip every tracing step, so that tracing costs
// nothing when it is not wanted.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// Attribute keys of AnyHook's own span attributes (the HTTP ones follow
// the OpenTelemetry semantic conventions).
const (
	Source       = attribute.Key("anyhook.source")
	Verification = attribute.Key("anyhook.verification")
	Outcome      = attribute.Key("anyhook.outcome")
	EventID      = attribute.Key("anyhook.event.id")
	EventIDs     = attribute.Key("anyhook.event.ids")
	EventCount   = attribute.Key("anyhook.event.count")
	Duplicates   = attribute.Key("anyhook.event.duplicates")
	Destination  = attribute.Key("anyhook.destination")
	DeliveryID   = attribute.Key("anyhook.delivery.id")
	Attempt      = attribute.Key("anyhook.delivery.attempt")
	Replay       = attribute.Key("anyhook.delivery.replay")
	Status       = attribute.Key("anyhook.delivery.status")
	ClaimLimit   = attribute.Key("anyhook.claim.limit")
	ClaimCount   = attribute.Key("anyhook.claim.count")
)

// propagator reads and writes the W3C traceparent and tracestate headers.
var propagator = propagation.TraceContext{}

// Extract returns ctx carrying the remote span context of h's
// traceparent (and tracestate), when it has a valid one; else ctx.
func Extract(ctx context.Context, h http.Header) context.Context {
	return propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// Inject replaces h's traceparent and tracestate with the span context
// of ctx (removes them when ctx has none).
func Inject(ctx context.Context, h http.Header) {
	h.Del("Traceparent")
	h.Del("Tracestate")
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
}

// Tracing is a configured tracer provider.
type Tracing struct {
	tp *sdktrace.TracerProvider
}

// Provider is the tracer provider to hand to ingest and delivery.
func (t *Tracing) Provider() trace.TracerProvider { return t.tp }

// Shutdown exports the spans still buffered and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error { return t.tp.Shutdown(ctx) }

// FromEnv sets up tracing as the process's OTEL_* environment variables
// say, or returns nil when they configure no exporter: tracing is off
// unless OTEL_TRACES_EXPORTER is otlp, or an OTLP endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is
// set and OTEL_TRACES_EXPORTER does not say none; OTEL_SDK_DISABLED=true
// turns it off whatever the rest says. The exporter is OTLP over HTTP
// (http/protobuf, the default, or http/json) or gRPC, as
// OTEL_EXPORTER_OTLP_[TRACES_]PROTOCOL says; it reads its own variables
// (OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT, _COMPRESSION, _CERTIFICATE …),
// as the SDK reads OTEL_TRACES_SAMPLER and OTEL_BSP_*. The resource is
// service.name anyhook and service.version version, overridden by
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES. A value AnyHook cannot
// use is an error naming the variable. Export failures are logged to log
// at warn.
func FromEnv(ctx context.Context, version string, log *slog.Logger) (*Tracing, error) {
	on, err := enabled()
	if err != nil || !on {
		return nil, err
	}
	grpc, err := protocolGRPC()
	if err != nil {
		return nil, err
	}
	if err := checkSampler(); err != nil {
		return nil, err
	}
	if err := checkExporterVars(); err != nil {
		return nil, err
	}
	res, err := resource.New(ctx,
		resource.WithTelemetrySDK(),
		resource.WithAttributes(semconv.ServiceName("anyhook"), semconv.ServiceVersion(version)),
		resource.WithFromEnv())
	if err != nil {
		return nil, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err)
	}
	var exp sdktrace.SpanExporter
	if grpc {
		exp, err = otlptracegrpc.New(ctx)
	} else {
		exp, err = otlptracehttp.New(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("OTLP trace exporter (OTEL_EXPORTER_OTLP_*): %w", err)
	}
	if log != nil {
		otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { log.Warn("tracing", "err", err) }))
	}
	return &Tracing{tp: sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))}, nil
}

// enabled says whether the environment asks for an exporter.
func enabled() (bool, error) {
	if v := strings.TrimSpace(os.Getenv("OTEL_SDK_DISABLED")); v != "" {
		off, err := strconv.ParseBool(v)
		if err != nil {
			return false, fmt.Errorf("OTEL_SDK_DISABLED: %q is not true or false", v)
		}
		if off {
			return false, nil
		}
	}
	exporters := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER"))
	if exporters == "" {
		return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
	}
	otlp := false
	for e := range strings.SplitSeq(exporters, ",") {
		switch e = strings.ToLower(strings.TrimSpace(e)); e {
		case "otlp":
			otlp = true
		case "none":
			return false, nil
		default:
			return false, fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not supported (otlp or none)", e)
		}
	}
	return otlp, nil
}

// protocolGRPC reads the OTLP protocol: the traces' own variable, else
// the general one; true for grpc, false for http/protobuf (the default)
// and http/json.
func protocolGRPC() (bool, error) {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		switch v := strings.TrimSpace(os.Getenv(k)); v {
		case "":
			continue
		case "http/protobuf", "http/json":
			return false, nil
		case "grpc":
			return true, nil
		default:
			return false, fmt.Errorf("%s: %q is not grpc, http/protobuf or http/json", k, v)
		}
	}
	return false, nil
}

// checkSampler refuses what the SDK would silently replace by its
// default: an unknown OTEL_TRACES_SAMPLER, or a ratio that is not a
// number in [0, 1].
func checkSampler() error {
	s := strings.ToLower(strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER")))
	switch s {
	case "", "always_on", "always_off", "parentbased_always_on", "parentbased_always_off":
		return nil
	case "traceidratio", "parentbased_traceidratio":
		arg := strings.TrimSpace(os.Getenv("OTEL_TRACES_SAMPLER_ARG"))
		if arg == "" {
			return nil
		}
		if r, err := strconv.ParseFloat(arg, 64); err != nil || r < 0 || r > 1 {
			return fmt.Errorf("OTEL_TRACES_SAMPLER_ARG: %q is not a ratio between 0 and 1", arg)
		}
		return nil
	}
	return fmt.Errorf("OTEL_TRACES_SAMPLER: %q is not always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio", s)
}

// checkExporterVars refuses what the OTLP exporter and the batch span
// processor would only log (on stderr, not in AnyHook's log) and then
// ignore or misread: an endpoint that is not an http:// or https:// URL
// (127.0.0.1:4318 parses as the scheme "127.0.0.1"), a header list that
// is not key=value pairs, a compression other than gzip or none, and a
// timeout, delay or size that is not a whole number (milliseconds for
// the timeouts and the delay: 10000, not 10s).
func checkExporterVars() error {
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		v := strings.TrimSpace(os.Getenv(k))
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%s: %q is not an http:// or https:// URL (e.g. http://localhost:4318)", k, v)
		}
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"} {
		for kv := range strings.SplitSeq(os.Getenv(k), ",") {
			if kv = strings.TrimSpace(kv); kv == "" {
				continue
			}
			if name, _, ok := strings.Cut(kv, "="); !ok || strings.TrimSpace(name) == "" {
				return fmt.Errorf("%s: %q is not key=value (a list is key=value,key2=value2)", k, kv)
			}
		}
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"} {
		if v := strings.TrimSpace(os.Getenv(k)); v != "" && v != "gzip" && v != "none" {
			return fmt.Errorf("%s: %q is not gzip or none", k, v)
		}
	}
	for _, k := range []string{"OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
		"OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_EXPORT_TIMEOUT", "OTEL_BSP_MAX_QUEUE_SIZE", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"} {
		v := strings.TrimSpace(os.Getenv(k))
		if v == "" {
			continue
		}
		if n, err := strconv.Atoi(v); err != nil || n < 0 {
			what := "a whole number of milliseconds (10000, not 10s)"
			if strings.HasSuffix(k, "_SIZE") {
				what = "a whole number"
			}
			return fmt.Errorf("%s: %q is not %s", k, v, what)
		}
	}
	return nil
}
