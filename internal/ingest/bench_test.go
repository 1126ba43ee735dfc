package ingest_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/ingest"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/store"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// nopRecorder answers every event as new without keeping anything.
type nopRecorder struct{}

func (nopRecorder) Ingest(_ context.Context, evs []store.NewEvent) ([]store.IngestResult, error) {
	out := make([]store.IngestResult, len(evs))
	for i := range evs {
		out[i].ID = evs[i].Event.ID
	}
	return out, nil
}

// discard is a reusable ResponseWriter.
type discard struct {
	h    http.Header
	code int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(b []byte) (int, error) { return len(b), nil }
func (d *discard) WriteHeader(code int)        { d.code = code }

// BenchmarkHandler measures the ingest handler alone — read the body,
// verify the signature, extract the keys and ordering fields, build the
// event, answer — in front of a recorder that does nothing, so that its
// allocations per request are the handler's own budget. Stripe signs its
// event id; GitHub signs only the body, so its events also carry a content
// key (a hash of the signed bytes):
//
//	go test ./internal/ingest -run '^$' -bench Handler -benchmem
func BenchmarkHandler(b *testing.B) {
	for _, prov := range []string{"stripe", "github"} {
		for _, size := range []int{1 << 10, 64 << 10} {
			b.Run(fmt.Sprintf("%s/body=%dKiB", prov, size>>10), func(b *testing.B) {
				benchHandler(b, prov, size, nil)
			})
		}
	}
}

// BenchmarkHandlerTracing is BenchmarkHandler's stripe 1 KiB request with
// tracing off (no tracer provider: the gateway's default), with the API's
// no-op provider, and on (the SDK sampling every request, its batch
// processor exporting to nowhere): what tracing costs, and that off costs
// nothing (BENCHMARKS.md):
//
//	go test ./internal/ingest -run '^$' -bench HandlerTracing -benchmem
func BenchmarkHandlerTracing(b *testing.B) {
	for _, mode := range []string{"off", "noop", "on"} {
		b.Run("tracing="+mode, func(b *testing.B) {
			benchHandler(b, "stripe", 1<<10, tracerProvider(b, mode))
		})
	}
}

// tracerProvider is the tracer provider of a tracing mode: nil (off), the
// API's no-op one, or the SDK's with a batch processor exporting nowhere.
func tracerProvider(tb testing.TB, mode string) trace.TracerProvider {
	switch mode {
	case "noop":
		return noop.NewTracerProvider()
	case "on":
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		tb.Cleanup(func() { tp.Shutdown(context.Background()) })
		return tp
	}
	return nil
}

func benchHandler(b *testing.B, prov string, size int, tp trace.TracerProvider) {
	serve := handlerFixture(b, prov, size, tp)
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		serve()
	}
}

// handlerFixture is a handler for one source of provider prov (tracing to
// tp; nil: off) in front of a recorder that does nothing, and a function
// that serves it one signed request of about size bytes (the same each
// time) and checks it was accepted.
func handlerFixture(tb testing.TB, prov string, size int, tp trace.TracerProvider) func() {
	src := &provider.Settings{Provider: prov, Secrets: []string{fuzzSecret}, Tolerance: time.Hour}
	p, err := provider.New(*src)
	if err != nil {
		tb.Fatal(err)
	}
	h := ingest.New(ingest.Options{
		Sources:  []ingest.Source{{Name: prov, Provider: p, MaxBody: 1 << 20, Destinations: []string{"d"}, StaleSkip: true}},
		Recorder: nopRecorder{},
		NewID:    func() string { return "0190a0a0-0000-7000-8000-000000000000" },
		Tracer:   tp,
	})
	body := stripeBody(size)
	pr := &provider.Request{Method: "POST", Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
	if prov == "github" {
		pr.Header.Set("X-GitHub-Event", "push")
		pr.Header.Set("X-GitHub-Hook-ID", "123456789")
		pr.Header.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	}
	if err := provider.Sign(prov, fuzzSecret, pr, time.Now()); err != nil {
		tb.Fatal(err)
	}
	w := &discard{h: http.Header{}}
	rd := bytes.NewReader(body)
	req, err := http.NewRequest("POST", "http://127.0.0.1/webhooks/"+prov, nil)
	if err != nil {
		tb.Fatal(err)
	}
	req.SetPathValue("source", prov)
	return func() {
		rd.Reset(body)
		r := *req
		r.Header = pr.Header
		r.Body = io.NopCloser(rd)
		r.ContentLength = int64(len(body))
		clear(w.h)
		h.ServeHTTP(w, &r)
		if w.code != http.StatusOK {
			tb.Fatalf("status %d", w.code)
		}
	}
}

// stripeBody is a Stripe event of about size bytes.
func stripeBody(size int) []byte {
	var buf bytes.Buffer
	buf.WriteString(`{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","api_version":"2024-06-20","created":1700000000,` +
		`"data":{"object":{"id":"ch_3NG8Du2eZvKYlo2C0u8ZM3G1","object":"charge","amount":2000,"currency":"usd","metadata":{"pad":"`)
	for buf.Len() < size-len(`"}}},"livemode":false,"type":"charge.succeeded"}`) {
		buf.WriteByte('a' + byte(buf.Len()%26))
	}
	buf.WriteString(`"}}},"livemode":false,"type":"charge.succeeded"}`)
	return buf.Bytes()
}
