package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/ledger"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/postgres"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
)

func runCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// logBackends are the databases TestLogVerifyCommand runs on: a SQLite
// file, and a fresh PostgreSQL database (see pgtest). open returns the
// config's database setting, the store a gateway would write through, and
// a connection behind its back for tampering.
var logBackends = []struct {
	name string
	open func(t *testing.T, dir string) (database string, st store.Store, raw *sql.DB)
}{
	{"sqlite", func(t *testing.T, dir string) (string, store.Store, *sql.DB) {
		st, err := sqlite.Open(t.Context(), filepath.Join(dir, "anyhook.db"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		raw, err := sql.Open("sqlite", filepath.Join(dir, "anyhook.db"))
		if err != nil {
			t.Fatal(err)
		}
		return "sqlite:anyhook.db", st, raw
	}},
	{"postgres", func(t *testing.T, _ string) (string, store.Store, *sql.DB) {
		dsn := pgtest.DSN(t)
		st, err := postgres.Open(t.Context(), withPool(dsn), postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		raw, err := sql.Open("pgx", dsn)
		if err != nil {
			t.Fatal(err)
		}
		return withPool(dsn), st, raw
	}},
}

// TestLogVerifyCommand runs anyhook log key / log verify in-process on a
// database written the way a gateway writes it, then tampered with, on
// each backend.
func TestLogVerifyCommand(t *testing.T) {
	t.Parallel()
	for _, b := range logBackends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			testLogVerifyCommand(t, b.open)
		})
	}
}

