package tracing_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"

	"github.com/anyhook/anyhook/internal/tracing"
)

// otelVars are the variables these tests set (each test starts with
// them all empty, whatever the environment it runs in).
var otelVars = []string{"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT",
	"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_SERVICE_NAME", "OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG", "OTEL_EXPORTER_OTLP_HEADERS",
	"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TIMEOUT",
	"OTEL_BSP_SCHEDULE_DELAY", "OTEL_BSP_MAX_QUEUE_SIZE"}

// fromEnv is FromEnv with exactly the OTEL_* variables of m set.
func fromEnv(t *testing.T, m map[string]string) (*tracing.Tracing, error) {
	t.Helper()
	for _, k := range otelVars {
		t.Setenv(k, m[k])
	}
	return tracing.FromEnv(t.Context(), "test", nil)
}

func TestOffUnlessAnExporterIsNamed(t *testing.T) {
	for name, m := range map[string]map[string]string{
		"nothing set":            {},
		"a service name only":    {"OTEL_SERVICE_NAME": "x", "OTEL_TRACES_SAMPLER": "always_on"},
		"exporter none":          {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
		"SDK disabled":           {"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"},
		"otlp and none together": {"OTEL_TRACES_EXPORTER": "otlp,none"},
	} {
		tr, err := fromEnv(t, m)
		if err != nil || tr != nil {
			t.Errorf("%s: tracing %v, err %v; want off", name, tr, err)
		}
	}
	for name, m := range map[string]map[string]string{
		"exporter otlp":    {"OTEL_TRACES_EXPORTER": "otlp"},
		"an endpoint":      {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
		"traces endpoint":  {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"},
		"SDK not disabled": {"OTEL_SDK_DISABLED": "false", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
		"exporter settings": {"OTEL_EXPORTER_OTLP_ENDPOINT": "https://collector.example:4318", "OTEL_EXPORTER_OTLP_HEADERS": "api-key=abc, x-team=pay",
			"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip", "OTEL_EXPORTER_OTLP_TIMEOUT": "10000", "OTEL_BSP_SCHEDULE_DELAY": "500", "OTEL_BSP_MAX_QUEUE_SIZE": "4096"},
	} {
		tr, err := fromEnv(t, m)
		if err != nil || tr == nil {
			t.Errorf("%s: tracing %v, err %v; want on", name, tr, err)
			continue
		}
		tr.Shutdown(context.Background())
	}
}

func TestUnusableValuesNameTheVariable(t *testing.T) {
	for m, want := range map[*map[string]string]string{
		{"OTEL_TRACES_EXPORTER": "jaeger"}:                                                                                     "OTEL_TRACES_EXPORTER",
		{"OTEL_SDK_DISABLED": "perhaps"}:                                                                                       "OTEL_SDK_DISABLED",
		{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_PROTOCOL": "thrift"}:                                              "OTEL_EXPORTER_OTLP_PROTOCOL",
		{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "udp"}:                                          "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
		{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "sometimes"}:                                                   "OTEL_TRACES_SAMPLER",
		{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}:                "OTEL_TRACES_SAMPLER_ARG",
		{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "half"}: "OTEL_TRACES_SAMPLER_ARG",
		// What the SDK would only log on stderr and then ignore or misread.
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "127.0.0.1:4318"}:                               "OTEL_EXPORTER_OTLP_ENDPOINT",
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "htp://collector:4318/v1/traces"}:        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
		{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_HEADERS": "api-key"}:       "OTEL_EXPORTER_OTLP_HEADERS",
		{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "a=b,=c"}: "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
		{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}:      "OTEL_EXPORTER_OTLP_COMPRESSION",
		{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}:           "OTEL_EXPORTER_OTLP_TIMEOUT",
		{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_BSP_SCHEDULE_DELAY": "5s"}:               "OTEL_BSP_SCHEDULE_DELAY",
		{"OTEL_TRACES_EXPORTER": "otlp", "OTEL_BSP_MAX_QUEUE_SIZE": "lots"}:             "OTEL_BSP_MAX_QUEUE_SIZE",
	} {
		tr, err := fromEnv(t, *m)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: tracing %v, err %v; want an error naming %s", *m, tr, err, want)
		}
	}
}

// receiver is an OTLP/gRPC trace receiver keeping the names of the spans
// it was sent.
type receiver struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
}

func (r *receiver) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				r.names = append(r.names, s.Name)
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// OTEL_EXPORTER_OTLP_PROTOCOL=grpc exports over gRPC: a real gRPC server on
// 127.0.0.1 receives the span, flushed by Shutdown.
func TestExportsOverGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	rcv := &receiver{}
	coltracepb.RegisterTraceServiceServer(srv, rcv)
	go srv.Serve(ln)
	defer srv.Stop()
	tr, err := fromEnv(t, map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + ln.Addr().String(),
		"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
	})
	if err != nil || tr == nil {
		t.Fatalf("tracing %v, err %v", tr, err)
	}
	_, span := tr.Provider().Tracer("test").Start(t.Context(), "over grpc")
	span.End()
	if err := tr.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.names) != 1 || rcv.names[0] != "over grpc" {
		t.Errorf("received spans %v, want [over grpc]", rcv.names)
	}
}
