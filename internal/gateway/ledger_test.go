package gateway_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/anyhook/anyhook/internal/config"
	"github.com/anyhook/anyhook/internal/gateway"
	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/ledger"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/testkit/sinktest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// TestLogEndToEnd: events sent over HTTP are in the log; the API serves a
// checkpoint and proofs that check with the public key alone; after Stop
// the log verifies.
func TestLogEndToEnd(t *testing.T) {
	t.Parallel()
	e := setup(t, sinktest.New(t), "", "log: {checkpoint_interval: 50ms}")
	var ids []string
	for i := range 20 {
		a := e.sendStripe(t, fmt.Sprintf("evt_log_%d", i))
		if a.Code != 200 {
			t.Fatalf("ingest: %+v", a)
		}
		ids = append(ids, a.ID)
	}
	getJSON := func(path string, v any) int {
		code, b := gatewaytest.Admin(t, "GET", e.url+path, "")
		json.Unmarshal(b, v)
		return code
	}
	var cp ledger.CheckpointInfo
	testwait.For(t, "a checkpoint of size 20", func() bool {
		return getJSON("/api/log/checkpoint", &cp) == 200 && cp.Size >= 20
	})
	v, err := ledger.OpenCheckpoint([]byte(cp.Checkpoint), mustVerifier(t, cp.VerifierKey))
	if err != nil || v.Size != cp.Size {
		t.Fatalf("checkpoint: %+v, %v", v, err)
	}
	var p ledger.Proof
	if code := getJSON("/api/events/"+ids[7]+"/proof", &p); code != 200 {
		t.Fatalf("proof: %d", code)
	}
	ev, err := e.store.Event(t.Context(), ids[7])
	if err != nil {
		t.Fatal(err)
	}
	if err := ledger.CheckProof(mustVerifier(t, cp.VerifierKey), &ev, &p); err != nil {
		t.Errorf("CheckProof: %v", err)
	}
	e.sendStripe(t, "evt_last")
	e.gw.Stop(context.Background()) // sequences and checkpoints what is left
}

func mustVerifier(t *testing.T, vkey string) note.Verifier {
	t.Helper()
	v, err := note.NewVerifier(vkey)
	if err != nil {
		t.Fatalf("verifier key %q: %v", vkey, err)
	}
	return v
}

// noLog is the benchmark's baseline: a store whose log sequences nothing,
// so the sequencer and the checkpointer find no work.
type noLog struct{ store.Store }

func (noLog) Sequence(context.Context, int, store.SequenceFunc) (int, error) { return 0, nil }

// BenchmarkIngestLog compares ingest throughput with the tamper-evident
// log on (sequencer and checkpointer running) and off, in one run:
//
//	go test ./internal/gateway -run '^$' -bench IngestLog -benchtime 5s
//
// Each sub-benchmark reports events/s; no threshold is asserted.
func BenchmarkIngestLog(b *testing.B) {
	for _, mode := range []string{"off", "on", "off", "on"} {
		b.Run("log="+mode, func(b *testing.B) { benchIngest(b, mode == "on") })
	}
}

func benchIngest(b *testing.B, withLog bool) {
	dir := b.TempDir()
	yaml := fmt.Sprintf(`
listen: 127.0.0.1:0
database: sqlite:%s
admin_token: t
sources:
  stripe: {provider: stripe, secrets: [%s]}
log: {checkpoint_interval: 1s}
`, filepath.Join(dir, "anyhook.db"), stripeSecret)
	cfg, err := config.Parse(filepath.Join(dir, "anyhook.yaml"), []byte(yaml), nil)
	if err != nil {
		b.Fatal(err)
	}
	st, err := gateway.Open(b.Context(), cfg, gateway.StoreOptions{})
	if err != nil {
		b.Fatal(err)
	}
	opt := gateway.Options{Config: cfg, Store: st}
	if !withLog {
		opt.Store = noLog{st}
	}
	g, err := gateway.New(b.Context(), opt)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	g.Start(context.Background(), ln)
	defer g.Stop(context.Background())
	url := "http://" + ln.Addr().String() + "/webhooks/stripe"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var n atomic.Int64
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body := fmt.Appendf(nil, `{"id":"evt_%d","object":"event","type":"charge.succeeded"}`, n.Add(1))
			pr := &provider.Request{Method: "POST", URL: url, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
			if err := provider.Sign("stripe", stripeSecret, pr, time.Now()); err != nil {
				b.Error(err)
				return
			}
			req, _ := http.NewRequest("POST", url, bytes.NewReader(body))
			req.Header = pr.Header
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "events/s")
}
