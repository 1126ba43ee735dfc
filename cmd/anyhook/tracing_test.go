package main

import (
	"bytes"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes each export
// request (protobuf) and keeps its spans with their service.name.
type otlpReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	spans   []*tracepb.Span
	service map[string]bool
	errs    []string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{service: map[string]bool{}}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, err := io.ReadAll(req.Body)
		var ex coltracepb.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(b, &ex)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		if req.URL.Path != "/v1/traces" || req.Header.Get("Content-Type") != "application/x-protobuf" || err != nil {
			r.errs = append(r.errs, req.Method+" "+req.URL.Path+" "+req.Header.Get("Content-Type")+": "+errText(err))
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		for _, rs := range ex.ResourceSpans {
			for _, kv := range rs.GetResource().GetAttributes() {
				if kv.Key == "service.name" {
					r.service[kv.GetValue().GetStringValue()] = true
				}
			}
			for _, ss := range rs.ScopeSpans {
				r.spans = append(r.spans, ss.Spans...)
			}
		}
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

func errText(err error) string {
	if err == nil {
		return "unexpected request"
	}
	return err.Error()
}

// named are the received spans called name.
func (r *otlpReceiver) named(name string) []*tracepb.Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*tracepb.Span
	for _, s := range r.spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

func intAttr(s *tracepb.Span, key string) int64 {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.GetValue().GetIntValue()
		}
	}
	return -1
}

// The real binary, told by the OTEL_* environment to export to an OTLP/HTTP
// receiver: a provider's traced request and its delivery arrive there as
// spans of the provider's trace, flushed at the graceful stop.
func TestTracingExportsToOTLPReceiver(t *testing.T) {
	t.Parallel()
	rcv := newOTLPReceiver(t)
	dest := newRecorder(t, false)
	cmd := exec.Command(binary, "serve", "--config", writeConfig(t, t.TempDir(), gatewayConfig("sqlite:anyhook.db", dest.URL, "reclaim")), "--log-level", "warn")
	cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT="+rcv.URL, "OTEL_SERVICE_NAME=anyhook-otlp-test",
		"OTEL_TRACES_SAMPLER=parentbased_always_on")
	p, err := startCmd(t, cmd)
	if err != nil {
		t.Fatal(err)
	}
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	body, h, err := stripeEvent("evt_otlp", 0)
	if err != nil {
		t.Fatal(err)
	}
	h.Set("Traceparent", "00-"+traceID+"-b7ad6b7169203331-01")
	code, id, err := postEvent(http.DefaultClient, p.url, body, h)
	if err != nil || code != 200 {
		t.Fatalf("send = %d, %v", code, err)
	}
	dest.awaitAll(t, map[string]bool{id: true})
	// The batch processor exports every 5 s by default: what arrives
	// before the stop is not awaited; the stop must flush the rest.
	p.stopExitsZero(t)

	rcv.mu.Lock()
	errs, services := rcv.errs, rcv.service
	rcv.mu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("receiver refused: %v", errs)
	}
	if !services["anyhook-otlp-test"] {
		t.Errorf("service.name = %v, want OTEL_SERVICE_NAME's", services)
	}
	// No "claim" span is required: the event's delivery is usually
	// claimed in its ingest transaction (claim at ingest), which has none;
	// internal/gateway's tracing test holds the claim spans of retries.
	for _, name := range []string{"POST /webhooks/{source}", "verify", "record", "POST"} {
		spans := rcv.named(name)
		if len(spans) == 0 {
			t.Errorf("no %q span arrived", name)
			continue
		}
		if got := hex.EncodeToString(spans[0].TraceId); got != traceID {
			t.Errorf("%q span in trace %s, want the provider's %s", name, got, traceID)
		}
	}
	if s := rcv.named("POST"); len(s) > 0 {
		if c := intAttr(s[0], "http.response.status_code"); c != 200 || s[0].Kind != tracepb.Span_SPAN_KIND_CLIENT {
			t.Errorf("attempt span: status code %d, kind %v", c, s[0].Kind)
		}
		server := rcv.named("POST /webhooks/{source}")
		if len(server) > 0 && !bytes.Equal(s[0].ParentSpanId, server[0].SpanId) {
			t.Errorf("attempt span's parent %x is not the ingest span %x", s[0].ParentSpanId, server[0].SpanId)
		}
	}
}

// An OTEL_* value AnyHook cannot use stops serve with exit 2, naming the
// variable.
func TestTracingBadEnvironmentExits2(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, t.TempDir(), gatewayConfig("sqlite:anyhook.db", "http://127.0.0.1:9/", "reclaim"))
	for env, want := range map[string]string{
		"OTEL_TRACES_EXPORTER=zipkin":        "OTEL_TRACES_EXPORTER",
		"OTEL_EXPORTER_OTLP_PROTOCOL=thrift": "OTEL_EXPORTER_OTLP_PROTOCOL",
		"OTEL_TRACES_SAMPLER=sometimes":      "OTEL_TRACES_SAMPLER",
		"OTEL_TRACES_SAMPLER_ARG=1.5":        "OTEL_TRACES_SAMPLER_ARG",
		"OTEL_SDK_DISABLED=perhaps":          "OTEL_SDK_DISABLED",
	} {
		cmd := exec.Command(binary, "serve", "--config", cfg)
		cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=otlp", env)
		if strings.HasPrefix(env, "OTEL_TRACES_SAMPLER_ARG") {
			cmd.Env = append(cmd.Env, "OTEL_TRACES_SAMPLER=traceidratio")
		}
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.Run()
		msg := strings.TrimSpace(stderr.String())
		if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
			t.Errorf("%s: exit %d, stderr %q; want 2 and one line naming %s", env, cmd.ProcessState.ExitCode(), msg, want)
		}
	}
}
