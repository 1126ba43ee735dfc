package ingest_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/ingest"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/rejectlog"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

type dropCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *dropCounter) RejectionDropped(reason string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[reason] += n
}

// TestRejectionsRecorded floods a real handler, over real HTTP, with
// forged requests and requests to made-up sources: each is refused as
// before, the rejection log keeps PerSource of each kind for the minute
// and counts the rest as dropped, a genuine event in the middle is
// recorded as usual, and nothing refused reaches the event tables or
// leaves a body or a signature in the log.
func TestRejectionsRecorded(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	p, err := provider.New(provider.Settings{Provider: "stripe", Secrets: []string{fuzzSecret}})
	if err != nil {
		t.Fatal(err)
	}
	minute := time.Now().Truncate(time.Minute) // one minute for the whole flood: no boundary to cross
	drops := &dropCounter{n: map[string]int{}}
	rl := rejectlog.New(st, rejectlog.Options{Now: func() time.Time { return minute }, Observer: drops,
		Limits: rejectlog.Limits{PerSource: 5}})
	rl.Start(t.Context())
	h := ingest.New(ingest.Options{
		Sources:    []ingest.Source{{Name: "stripe", Provider: p, MaxBody: 1 << 10, Destinations: []string{"billing"}}},
		Recorder:   st,
		Rejections: rl,
	})
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks/{source}", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	post := func(path string, body []byte, header http.Header) int {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL+path, bytes.NewReader(body))
		for k, v := range header {
			req.Header[k] = v
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	forged := []byte(`{"id":"evt_forged","object":"event","amount":"secret-looking payload"}`)
	forgedSig := http.Header{"Stripe-Signature": {"t=" + strings.Repeat("1", 10) + ",v1=" + strings.Repeat("ab", 32)}}
	for range 8 {
		if code := post("/webhooks/stripe", forged, forgedSig); code != http.StatusBadRequest {
			t.Fatalf("forged: %d", code)
		}
	}
	good := []byte(`{"id":"evt_good","object":"event","created":1700000000}`)
	pr := &provider.Request{Method: "POST", Header: http.Header{}, Body: good}
	if err := provider.Sign("stripe", fuzzSecret, pr, time.Now()); err != nil {
		t.Fatal(err)
	}
	if code := post("/webhooks/stripe", good, pr.Header); code != http.StatusOK {
		t.Fatalf("genuine event: %d", code)
	}
	for _, name := range []string{"wp-login.php", "admin", ".env", "x", "y", "z", "w"} {
		if code := post("/webhooks/"+name, []byte("probe body"), nil); code != http.StatusNotFound {
			t.Fatalf("unknown source %s: %d", name, code)
		}
	}
	rl.Stop() // writes what is queued

	rs, _, err := st.ListRejections(t.Context(), store.RejectionFilter{Limit: 500})
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	sum := sha256.Sum256(forged)
	for _, r := range rs {
		count[r.Reason]++
		switch r.Reason {
		case anyhook.RejectSignature:
			if r.Source != "stripe" || !r.KnownSource || r.Status != 400 || r.Message != "no signature matched" ||
				r.BodySize != int64(len(forged)) || r.BodySHA256 != hex.EncodeToString(sum[:]) || !strings.HasPrefix(r.RemoteAddr, "127.0.0.1:") {
				t.Errorf("forged request record = %+v", r)
			}
		case anyhook.RejectUnknownSource:
			if r.KnownSource || r.Status != 404 || r.BodySHA256 != "" || r.BodySize != int64(len("probe body")) {
				t.Errorf("unknown source record = %+v", r)
			}
		}
		if all := r.Source + r.Message + r.UserAgent; strings.Contains(all, "secret-looking") || strings.Contains(all, "abab") {
			t.Errorf("a record holds a body or a signature: %+v", r)
		}
	}
	if count[anyhook.RejectSignature] != 5 || count[anyhook.RejectUnknownSource] != 5 || len(count) != 2 {
		t.Errorf("recorded %v, want 5 of each", count)
	}
	if drops.n[rejectlog.DroppedRate] != 3+2 {
		t.Errorf("dropped %v, want 5 over the per-minute caps", drops.n)
	}
	evs, _, err := st.ListEvents(t.Context(), store.EventFilter{})
	if err != nil || len(evs) != 1 || evs[0].DedupKey != "evt_good" {
		t.Fatalf("events = %+v, %v; want only the genuine one", evs, err)
	}
}
