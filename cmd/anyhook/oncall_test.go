package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/anyhook/anyhook/internal/store/sqlite"
)

// exeEnv is exe with extra environment variables.
func exeEnv(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
		t.Fatalf("anyhook %s: %v", strings.Join(args, " "), err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// config check (and serve) report every problem of a file at once, one
// line each, in line order: the file's own and those the wiring finds (a
// Stripe secret's form) together.
func TestConfigCheckReportsEveryProblem(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, t.TempDir(), `sources:
  stripe:
    provider: stripe
    secrets: [sk_live_SECRET]
destinations:
  billing:
    url: 127.0.0.1:9000/hooks
    sources: [stripe]
    max_retries: 3
  crm:
    url: http://127.0.0.1:9001/
    sources: [strpe]
`)
	want := []string{
		"anyhook: " + cfg + ":4: sources.stripe.secrets[0]: not a Stripe signing secret",
		"anyhook: " + cfg + ":7: destinations.billing.url: must be an absolute http:// or https:// URL, and this one has no scheme: write http://",
		"anyhook: " + cfg + `:9: destinations.billing.max_retries: unknown key (did you mean "max_attempts"?)`,
		"anyhook: " + cfg + `:12: destinations.crm.sources[0]: unknown source "strpe" (did you mean stripe?)`,
	}
	for _, cmd := range []string{"config check", "serve"} {
		code, out, errOut := exe(t, append(strings.Fields(cmd), "--config", cfg)...)
		lines := strings.Split(strings.TrimSuffix(errOut, "\n"), "\n")
		if code != 2 || out != "" || len(lines) != len(want) || strings.Contains(errOut, "SECRET") {
			t.Errorf("%s: exit %d, stdout %q, stderr:\n%s\nwant exit 2 and %d lines", cmd, code, out, errOut, len(want))
			continue
		}
		for i, l := range lines {
			if !strings.HasPrefix(l, want[i]) {
				t.Errorf("%s: line %d = %q, want %q…", cmd, i+1, l, want[i])
			}
		}
	}
}

// A source that delivers nowhere, and a secret with white space around
// it, are warned about by config check (exit 0) and at serve's start,
// naming file, line and key; record_only: true says the first is meant.
func TestConfigWarnings(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `listen: 127.0.0.1:0
database: sqlite:anyhook.db
sources:
  stripe:
    provider: stripe
    secrets: ["whsec_abc "]
  audit:
    provider: github
    secrets: [x]
    record_only: true
`)
	code, _, errOut := exe(t, "config", "check", "--config", cfg)
	want := "anyhook: warning: " + cfg + ":4: sources.stripe: no destination lists this source: its events are recorded but delivered nowhere; add it to a destination's sources, or set record_only: true if that is meant\n" +
		"anyhook: warning: " + cfg + ":6: sources.stripe.secrets[0]: has white space at its start or end; it is kept as written, so it must be part of the secret: remove it if it is not\n"
	if code != 0 || errOut != want {
		t.Errorf("config check: exit %d, stderr:\n%s\nwant exit 0 and:\n%s", code, errOut, want)
	}

	// serve logs them (JSON), then says where its dashboard is.
	cmd := exec.Command(binary, "serve", "--config", cfg)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var addr, dashboard string
	for l := range lines {
		if _, a, ok := strings.Cut(l, "listening on http://"); ok {
			addr = a
		}
		if d, ok := strings.CutPrefix(l, "dashboard: "); ok {
			dashboard = d
			break
		}
	}
	cmd.Process.Signal(syscall.SIGTERM)
	for range lines {
	}
	cmd.Wait()
	if addr == "" || dashboard != "http://"+addr+"/ (no login: admin_token is not set)" {
		t.Errorf("serve printed listening on %q, dashboard %q; want the dashboard's URL on the listen address", addr, dashboard)
	}
	var warned []string
	for l := range strings.Lines(stderr.String()) {
		var entry struct {
			Level, Msg, File, Key string
			Line                  int
		}
		if json.Unmarshal([]byte(l), &entry) == nil && entry.Level == "WARN" && strings.HasPrefix(entry.Msg, "config: ") {
			warned = append(warned, fmt.Sprintf("%s:%d %s", filepath.Base(entry.File), entry.Line, entry.Key))
		}
	}
	if got := strings.Join(warned, ", "); got != "anyhook.yaml:4 sources.stripe, anyhook.yaml:6 sources.stripe.secrets[0]" {
		t.Errorf("serve logged config warnings %q; want the two, with file, line and key\n%s", got, stderr.String())
	}
}

