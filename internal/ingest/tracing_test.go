package ingest_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/anyhook/anyhook/internal/ingest"
	"github.com/anyhook/anyhook/internal/provider"
)

// offBudget is what the handler allocated per stripe 1 KiB request before
// tracing existed (BenchmarkHandler on the commit before it, bff4d40):
// tracing off must not add one allocation.
const offBudget = 55

func TestTracingOffAllocatesNothingMore(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	serve := handlerFixture(t, "stripe", 1<<10, nil)
	if allocs := testing.AllocsPerRun(200, serve); allocs > offBudget {
		t.Errorf("tracing off: %.0f allocations per request, over the %d the handler made before tracing", allocs, offBudget)
	}
}

// A refused request is traced too: its verify span failed, its request
// span carries the 400 (a client's error: not the span's), and nothing was
// recorded.
func TestTracingRefusedRequest(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer tp.Shutdown(context.Background())
	p, err := provider.New(provider.Settings{Provider: "stripe", Secrets: []string{fuzzSecret}, Tolerance: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	h := ingest.New(ingest.Options{
		Sources:  []ingest.Source{{Name: "stripe", Provider: p, MaxBody: 1 << 20, Destinations: []string{"d"}}},
		Recorder: nopRecorder{},
		Tracer:   tp,
	})
	req := httptest.NewRequest("POST", "/webhooks/stripe", strings.NewReader(`{"id":"evt_1"}`))
	req.SetPathValue("source", "stripe")
	req.Header.Set("Stripe-Signature", "t=1,v1=00")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusBadRequest {
		t.Fatalf("status %d", w.Code)
	}
	byName := map[string]tracetest.SpanStub{}
	for _, s := range exp.GetSpans() {
		byName[s.Name] = s
	}
	server, verify := byName["POST /webhooks/{source}"], byName["verify"]
	if len(byName) != 2 || verify.Parent.SpanID() != server.SpanContext.SpanID() {
		t.Fatalf("spans = %v; want the request's and its verify child", byName)
	}
	if verify.Status.Code != codes.Error || verify.Status.Description == "" {
		t.Errorf("verify span status = %+v, want the error", verify.Status)
	}
	if server.Status.Code == codes.Error {
		t.Errorf("request span status = %+v; a 400 is the client's error", server.Status)
	}
	got := map[string]string{}
	for _, kv := range server.Attributes {
		got[string(kv.Key)] = kv.Value.String()
	}
	if got["http.response.status_code"] != "400" || got["anyhook.outcome"] != ingest.OutcomeRejectedSignature || got["anyhook.source"] != "stripe" {
		t.Errorf("request span attributes = %v", got)
	}
}
