package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anyhook/anyhook"
	"github.com/anyhook/anyhook/internal/ledger"
	"github.com/anyhook/anyhook/internal/store"
	"github.com/anyhook/anyhook/internal/store/sqlite"
)

func runCmd(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestLogVerifyCommand runs anyhook log key / log verify in-process on a
// SQLite file written the way a gateway writes it, then tampered with.
func TestLogVerifyCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath := writeConfig(t, dir, "database: sqlite:anyhook.db\nsources: {stripe: {provider: stripe, secrets: [whsec_x]}}\n")

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

	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "anyhook.db"), sqlite.Options{})
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

	raw, err := sql.Open("sqlite", filepath.Join(dir, "anyhook.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`UPDATE events SET body = CAST('{"n":99}' AS BLOB) WHERE id = ?`, ids[4]); err != nil {
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
