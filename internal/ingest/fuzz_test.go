package ingest_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/ingest"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/store"
)

const fuzzSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

var fuzzNow = time.Unix(1700000000, 0)

// fuzzRecorder records what the handler stores, or fails like a store that
// is down.
type fuzzRecorder struct {
	mu     sync.Mutex
	fail   bool
	called bool
	got    []store.NewEvent
}

func (r *fuzzRecorder) Ingest(ctx context.Context, evs []store.NewEvent) ([]store.IngestResult, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.called = true
	if r.fail {
		return nil, fmt.Errorf("disk I/O error: %w", anyhook.ErrUnavailable)
	}
	out := make([]store.IngestResult, len(evs))
	for i, ev := range evs {
		r.got = append(r.got, ev)
		out[i] = store.IngestResult{ID: ev.Event.ID}
	}
	return out, nil
}

// fuzzSources is one source per provider (generic: an HMAC scheme with a
// JSON id), keyed by the provider name.
func fuzzSources(t testing.TB) ([]ingest.Source, map[string]provider.Provider) {
	var out []ingest.Source
	provs := map[string]provider.Provider{}
	for _, name := range provider.Names() {
		src := &provider.Settings{Provider: name, Secrets: []string{fuzzSecret}, Tolerance: 5 * time.Minute}
		if name == "generic" {
			src.Signature = &provider.Signature{Header: "X-Signature", Algorithm: "sha256", Encoding: "hex", Prefix: "sha256="}
			src.ID = "json:id"
		}
		p, err := provider.New(*src)
		if err != nil {
			continue // a provider wanting another secret form
		}
		provs[name] = p
		out = append(out, ingest.Source{Name: name, Provider: p, MaxBody: 64 << 10, Destinations: []string{"d"}, StaleSkip: true})
	}
	if len(out) < 4 {
		t.Fatalf("only %d providers accept the fuzz secret", len(out))
	}
	return out, provs
}

// encodeHeaders writes h as "Name: value" lines, the fuzzer's form.
func encodeHeaders(h http.Header) string {
	var b strings.Builder
	for k, vs := range h {
		for _, v := range vs {
			fmt.Fprintf(&b, "%s: %s\n", k, v)
		}
	}
	return b.String()
}

