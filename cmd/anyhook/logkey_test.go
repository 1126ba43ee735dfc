package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// serveOutcome is how one anyhook serve started: listening (p), or exited
// with code and stderr before it listened.
type serveOutcome struct {
	p      *proc
	code   int
	stderr string
}

// tryServe starts anyhook serve with cfg and waits until it listens or
// exits. A listening process is killed when t ends.
func tryServe(t *testing.T, cfg string) serveOutcome {
	t.Helper()
	p, listening, err := launch(t, exec.Command(binary, "serve", "--config", cfg, "--log-level", "warn"))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case p.url = <-listening:
		return serveOutcome{p: p}
	case <-p.done:
		return serveOutcome{code: p.cmd.ProcessState.ExitCode(), stderr: p.stderr.String()}
	case <-time.After(60 * time.Second):
		t.Fatalf("anyhook neither listened nor exited: %s", p.stderr)
		return serveOutcome{}
	}
}

// stop ends a listening process with SIGTERM and waits for it.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatal("anyhook did not exit on SIGTERM")
	}
}

// stopExitsZero stops p as stop does and fails t unless it exited 0.
func (p *proc) stopExitsZero(t *testing.T) {
	t.Helper()
	p.stop(t)
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit status %d after SIGTERM, want 0; stderr: %s", code, p.stderr)
	}
}

// wantKeyRefusal checks that o is the refusal of a key that is not the
// log's: exit 2 and one line on stderr naming the config file and
// log.key_file.
func wantKeyRefusal(t *testing.T, o serveOutcome, cfg string, more ...string) {
	t.Helper()
	if o.p != nil {
		t.Fatalf("%s: started with another log key", cfg)
	}
	line := strings.TrimSpace(o.stderr)
	if o.code != 2 || strings.Count(line, "\n") != 0 || !strings.Contains(line, cfg+": log.key_file: ") ||
		!strings.Contains(line, "is not this log's key") {
		t.Fatalf("%s: exit %d, stderr %q; want 2 and one line naming log.key_file", cfg, o.code, o.stderr)
	}
	for _, m := range more {
		if !strings.Contains(line, m) {
			t.Errorf("stderr %q does not say %q", line, m)
		}
	}
}

// TestLogKeyPinned: anyhook serve processes on one database with
// different log.key_file keys. They start at once: exactly one runs (its
// key is recorded in the database), each other exits 2 with one line
// naming log.key_file; a process with a copy of the running one's key file
// starts alongside it.
func TestLogKeyPinned(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		database func(t *testing.T) string
	}{
		{"postgres", pgDSN},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			database := tc.database(t)
			const n = 3
			cfgs := make([]string, n)
			for i := range cfgs {
				cfgs[i] = writeConfig(t, t.TempDir(), gatewayConfig(database, "http://127.0.0.1:9/hooks", "reclaim")) // its own key file
			}
			outs := make([]serveOutcome, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { outs[i] = tryServe(t, cfgs[i]) })
			}
			wg.Wait()
			running := -1
			for i, o := range outs {
				if o.p == nil {
					continue
				}
				if running >= 0 {
					t.Fatalf("processes %d and %d both run, with different log keys", running, i)
				}
				running = i
			}
			if running < 0 {
				t.Fatalf("no process runs: %+v", outs)
			}
			for i, o := range outs {
				if i != running {
					wantKeyRefusal(t, o, cfgs[i], "copy it from a host that runs", "anyhook log rotate-key")
					// The key it made for itself is not left behind.
					if _, err := os.Stat(filepath.Join(filepath.Dir(cfgs[i]), "anyhook-log.key")); !errors.Is(err, fs.ErrNotExist) {
						t.Errorf("process %d left its own key file behind (%v)", i, err)
					}
				}
			}
			if code, _, err := sendEvent(outs[running].p.url, "evt_pinned"); err != nil || code != 200 {
				t.Fatalf("send = %d, %v", code, err)
			}

			// The same key, in another directory: both run.
			key, err := os.ReadFile(filepath.Join(filepath.Dir(cfgs[running]), "anyhook-log.key"))
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "anyhook-log.key"), key, 0o600); err != nil {
				t.Fatal(err)
			}
			same := tryServe(t, writeConfig(t, dir, gatewayConfig(database, "http://127.0.0.1:9/hooks", "reclaim")))
			if same.p == nil {
				t.Fatalf("a process with the log's key did not start: exit %d, %s", same.code, same.stderr)
			}
			if code, _, err := sendEvent(same.p.url, "evt_pinned"); err != nil || code != 200 {
				t.Fatalf("send to the second process = %d, %v", code, err)
			}
		})
	}
}

