package main

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/ledger"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

// TestReplayPrunedEvent: anyhook replay of an event whose body retention
// emptied is refused (exit 1) with one line saying so; nothing is queued.
func TestReplayPrunedEvent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, gatewayConfig("sqlite:anyhook.db", "http://127.0.0.1:9/hooks", "reclaim"))
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "anyhook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	id := store.NewID()
	received := time.Now().Add(-40 * 24 * time.Hour)
	if _, err := st.Ingest(t.Context(), []store.NewEvent{{Event: anyhook.Event{
		ID: id, Source: "stripe", DedupKey: "evt_old", ReceivedAt: received, Method: "POST", Path: "/webhooks/stripe",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":"evt_old"}`),
	}, Destinations: []string{"billing"}}}); err != nil {
		t.Fatal(err)
	}
	cs, err := st.Claim(t.Context(), "billing", 1, time.Minute)
	if err != nil || len(cs) != 1 {
		t.Fatalf("Claim = %v, %v", cs, err)
	}
	if _, err := st.Finish(t.Context(), []store.Outcome{{DeliveryID: cs[0].Delivery.ID, Attempt: 1, Status: anyhook.StatusDelivered,
		Result: anyhook.Attempt{Number: 1, StartedAt: time.Now(), StatusCode: 200}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := ledger.NewSequencer(st, ledger.SequencerOptions{}).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n, err := ledger.Prune(t.Context(), st, received.Add(time.Second)); err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v", n, err)
	}
	st.Close()

	code, stdout, stderr := runCmd("replay", "--config", cfg, "--event", id)
	if code != exitFail || strings.Count(strings.TrimSpace(stderr), "\n") != 0 ||
		!strings.Contains(stderr, "event "+id+": its body was pruned by retention (log.retention)") {
		t.Fatalf("replay of a pruned event: exit %d, stdout %q, stderr %q; want 1 and one line saying why", code, stdout, stderr)
	}
	code, _, stderr = runCmd("replay", "--config", cfg, "--status", "delivered")
	if code != exitFail || !strings.Contains(stderr, "1 of the selected events (e.g. "+id+") had their bodies pruned by retention") {
		t.Fatalf("replay --status delivered: exit %d, stderr %q; want 1 saying why", code, stderr)
	}
	// A dry run answers what the real run would: it used to promise "would
	// replay 1 delivery".
	code, stdout, stderr = runCmd("replay", "--config", cfg, "--event", id, "--dry-run")
	if code != exitFail || !strings.Contains(stderr, "event "+id+": its body was pruned by retention") {
		t.Errorf("replay --event --dry-run of a pruned event: exit %d, stdout %q, stderr %q; want 1 saying why", code, stdout, stderr)
	}
	code, stdout, stderr = runCmd("replay", "--config", cfg, "--status", "delivered", "--dry-run")
	if code != exitFail || !strings.Contains(stderr, "1 of the selected events (e.g. "+id+") had their bodies pruned by retention") ||
		!strings.Contains(stderr, "would skip 1 event: retention pruned its body") {
		t.Errorf("replay --status delivered --dry-run: exit %d, stdout %q, stderr %q; want 1 saying why", code, stdout, stderr)
	}
	// With --json, the failure is a JSON object too.
	code, stdout, stderr = runCmd("replay", "--config", cfg, "--status", "delivered", "--json")
	var failed struct {
		Error   string
		Exit    int
		Skipped []skippedItem
	}
	if err := json.Unmarshal([]byte(stdout), &failed); err != nil || code != exitFail || failed.Exit != exitFail || stderr != "" ||
		!strings.Contains(failed.Error, "had their bodies pruned") || len(failed.Skipped) != 1 || failed.Skipped[0].EventID != id {
		t.Errorf("replay --status delivered --json: exit %d, stdout %q (%v), stderr %q; want a JSON error listing the skipped event", code, stdout, err, stderr)
	}
	if code, stdout, _ := runCmd("replay", "--config", cfg, "--event", "evt_nowhere", "--json"); code != exitFail ||
		json.Unmarshal([]byte(stdout), &failed) != nil || !strings.Contains(failed.Error, `no event has "evt_nowhere"`) {
		t.Errorf("replay --event unknown --json: exit %d, stdout %q; want a JSON error", code, stdout)
	}

	// A newer delivered event keeps its body: a bulk replay replays it and
	// skips the pruned one, saying so.
	st, err = sqlite.Open(t.Context(), filepath.Join(dir, "anyhook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fresh := store.NewID()
	if _, err := st.Ingest(t.Context(), []store.NewEvent{{Event: anyhook.Event{
		ID: fresh, Source: "stripe", DedupKey: "evt_new", ReceivedAt: time.Now(), Method: "POST", Path: "/webhooks/stripe",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"id":"evt_new"}`),
	}, Destinations: []string{"billing"}}}); err != nil {
		t.Fatal(err)
	}
	if cs, err = st.Claim(t.Context(), "billing", 1, time.Minute); err != nil || len(cs) != 1 {
		t.Fatalf("Claim = %v, %v", cs, err)
	}
	if _, err := st.Finish(t.Context(), []store.Outcome{{DeliveryID: cs[0].Delivery.ID, Attempt: 1, Status: anyhook.StatusDelivered,
		Result: anyhook.Attempt{Number: 1, StartedAt: time.Now(), StatusCode: 200}}}); err != nil {
		t.Fatal(err)
	}
	st.Close()
	code, stdout, stderr = runCmd("replay", "--config", cfg, "--status", "delivered", "--dry-run")
	if code != exitOK || !strings.Contains(stdout, "would replay 1 delivery\n  event "+fresh+" to billing\n") ||
		!strings.Contains(stdout, "would skip 1 event: retention pruned its body (log.retention), so it can no longer be sent\n  event "+id+"\n") {
		t.Errorf("replay --status delivered --dry-run: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = runCmd("replay", "--config", cfg, "--status", "delivered", "--json")
	var rep replayReport
	if err := json.Unmarshal([]byte(stdout), &rep); err != nil || code != exitOK || rep.Count != 1 ||
		len(rep.Skipped) != 1 || rep.Skipped[0] != (skippedItem{EventID: id, Reason: "pruned"}) {
		t.Errorf("replay --status delivered --json: exit %d, stdout %q, stderr %q; want 1 replayed and %s skipped", code, stdout, stderr, id)
	}
	// The replay made a pending delivery of the fresh event, none of the
	// pruned one.
	st, err = sqlite.Open(t.Context(), filepath.Join(dir, "anyhook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for ev, want := range map[string]int{id: 1, fresh: 2} {
		got, err := st.Event(t.Context(), ev)
		if err != nil || len(got.Deliveries) != want {
			t.Errorf("event %s after the bulk replay: %d deliveries, %v; want %d", ev, len(got.Deliveries), err, want)
		}
	}
}