// FuzzIngest sends arbitrary headers and bodies to a real handler with a
// source for every provider. Whatever arrives: no panic, no 5xx unless the
// store failed, only the documented statuses, and nothing recorded that
// does not verify.
func FuzzIngest(f *testing.F) {
	srcs, _ := fuzzSources(f)
	for i, s := range srcs {
		body := []byte(`{"id":"evt_1","object":"event","created":1700000000,"data":{"object":{"id":"o1"}},"updated_at":"2024-01-01T00:00:00Z"}`)
		pr := &provider.Request{Method: "POST", URL: "http://example.com/webhooks/" + s.Name, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
		switch s.Name {
		case "github":
			pr.Header.Set("X-GitHub-Hook-ID", "1")
			pr.Header.Set("X-GitHub-Delivery", "d1")
		case "shopify":
			pr.Header.Set("X-Shopify-Event-Id", "e1")
			pr.Header.Set("X-Shopify-Topic", "orders/updated")
		}
		var err error
		if s.Name == "generic" {
			err = provider.SignGeneric(provider.Signature{Header: "X-Signature", Algorithm: "sha256", Encoding: "hex", Prefix: "sha256="}, fuzzSecret, pr)
		} else {
			err = provider.Sign(s.Name, fuzzSecret, pr, fuzzNow)
		}
		if err != nil {
			continue
		}
		f.Add(uint8(i), encodeHeaders(pr.Header), body, false)
		f.Add(uint8(i), encodeHeaders(pr.Header), body, true)
		f.Add(uint8(i), encodeHeaders(pr.Header), append(body, ' '), false)
	}
	f.Add(uint8(0), "Stripe-Signature: t=1700000000,v1=00\n", []byte("{}"), false)
	f.Add(uint8(255), "", []byte(nil), false)
	f.Add(uint8(1), "Content-Type: application/x-www-form-urlencoded\n", []byte("payload=%7B%7D&a=1"), false)

	f.Fuzz(func(t *testing.T, which uint8, headers string, body []byte, fail bool) {
		srcs, provs := fuzzSources(t)
		rec := &fuzzRecorder{fail: fail}
		h := ingest.New(ingest.Options{Sources: srcs, Recorder: rec, Now: func() time.Time { return fuzzNow }})
		name := "nope"
		if int(which) < len(srcs) {
			name = srcs[which].Name
		}
		req := httptest.NewRequest("POST", "http://example.com/webhooks/"+name, bytes.NewReader(body))
		for _, line := range strings.Split(headers, "\n") {
			k, v, ok := strings.Cut(line, ":")
			k = strings.TrimSpace(k)
			if !ok || k == "" || strings.ContainsAny(k, " \t\r()<>@,;:\\\"/[]?={}") || strings.ContainsAny(v, "\r\x00") {
				continue
			}
			req.Header.Add(k, strings.TrimSpace(v))
		}
		req.SetPathValue("source", name)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)

		code := w.Code
		switch code {
		case 200, 400, 404, 413:
		case 503:
			if !rec.called || !rec.fail {
				t.Fatalf("503 without a store failure: %s", w.Body)
			}
		default:
			t.Fatalf("status %d: %s", code, w.Body)
		}
		if code == 200 && rec.fail && rec.called {
			t.Fatalf("200 although the store failed")
		}
		for _, ev := range rec.got {
			p := provs[ev.Event.Source]
			pr := &provider.Request{Method: "POST", URL: "http://example.com/webhooks/" + ev.Event.Source, Header: ev.Event.Header, Body: body}
			if _, err := p.Verify(pr, fuzzNow); err != nil {
				t.Fatalf("recorded an event of %s that does not verify: %v", ev.Event.Source, err)
			}
			if ev.Event.Body == nil || (!bytes.Equal(ev.Event.Body, body) && !bytes.Contains(body, ev.Event.Body)) {
				t.Fatalf("recorded body is not (part of) the request body")
			}
		}
		if code != 200 && len(rec.got) > 0 {
			t.Fatalf("answered %d but recorded %d events", code, len(rec.got))
		}
	})
}

// TestFuzzSeedsReachTheStore: the signed seeds are accepted, so the fuzzer
// starts from requests that get past verification.
func TestFuzzSeedsReachTheStore(t *testing.T) {
	t.Parallel()
	srcs, _ := fuzzSources(t)
	accepted := 0
	for _, s := range srcs {
		if s.Name != "stripe" && s.Name != "standard" && s.Name != "github" && s.Name != "shopify" {
			continue
		}
		body := []byte(`{"id":"evt_1","created":1700000000}`)
		hdr := http.Header{}
		hdr.Set("X-GitHub-Hook-ID", "1")
		hdr.Set("X-GitHub-Delivery", "d")
		hdr.Set("X-Shopify-Event-Id", "e")
		pr := &provider.Request{Method: "POST", Header: hdr, Body: body}
		if err := provider.Sign(s.Name, fuzzSecret, pr, fuzzNow); err != nil {
			t.Fatal(err)
		}
		rec := &fuzzRecorder{}
		h := ingest.New(ingest.Options{Sources: srcs, Recorder: rec, Now: func() time.Time { return fuzzNow }})
		req := httptest.NewRequest("POST", "http://example.com/webhooks/"+s.Name, bytes.NewReader(body))
		req.Header = pr.Header
		req.SetPathValue("source", s.Name)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		if w.Code != 200 || len(rec.got) != 1 {
			t.Errorf("%s: %d %s", s.Name, w.Code, w.Body)
		}
		accepted++
	}
	if accepted != 4 {
		t.Fatalf("%d of the 4 main providers were tried", accepted)
	}
}