func testLogVerifyCommand(t *testing.T, open func(t *testing.T, dir string) (string, store.Store, *sql.DB)) {
	dir := t.TempDir()
	database, st, raw := open(t, dir)
	defer raw.Close()
	cfgPath := writeConfig(t, dir, fmt.Sprintf("database: %q\nsources: {stripe: {provider: stripe, secrets: [whsec_x]}}\n", database))

	code, vkey, stderr := runCmd("log", "key", "--config", cfgPath)
	if code != 0 || !strings.Contains(vkey, "+") {
		t.Fatalf("log key: %d %q %q", code, vkey, stderr)
	}
	if _, again, _ := runCmd("log", "key", "--config", cfgPath); again != vkey {
		t.Fatalf("log key changed: %q then %q", vkey, again)
	}
	key, err := ledger.LoadKey(filepath.Join(dir, "anyhook-log.key"))
	if err != nil {
		t.Fatal(err)
	}

	seq := ledger.NewSequencer(st, ledger.SequencerOptions{})
	cpr := ledger.NewCheckpointer(st, ledger.CheckpointerOptions{Key: key})
	var ids []string
	add := func(n int) store.Checkpoint {
		for i := range n {
			id := store.NewID()
			ids = append(ids, id)
			_, err := st.Ingest(t.Context(), []store.NewEvent{{Event: anyhook.Event{
				ID: id, Source: "stripe", DedupKey: "evt_" + id, ReceivedAt: time.Now(), Method: "POST", Path: "/webhooks/stripe",
				Header: http.Header{"Content-Type": {"application/json"}}, Body: fmt.Appendf(nil, `{"n":%d}`, i),
			}}})
			if err != nil {
				t.Fatal(err)
			}
		}
		if _, err := seq.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		cp, _, err := cpr.Once(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return cp
	}
	old := add(10)
	oldFile := filepath.Join(dir, "checkpoint-10")
	os.WriteFile(oldFile, old.Note, 0o644)
	// The same checkpoint as GET /api/log/checkpoint answers it, saved as
	// is: log verify takes that too.
	info, err := ledger.Reader{Store: st, Key: key}.Checkpoint(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	apiJSON, _ := json.Marshal(info)
	apiFile := filepath.Join(dir, "checkpoint-10.json")
	os.WriteFile(apiFile, apiJSON, 0o644)
	add(15)
	st.Close() // the gateway may or may not be running: verify opens its own store

	code, stdout, stderr := runCmd("log", "verify", "--config", cfgPath)
	if code != 0 || !strings.HasPrefix(stdout, "log intact: 25 events, signed checkpoint at size 25") || strings.Count(stdout, "\n") != 1 {
		t.Fatalf("verify intact: %d %q %q", code, stdout, stderr)
	}
	code, stdout, _ = runCmd("log", "verify", "--config", cfgPath, "--checkpoint", oldFile, "--key", strings.TrimSpace(vkey))
	if code != 0 || !strings.Contains(stdout, "consistent with the given checkpoint at size 10") {
		t.Fatalf("verify --checkpoint: %d %q", code, stdout)
	}
	code, stdout, stderr = runCmd("log", "verify", "--config", cfgPath, "--checkpoint", apiFile)
	if code != 0 || !strings.Contains(stdout, "consistent with the given checkpoint at size 10") {
		t.Fatalf("verify --checkpoint with the API's JSON: %d %q %q", code, stdout, stderr)
	}
	notCheckpoint := filepath.Join(dir, "event.json")
	os.WriteFile(notCheckpoint, []byte(`{"id":"evt_1","object":"event"}`), 0o644)
	code, _, stderr = runCmd("log", "verify", "--config", cfgPath, "--checkpoint", notCheckpoint)
	if code != 2 || !strings.Contains(stderr, `a JSON object without a "checkpoint"`) {
		t.Errorf("verify --checkpoint with JSON that holds none: %d %q", code, stderr)
	}
	checkVerifyJSON(t, cfgPath, oldFile, 0, func(r verifyReport) bool {
		return r.OK && r.Entries == 25 && r.Checkpoint != nil && r.Checkpoint.Size == 25 && r.Since != nil && r.Since.Size == 10 &&
			len(r.Problems) == 0 && strings.HasPrefix(r.Summary, "log intact: 25 events")
	})

	if _, err := raw.Exec(`UPDATE events SET body = $1 WHERE id = $2`, []byte(`{"n":99}`), ids[4]); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = runCmd("log", "verify", "--config", cfgPath, "--checkpoint", oldFile)
	if code != 1 || !strings.Contains(stdout, "event "+ids[4]+" (log index 4): body changed") || !strings.Contains(stderr, "problem") {
		t.Fatalf("verify tampered: %d %q %q", code, stdout, stderr)
	}
	for _, other := range ids[5:] {
		if strings.Contains(stdout, other) {
			t.Errorf("untouched event %s named: %q", other, stdout)
		}
	}
	checkVerifyJSON(t, cfgPath, oldFile, 1, func(r verifyReport) bool {
		return !r.OK && r.Entries == 25 && len(r.Problems) > 0 && r.Problems[0].EventID == ids[4] && r.Problems[0].Index != nil &&
			*r.Problems[0].Index == 4 && r.Problems[0].Kind == "body changed" && strings.HasPrefix(r.Problems[0].Text, "event "+ids[4])
	})

	// A body emptied and marked pruned although the event arrived just now:
	// not retention's doing (log.retention, 30 days by default, is read from
	// the config); with --retention 0s (keep bodies) it is reported too.
	if _, err := raw.Exec(`UPDATE events SET body = $1 WHERE id = $2`, []byte{}, ids[7]); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE ledger_entries SET body_pruned = $1 WHERE event_id = $2`, true, ids[7]); err != nil {
		t.Fatal(err)
	}
	code, stdout, _ = runCmd("log", "verify", "--config", cfgPath)
	if code != 1 || !strings.Contains(stdout, "event "+ids[7]+" (log index 7): body removed: its body was emptied, but it was received") ||
		!strings.Contains(stdout, "less than log.retention (30 days) ago") {
		t.Fatalf("verify young pruned body: %d %q", code, stdout)
	}
	if code, stdout, _ = runCmd("log", "verify", "--config", cfgPath, "--retention", "0s"); code != 1 || !strings.Contains(stdout, "log.retention is 0s") {
		t.Fatalf("verify --retention 0s: %d %q", code, stdout)
	}

	// Usage errors: exit 2, one line.
	for _, args := range [][]string{
		{"log"}, {"log", "frobnicate"}, {"log", "verify", "--nope"},
		{"log", "verify", "--config", cfgPath, "--checkpoint", filepath.Join(dir, "missing")},
		{"log", "verify", "--config", cfgPath, "--key", "not-a-key"},
	} {
		if code, _, stderr := runCmd(args...); code != 2 || stderr == "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
	os.Remove(filepath.Join(dir, "anyhook-log.key"))
	if code, _, stderr := runCmd("log", "verify", "--config", cfgPath); code != 2 || !strings.Contains(stderr, "log.key_file") {
		t.Errorf("without a key: exit %d, %q", code, stderr)
	}
}

// checkVerifyJSON runs log verify --json and checks its exit status and
// report.
func checkVerifyJSON(t *testing.T, cfgPath, checkpoint string, wantCode int, ok func(verifyReport) bool) {
	t.Helper()
	code, stdout, stderr := runCmd("log", "verify", "--config", cfgPath, "--checkpoint", checkpoint, "--json")
	var r verifyReport
	if err := json.Unmarshal([]byte(stdout), &r); err != nil || code != wantCode || strings.Count(stdout, "\n") != 1 || !ok(r) {
		t.Fatalf("log verify --json: exit %d (want %d), %v, report %s, stderr %q", code, wantCode, err, stdout, stderr)
	}
}