// An unset variable in a value a command does not use is skipped, and
// said so on stderr, instead of failing the command (the 2 a.m. replay
// with the backfill's STRIPE_API_KEY unset); serve and config check still
// refuse it, and a command that uses the value still fails on it.
func TestUnusedUnsetValueSkipped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, `listen: 127.0.0.1:0
database: ${ANYHOOK_TEST_DB}
sources:
  stripe:
    provider: stripe
    secrets: [`+secret+`]
    api_key: ${ANYHOOK_TEST_UNSET_STRIPE_API_KEY}
destinations:
  billing: {url: "http://127.0.0.1:9/", sources: [stripe]}
`)
	db := []string{"ANYHOOK_TEST_DB=sqlite:anyhook.db"}
	// The store, which the commands that only read do not create.
	st, err := sqlite.Open(t.Context(), filepath.Join(dir, "anyhook.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	note := "anyhook: skipped " + cfg + ":7: sources.stripe.api_key: environment variable ANYHOOK_TEST_UNSET_STRIPE_API_KEY is not set"
	for _, args := range [][]string{
		{"replay", "--config", cfg, "--status", "dead", "--dry-run"},
		{"log", "key", "--config", cfg},
		{"log", "verify", "--config", cfg},
		{"backup", "--config", cfg, "--out", filepath.Join(dir, "backup.db")},
	} {
		code, out, errOut := exeEnv(t, db, args...)
		if code != 0 || !strings.HasPrefix(errOut, note+" (") {
			t.Errorf("anyhook %s: exit %d, stdout %q, stderr %q; want exit 0 and the skipped value named", strings.Join(args[:2], " "), code, out, errOut)
		}
	}
	for _, args := range [][]string{{"config", "check", "--config", cfg}, {"serve", "--config", cfg}} {
		code, _, errOut := exeEnv(t, db, args...)
		if code != 2 || !strings.Contains(errOut, cfg+":7: sources.stripe.api_key: environment variable ANYHOOK_TEST_UNSET_STRIPE_API_KEY is not set") {
			t.Errorf("anyhook %s: exit %d, %q; want exit 2 naming the unset variable", args[0], code, errOut)
		}
	}
	// The database is what replay uses.
	code, _, errOut := exe(t, "replay", "--config", cfg, "--status", "dead", "--dry-run")
	if code != 2 || !strings.Contains(errOut, cfg+":2: database: environment variable ANYHOOK_TEST_DB is not set") {
		t.Errorf("replay without its database: exit %d, %q; want exit 2 naming database", code, errOut)
	}
	// backfill uses its source's api_key.
	code, _, errOut = exeEnv(t, db, "backfill", "--config", cfg, "--source", "stripe", "--since", "1h")
	if code != 2 || !strings.Contains(errOut, "sources.stripe.api_key: environment variable ANYHOOK_TEST_UNSET_STRIPE_API_KEY is not set") {
		t.Errorf("backfill without its api_key: exit %d, %q; want exit 2 naming it", code, errOut)
	}
}

// backup --out of a file that exists is a usage error (exit 2), as the
// other usage errors are, and leaves the file alone.
func TestBackupOutExists(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "database: sqlite:anyhook.db\nsources:\n  stripe: {provider: stripe, secrets: ["+secret+"], record_only: true}\n")
	out := filepath.Join(dir, "kept.db")
	if err := os.WriteFile(out, []byte("yesterday's backup"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, errOut := exe(t, "backup", "--config", cfg, "--out", out)
	if code != 2 || stdout != "" || errOut != "anyhook: backup: --out "+out+" already exists: a backup never replaces a file; give a new name\n" {
		t.Errorf("backup --out existing: exit %d, stdout %q, stderr %q; want exit 2 and one line", code, stdout, errOut)
	}
	if b, _ := os.ReadFile(out); string(b) != "yesterday's backup" {
		t.Errorf("the existing file was changed: %q", b)
	}
}

// A database restored without its log key file: log verify and serve say
// the key file is missing and that it is to be restored, instead of a
// bare "no such file" or a key mismatch; serve leaves no new key behind.
func TestRestoreWithoutLogKey(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := writeConfig(t, dir, "listen: 127.0.0.1:0\ndatabase: sqlite:anyhook.db\nsources:\n  stripe: {provider: stripe, secrets: ["+secret+"], record_only: true}\n")
	p := start(t, cfg) // makes the key and records it in the database
	if code, _, err := sendEvent(p.url, "evt_restored"); err != nil || code != 200 {
		t.Fatalf("send = %d, %v", code, err)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
	key := filepath.Join(dir, "anyhook-log.key")
	if err := os.Remove(key); err != nil {
		t.Fatal(err)
	}
	want := cfg + ":" // the line of log.key_file's nearest key: none, so no line
	code, _, errOut := exe(t, "log", "verify", "--config", cfg)
	if code != 2 || !strings.HasPrefix(errOut, "anyhook: "+want+" log.key_file: the log's key file "+key+" is missing: after restoring a database from a backup, restore the key file kept with it") {
		t.Errorf("log verify without the key file: exit %d, %q", code, errOut)
	}
	code, _, errOut = exe(t, "serve", "--config", cfg)
	if code != 2 || !strings.HasPrefix(errOut, "anyhook: "+want+" log.key_file: the log's key file "+key+" is missing: after restoring a database from a backup, restore the key file kept with it") ||
		!strings.Contains(errOut, "is not this log's key") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("serve without the key file: exit %d, %q", code, errOut)
	}
	if _, err := os.Stat(key); err == nil {
		t.Error("serve left a new key file behind")
	}
}

// A mistyped command is suggested even when two letters are swapped.
func TestSwappedLettersSuggested(t *testing.T) {
	t.Parallel()
	for typed, want := range map[string]string{"sned": "send", "sinc": "sink", "lgo": "log"} {
		code, _, errOut := exe(t, typed)
		if code != 2 || !strings.Contains(errOut, fmt.Sprintf("unknown command %q (did you mean %s?)", typed, want)) {
			t.Errorf("anyhook %s: exit %d, %q; want a suggestion of %s", typed, code, errOut, want)
		}
	}
}

// A bulk replay into a destination whose latest attempt failed asks
// first; without a terminal (a script) it exits 2 naming it and why, and
// --yes replays all the same; a dry run and an --event replay say so
// without asking. --status pending is refused (it would send twice), and
// an unknown status lists the ones a replay takes.
func TestReplayIntoFailingDestination(t *testing.T) {
	t.Parallel()
	f := newReplayFixture(t) // every attempt answered 500
	ids := f.sendDead(t, "evt_down", 2)

	code, out, errOut := f.replay(t, "--status", "dead", "--destination", "billing")
	if code != 2 || out != "" || !strings.HasPrefix(errOut, "anyhook: replay: the replay cannot be delivered now: billing is failing: its latest attempt, at ") ||
		!strings.Contains(errOut, "failed (HTTP 500), and none has succeeded since") || !strings.Contains(errOut, "pass --yes to replay anyway") {
		t.Errorf("replay into a failing destination: exit %d, stdout %q, stderr %q; want exit 2 naming it", code, out, errOut)
	}
	code, out, _ = f.replay(t, "--status", "dead", "--json")
	var failed replayError
	if code != 2 || json.Unmarshal([]byte(out), &failed) != nil || len(failed.Troubled) != 2 || failed.Troubled[0].Reason != "failing" {
		t.Errorf("--json: exit %d, %s; want exit 2 with billing and crm troubled", code, out)
	}
	for _, id := range ids {
		for _, d := range f.event(t, id).Deliveries {
			if d.Replay {
				t.Fatalf("a refused replay created %+v", d)
			}
		}
	}
	code, out, _ = f.replay(t, "--status", "dead", "--destination", "billing", "--dry-run")
	if code != 0 || !strings.Contains(out, "would replay 2 deliveries") || !strings.Contains(out, "mind: billing is failing: its latest attempt") {
		t.Errorf("--dry-run: exit %d, %q; want the count and the failing destination", code, out)
	}
	code, out, _ = f.replay(t, "--event", ids[0], "--destination", "crm")
	if code != 0 || !strings.Contains(out, "replaying event "+ids[0]) || !strings.Contains(out, "mind: crm is failing") {
		t.Errorf("--event into a failing destination: exit %d, %q; want it replayed, and said", code, out)
	}
	if rep := f.replayJSON(t, "--status", "dead", "--destination", "billing", "--yes"); rep.Count != 2 || len(rep.Troubled) != 1 {
		t.Errorf("--yes: %+v; want 2 replayed, billing named", rep)
	}

	for status, want := range map[string]string{
		"pending":    "replay: --status pending: a bulk replay never selects pending deliveries: each is still to be sent, at its next attempt, so a replay would send its event twice",
		"delivering": "replay: --status delivering: a bulk replay never selects delivering deliveries: each is being sent now",
		"paused":     "replay: --status paused: a bulk replay never selects paused deliveries: each is sent once its destination is resumed",
		"bogus":      `replay: --status "bogus" is not a delivery status; a replay takes dead, held, delivered or skipped`,
		"daed":       `a replay takes dead, held, delivered or skipped (did you mean dead?)`,
	} {
		if code, _, errOut := f.replay(t, "--status", status); code != 2 || !strings.Contains(errOut, want) {
			t.Errorf("--status %s: exit %d, %q; want %q", status, code, errOut, want)
		}
	}
}

// anyhook sink says backfill=true of a delivery of an event a backfill
// read from the provider's API (X-AnyHook-Backfill), and nothing of one a
// provider pushed.
func TestSinkShowsBackfill(t *testing.T) {
	t.Parallel()
	addr, lines := startSink(t)
	for _, backfill := range []bool{true, false} {
		req, _ := http.NewRequest("POST", addr+"/hooks", strings.NewReader(`{}`))
		req.Header.Set("X-AnyHook-Delivery", "ev-1")
		if backfill {
			req.Header.Set("X-AnyHook-Backfill", "true")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if !lines.Scan() {
			t.Fatal("sink printed no delivery")
		}
		if got := strings.Contains(lines.Text(), " backfill=true"); got != backfill {
			t.Errorf("backfilled %v: sink line %q", backfill, lines.Text())
		}
	}
}

// The README's quick start says what happens to the alert of the dead
// delivery it walks through as the example config has it: alerts go to
// a channel only when the example configures one; else they are logged.
func TestQuickStartAlerts(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, tryIt, _ := strings.Cut(string(readme), "## Try it")
	tryIt, _, _ = strings.Cut(tryIt, "\n## ")
	tryIt = strings.Join(strings.Fields(tryIt), " ")
	code, out, errOut := exe(t, "config", "check", "--config", "../../examples/anyhook.yaml")
	if code != 0 {
		t.Fatalf("config check of the example: exit %d, %s", code, errOut)
	}
	hasAlerts := strings.Contains(out, "\nalerts:")
	switch {
	case !hasAlerts && (strings.Contains(tryIt, "`dead` and alerts") || !strings.Contains(tryIt, "marks the delivery `dead` and logs it")):
		t.Errorf("the example has no alert channel, but the quick start does not say the dead delivery is only logged:\n%s", tryIt)
	case hasAlerts && !strings.Contains(tryIt, "alert"):
		t.Errorf("the example has an alert channel the quick start does not mention")
	}
}

// anyhook sink as the quick start's alert webhook prints what the alert
// says, not only its size.
func TestSinkShowsAlerts(t *testing.T) {
	t.Parallel()
	addr, lines := startSink(t)
	body := `{"kind":"delivery_dead","destination":"billing","more":0,"text":"delivery d-1 of event e-1 to billing is dead after 4 attempts; last error: HTTP 500"}`
	resp, err := http.Post(addr+"/alerts", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !lines.Scan() {
		t.Fatal("sink printed nothing")
	}
	if want := `alert=delivery_dead text="delivery d-1 of event e-1 to billing is dead after 4 attempts; last error: HTTP 500"`; !strings.Contains(lines.Text(), want) {
		t.Errorf("sink line %q; want %s", lines.Text(), want)
	}
}

// config check prints the warnings beside the errors: every problem in
// one pass.
func TestConfigWarningsWithErrors(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, t.TempDir(), `listen: 127.0.0.1:0
database: sqlite:anyhook.db
sources:
  stripe:
    provider: stripe
    secrets: ["whsec_abc"]
  orphan:
    provider: github
    secrets: [x]
destinations:
  billing:
    url: 127.0.0.1:9000/hooks
    sources: [stripe]
`)
	code, _, errOut := exe(t, "config", "check", "--config", cfg)
	if code != 2 || !strings.Contains(errOut, cfg+":7: sources.orphan: no destination lists this source") ||
		!strings.Contains(errOut, cfg+":12: destinations.billing.url: must be an absolute http:// or https:// URL") {
		t.Errorf("config check: exit %d, stderr:\n%s\nwant exit 2 with the warning and the error", code, errOut)
	}
}

// A second serve on one SQLite file is refused, naming the first; the
// lock dies with its holder, kill -9 included.
func TestSecondServeOnSQLiteRefused(t *testing.T) {
	t.Parallel()
	cfg := writeConfig(t, t.TempDir(), gatewayConfig("sqlite:anyhook.db", "http://127.0.0.1:9/", "reclaim"))
	first := start(t, cfg)
	var stderr bytes.Buffer
	second := exec.Command(binary, "serve", "--config", cfg, "--log-level", "warn")
	second.Stderr = &stderr
	err := second.Run()
	want := fmt.Sprintf("process %d already serves ", first.cmd.Process.Pid)
	if code := second.ProcessState.ExitCode(); code != 2 || !strings.Contains(stderr.String(), want) || !strings.Contains(stderr.String(), "SQLite takes one anyhook serve") {
		t.Fatalf("second serve: exit %d (%v), stderr %q; want 2 naming %q", code, err, stderr.String(), want)
	}
	first.kill()
	start(t, cfg) // the lock went with the killed process
}
