package admin

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/ledger"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

// fakeLedger is a hand-written Ledger.
type fakeLedger struct{}

func (fakeLedger) Checkpoint(context.Context) (ledger.CheckpointInfo, error) {
	return ledger.CheckpointInfo{Origin: "o", Size: 3, Root: []byte{1, 2}, Checkpoint: "o\n3\nAQI=\n\n— o sig\n"}, nil
}

func (fakeLedger) Proof(_ context.Context, id string) (*ledger.Proof, error) {
	if id != "ev1" {
		return nil, fmt.Errorf("event %s has no log entry: %w", id, anyhook.ErrNotFound)
	}
	return &ledger.Proof{EventID: id, Index: 2, LeafHash: []byte{9}, Proof: [][]byte{{1}, {2}}, TreeSize: 3}, nil
}

func TestLogRoutes(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "anyhook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	get := func(a *API, path string) (*httptest.ResponseRecorder, map[string]any) {
		req := httptest.NewRequest("GET", path, nil)
		req.Header.Set("Authorization", "Bearer t")
		rec := httptest.NewRecorder()
		a.Handler().ServeHTTP(rec, req)
		var m map[string]any
		json.Unmarshal(rec.Body.Bytes(), &m)
		return rec, m
	}
	a := New(Options{Store: st, Token: "t", Ledger: fakeLedger{}})
	if rec, m := get(a, "/api/log/checkpoint"); rec.Code != 200 || m["size"] != 3.0 || m["root"] != "AQI=" {
		t.Errorf("checkpoint: %d %v", rec.Code, m)
	}
	if rec, m := get(a, "/api/events/ev1/proof"); rec.Code != 200 || m["index"] != 2.0 || m["event_id"] != "ev1" {
		t.Errorf("proof: %d %v", rec.Code, m)
	}
	if rec, _ := get(a, "/api/events/nope/proof"); rec.Code != http.StatusNotFound {
		t.Errorf("proof of an unknown event: %d", rec.Code)
	}
	off := New(Options{Store: st, Token: "t"})
	if rec, m := get(off, "/api/log/checkpoint"); rec.Code != http.StatusNotFound || m["error"].(map[string]any)["code"] != "log_disabled" {
		t.Errorf("without a log: %d %v", rec.Code, m)
	}
}