// TestLogKeyPinnedSQLite: SQLite takes one serve at a time, so the key is
// pinned across restarts: a serve with another key file, after the first
// stopped (kill -9), exits 2 naming log.key_file; one with a copy of the
// key runs.
func TestLogKeyPinnedSQLite(t *testing.T) {
	t.Parallel()
	database := "sqlite:" + filepath.Join(t.TempDir(), "anyhook.db")
	first := writeConfig(t, t.TempDir(), gatewayConfig(database, "http://127.0.0.1:9/hooks", "reclaim"))
	p := start(t, first)
	if code, _, err := sendEvent(p.url, "evt_pinned"); err != nil || code != 200 {
		t.Fatalf("send = %d, %v", code, err)
	}
	p.kill()
	other := writeConfig(t, t.TempDir(), gatewayConfig(database, "http://127.0.0.1:9/hooks", "reclaim")) // its own key file
	wantKeyRefusal(t, tryServe(t, other), other, "anyhook log rotate-key")
	key, err := os.ReadFile(filepath.Join(filepath.Dir(first), "anyhook-log.key"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "anyhook-log.key"), key, 0o600); err != nil {
		t.Fatal(err)
	}
	if same := tryServe(t, writeConfig(t, dir, gatewayConfig(database, "http://127.0.0.1:9/hooks", "reclaim"))); same.p == nil {
		t.Fatalf("a process with the log's key did not start: exit %d, %s", same.code, same.stderr)
	}
}

// TestLogKeyRotation: anyhook log rotate-key hands a stopped gateway's log
// to a new key. The old key file no longer starts; the new one does, and
// anyhook log verify checks the whole log with either key (the handover
// checkpoint is signed by both).
func TestLogKeyRotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dest := newRecorder(t, false)
	body := gatewayConfig("sqlite:anyhook.db", dest.URL, "reclaim")
	cfg := writeConfig(t, dir, body)
	first := tryServe(t, cfg)
	if first.p == nil {
		t.Fatalf("serve: exit %d, %s", first.code, first.stderr)
	}
	if code, _, err := sendEvent(first.p.url, "evt_before"); err != nil || code != 200 {
		t.Fatalf("send = %d, %v", code, err)
	}
	first.p.stop(t)
	_, oldKey, _ := runCmd("log", "key", "--config", cfg)

	code, stdout, stderr := runCmd("log", "rotate-key", "--config", cfg, "--new-key-file", filepath.Join(dir, "next.key"))
	if code != 0 || !strings.Contains(stdout, "log key rotated at size 1") {
		t.Fatalf("rotate-key: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if code, _, stderr := runCmd("log", "rotate-key", "--config", cfg, "--new-key-file", filepath.Join(dir, "other.key")); code != 2 || !strings.Contains(stderr, "log.key_file") {
		t.Fatalf("a second rotation from the retired key: exit %d, %q", code, stderr)
	}
	wantKeyRefusal(t, tryServe(t, cfg), cfg)

	rotated := filepath.Join(t.TempDir(), "anyhook.yaml")
	if err := os.WriteFile(rotated, fmt.Appendf(nil, "%sdatabase: %q\nlog: {key_file: %s}\n",
		strings.Replace(body, `database: "sqlite:anyhook.db"`, "", 1), "sqlite:"+filepath.Join(dir, "anyhook.db"), filepath.Join(dir, "next.key")), 0o600); err != nil {
		t.Fatal(err)
	}
	second := tryServe(t, rotated)
	if second.p == nil {
		t.Fatalf("serve with the new key: exit %d, %s", second.code, second.stderr)
	}
	if code, _, err := sendEvent(second.p.url, "evt_after"); err != nil || code != 200 {
		t.Fatalf("send = %d, %v", code, err)
	}
	second.p.stop(t)
	for _, args := range [][]string{
		{"--config", rotated},
		{"--config", rotated, "--key", strings.TrimSpace(oldKey)},
	} {
		code, stdout, stderr := runCmd(append([]string{"log", "verify"}, args...)...)
		if code != 0 || !strings.HasPrefix(stdout, "log intact: 2 events") {
			t.Errorf("log verify %v: exit %d, stdout %q, stderr %q", args, code, stdout, stderr)
		}
	}
}
