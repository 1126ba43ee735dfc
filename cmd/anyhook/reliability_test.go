package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/anyhook/anyhook/internal/gateway/gatewaytest"
	"github.com/anyhook/anyhook/internal/provider"
	"github.com/anyhook/anyhook/internal/store/sqlite"
	"github.com/anyhook/anyhook/internal/testkit/pgtest"
	"github.com/anyhook/anyhook/internal/testkit/testwait"
)

// reliabilityConfig is a config with one stripe source delivering to
// destURL, on database.
func reliabilityConfig(database, destURL string) string {
	return fmt.Sprintf(`listen: 127.0.0.1:0
database: %q
admin_token: test-token
delivery: {poll_interval: 100ms, grace: 1s, shutdown: 1s}
log: {checkpoint_interval: 200ms}
sources:
  stripe: {provider: stripe, secrets: [%s]}
destinations:
  billing:
    url: %s
    sources: [stripe]
    timeout: 2s
    max_attempts: 1000
    backoff: {initial: 50ms, max: 200ms}
`, database, secret, destURL)
}

// post sends a Stripe event with id and a body of about size bytes through
// c, and returns the status code (0 without an answer) and AnyHook id.
func post(c *http.Client, url, id string, size int) (int, string) {
	body := []byte(`{"id":"` + id + `","object":"event","type":"charge.succeeded","created":1700000000,"pad":"`)
	body = append(body, bytes.Repeat([]byte("x"), max(0, size-len(body)-2))...)
	body = append(body, `"}`...)
	pr := &provider.Request{Method: "POST", Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
	if err := provider.Sign("stripe", secret, pr, time.Now()); err != nil {
		panic(err)
	}
	req, _ := http.NewRequest("POST", url+"/webhooks/stripe", bytes.NewReader(body))
	req.Header = pr.Header
	resp, err := c.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	var a struct{ ID string }
	b, _ := io.ReadAll(resp.Body)
	jsonID(b, &a.ID)
	return resp.StatusCode, a.ID
}

func jsonID(b []byte, id *string) {
	_, rest, ok := bytes.Cut(b, []byte(`"id":"`))
	if !ok {
		return
	}
	v, _, _ := bytes.Cut(rest, []byte(`"`))
	*id = string(v)
}

// runBinary runs the anyhook binary and returns its exit status and output.
func runBinary(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatalf("anyhook %s: %v", strings.Join(args, " "), err)
	}
	return cmd.ProcessState.ExitCode(), string(out)
}

// eventsPresent reports which of ids are missing from the SQLite database.
func eventsMissing(t *testing.T, path string, ids []string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var missing []string
	for _, id := range ids {
		var n int
		if err := db.QueryRow(`SELECT count(*) FROM events WHERE id = ?`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			missing = append(missing, id)
		}
	}
	return missing
}

// runSoak runs a short `anyhook soak` with args and checks its verdict and
// that the report says so, with want among its lines.
func runSoak(t *testing.T, want []string, args ...string) {
	t.Helper()
	code, out := runBinary(t, append([]string{"soak", "--duration", "20s", "--fault-every", "2500ms", "--rate", "30"}, args...)...)
	t.Log(out)
	if code != 0 {
		t.Fatalf("anyhook soak exited %d", code)
	}
	want = append(want, "lost = 0", "unexplained duplicates = 0", "in-flight overlaps = 0 ", "unflagged version inversions = 0 ",
		"5xx outside fault windows = 0", "slow answers (> 2s) outside fault windows = 0", "no answer outside fault windows = 0",
		"hot object stripe_obj_hot: ", "PASS")
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("soak output lacks %q", w)
		}
	}
}

// TestSoakSQLite is the short CI version of `anyhook soak` (the long runs
// are in docs/reliability.md).
func TestSoakSQLite(t *testing.T) {
	t.Parallel()
	runSoak(t, nil)
}

// TestSoakPostgres runs two gateway processes on one database, with the
// hot-object bursts (identical requests to both at once, overlapping
// events of one object) all along, a database stall longer than a lease
// first among the faults, and checks PostgreSQL's deadlock count.
func TestSoakPostgres(t *testing.T) {
	t.Parallel()
	runSoak(t, []string{"PostgreSQL deadlocks = 0 ", "database stall: "}, "--database", pgtest.DSN(t))
}

func TestServeRefusesOpenAdminWithoutToken(t *testing.T) {
	t.Parallel()
	for _, listen := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		cfg := writeConfig(t, t.TempDir(), "listen: "+strconv.Quote(listen)+"\nsources:\n  s: {provider: stripe, secrets: [x]}\n")
		code, out := runBinary(t, "serve", "--config", cfg)
		if code != 2 || !strings.Contains(out, "admin_token is required") || strings.Contains(out, "listening") {
			t.Errorf("listen %s without admin_token: exit %d, %q; want exit 2 naming admin_token", listen, code, out)
		}
	}
	// Loopback without a token is allowed.
	dest := newRecorder(t, false)
	p := start(t, writeConfig(t, t.TempDir(), "listen: 127.0.0.1:0\nsources:\n  stripe: {provider: stripe, secrets: ["+secret+"]}\ndestinations:\n  d: {url: "+dest.URL+", sources: [stripe]}\n"))
	if code, _ := post(http.DefaultClient, p.url, "evt_loopback", 0); code != 200 {
		t.Fatalf("loopback gateway: %d", code)
	}
}

// TestBackupWhileIngesting backs up a live SQLite store with `anyhook
// backup` while events stream in, restores the copy in a fresh directory,
// and checks it: integrity, every event acknowledged before the backup
// began, and `anyhook log verify`.
func TestBackupWhileIngesting(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	dest := newRecorder(t, false)
	cfg := writeConfig(t, dir, reliabilityConfig("sqlite:anyhook.db", dest.URL))
	p := start(t, cfg)

	var mu sync.Mutex
	var acked []string
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				if code, id := post(http.DefaultClient, p.url, fmt.Sprintf("evt_bk_%d_%d", w, i), 2048); code == 200 {
					mu.Lock()
					acked = append(acked, id)
					mu.Unlock()
				}
			}
		})
	}
	testwait.Within(t, 2*time.Minute, "200 events before the backup", func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= 200 })
	testwait.Within(t, 2*time.Minute, "a checkpoint of 100 events", func() bool { return checkpointSize(p.url) >= 100 })
	mu.Lock()
	before := append([]string(nil), acked...)
	mu.Unlock()
	out := filepath.Join(t.TempDir(), "backup.db")
	code, msg := runBinary(t, "backup", "--config", cfg, "--out", out)
	testwait.Within(t, 2*time.Minute, "ingest after the backup", func() bool { mu.Lock(); defer mu.Unlock(); return len(acked) >= len(before)+50 })
	stop()
	wg.Wait()
	if code != 0 || !strings.Contains(msg, "integrity ok") {
		t.Fatalf("anyhook backup: exit %d: %s", code, msg)
	}
	t.Log(strings.TrimSpace(msg))
	if code, msg := runBinary(t, "backup", "--config", cfg, "--out", out); code != 2 || !strings.Contains(msg, "already exists") {
		t.Errorf("backup over an existing file: exit %d, %s", code, msg)
	}

	// Restore: the copy and the log key into a fresh directory.
	rdir := t.TempDir()
	data, _ := os.ReadFile(out)
	os.WriteFile(filepath.Join(rdir, "anyhook.db"), data, 0o600)
	key, err := os.ReadFile(filepath.Join(dir, "anyhook-log.key"))
	if err != nil {
		t.Fatalf("log key: %v", err)
	}
	os.WriteFile(filepath.Join(rdir, "anyhook-log.key"), key, 0o600)
	rcfg := writeConfig(t, rdir, reliabilityConfig("sqlite:anyhook.db", dest.URL))
	n, err := sqlite.IntegrityCheck(t.Context(), filepath.Join(rdir, "anyhook.db"))
	if err != nil {
		t.Fatal(err)
	}
	if missing := eventsMissing(t, filepath.Join(rdir, "anyhook.db"), before); len(missing) > 0 {
		t.Fatalf("%d of %d events acknowledged before the backup are not in it, e.g. %s", len(missing), len(before), missing[0])
	}
	mu.Lock()
	total := len(acked)
	mu.Unlock()
	if n < int64(len(before)) || n >= int64(total)+4 {
		t.Errorf("backup holds %d events; %d were acknowledged before it, %d in all", n, len(before), total)
	}
	code, msg = runBinary(t, "log", "verify", "--config", rcfg)
	if code != 0 {
		t.Fatalf("log verify of the restored copy: exit %d: %s", code, msg)
	}
	t.Logf("restored: %d events; %s", n, strings.TrimSpace(msg))
	// A gateway runs on the restored store.
	p.kill()
	r := start(t, rcfg)
	var ev struct{ ID string }
	gatewaytest.AdminJSON(t, r.url+"/api/events/"+before[0], &ev)
	if ev.ID != before[0] {
		t.Fatalf("restored gateway: event %s = %+v", before[0], ev)
	}
}

// TestPgDumpRestore backs a PostgreSQL store up with pg_dump, restores it
// into another database with pg_restore, and verifies the log there.
func TestPgDumpRestore(t *testing.T) {
	t.Parallel()
	pgDump, err1 := exec.LookPath("pg_dump")
	pgRestore, err2 := exec.LookPath("pg_restore")
	if err1 != nil || err2 != nil {
		t.Skip("pg_dump/pg_restore not installed")
	}
	src, dst := pgtest.DSN(t), pgtest.DSN(t)
	dir := t.TempDir()
	dest := newRecorder(t, false)
	cfg := writeConfig(t, dir, reliabilityConfig(src, dest.URL))
	p := start(t, cfg)
	var ids []string
	for i := range 50 {
		code, id := post(http.DefaultClient, p.url, fmt.Sprintf("evt_pg_%d", i), 512)
		if code != 200 {
			t.Fatalf("send: %d", code)
		}
		ids = append(ids, id)
	}
	testwait.Within(t, 2*time.Minute, "a checkpoint of every event", func() bool { return checkpointSize(p.url) == len(ids) })
	dump := filepath.Join(dir, "anyhook.dump")
	if out, err := exec.Command(pgDump, "--format=custom", "--file="+dump, src).CombinedOutput(); err != nil { // while the gateway runs
		t.Fatalf("pg_dump: %v: %s", err, out)
	}
	p.kill()
	if out, err := exec.Command(pgRestore, "--no-owner", "--exit-on-error", "--dbname="+dst, dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v: %s", err, out)
	}
	rcfg := writeConfig(t, dir, reliabilityConfig(dst, dest.URL)) // same dir: same log key
	code, msg := runBinary(t, "log", "verify", "--config", rcfg)
	if code != 0 {
		t.Fatalf("log verify of the restored database: exit %d: %s", code, msg)
	}
	r := start(t, rcfg)
	var ev struct{ ID string }
	gatewaytest.AdminJSON(t, r.url+"/api/events/"+ids[49], &ev)
	if ev.ID != ids[49] {
		t.Fatalf("restored gateway: event %s = %+v", ids[49], ev)
	}
	t.Log(strings.TrimSpace(msg))
}

// checkpointSize is the tree size of the gateway's latest checkpoint; -1
// when there is none yet.
func checkpointSize(url string) int {
	req, _ := http.NewRequest("GET", url+"/api/log/checkpoint", nil)
	req.Header.Set("Authorization", "Bearer test-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var cp struct{ Size int }
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&cp) != nil {
		return -1
	}
	return cp.Size
}

// mountTmpfs mounts a tmpfs of size at a new directory, unmounted when t
// ends. Without the privilege it skips, except under CI=true.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "small")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		msg := fmt.Sprintf("cannot mount a %s tmpfs (%v: %s): the disk-full test needs root or CAP_SYS_ADMIN", size, err, bytes.TrimSpace(out))
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Logf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fill writes to path until the disk is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := bytes.Repeat([]byte{0xAB}, 16<<10)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the disk: %v", err)
			}
			break
		}
	}
	// The last bytes: the remainder smaller than a chunk.
	for {
		if _, err := f.Write(chunk[:512]); err != nil {
			return
		}
	}
}

// TestDiskFull runs SQLite on a small tmpfs, fills it, and checks that
// ingest answers 503 (never 2xx for what it could not keep), recovers once
// space returns, and that the database is intact with every acknowledged
// event.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	small := mountTmpfs(t, "8m")
	dest := newRecorder(t, false)
	dbPath := filepath.Join(small, "anyhook.db")
	cfg := writeConfig(t, t.TempDir(), reliabilityConfig("sqlite:"+dbPath, dest.URL))
	p := start(t, cfg)
	var acked []string
	for i := range 5 {
		code, id := post(http.DefaultClient, p.url, fmt.Sprintf("evt_disk_ok_%d", i), 1024)
		if code != 200 {
			t.Fatalf("before the disk is full: %d", code)
		}
		acked = append(acked, id)
	}
	filler := filepath.Join(small, "filler")
	fill(t, filler)

	codes := map[int]int{}
	var refused []string
	for i, streak := 0, 0; i < 2000 && streak < 20; i++ {
		id := fmt.Sprintf("evt_disk_full_%d", i)
		code, aid := post(http.DefaultClient, p.url, id, 32<<10)
		codes[code]++
		switch code {
		case 200:
			acked = append(acked, aid) // room left in the WAL: it must be kept
			streak = 0
		case 503:
			refused = append(refused, id)
			streak++
		default:
			t.Fatalf("disk full: answer %d (want 200 while it fits, then 503)", code)
		}
	}
	t.Logf("disk full: answers %v", codes)
	if codes[503] == 0 {
		t.Fatal("never answered 503 on a full disk")
	}
	if resp, err := http.Get(p.url + "/healthz"); err != nil {
		t.Fatalf("the gateway died on a full disk: %v; %s", err, p.stderr)
	} else {
		resp.Body.Close()
	}

	// Space returns: the refused events go through on the providers' retry.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	for _, id := range refused {
		var code int
		var aid string
		testwait.Within(t, 2*time.Minute, "ingest after space returned", func() bool {
			code, aid = post(http.DefaultClient, p.url, id, 32<<10)
			return code == 200
		})
		acked = append(acked, aid)
	}
	p.kill()
	if _, err := sqlite.IntegrityCheck(t.Context(), dbPath); err != nil {
		t.Fatal(err)
	}
	if missing := eventsMissing(t, dbPath, acked); len(missing) > 0 {
		t.Fatalf("%d acknowledged events missing after a full disk, e.g. %s", len(missing), missing[0])
	}
	// And it runs again.
	p = start(t, cfg)
	if code, _ := post(http.DefaultClient, p.url, "evt_disk_after", 1024); code != 200 {
		t.Fatalf("after restart: %d", code)
	}
}

// TestFileDescriptorsExhausted lowers RLIMIT_NOFILE of a running gateway
// (prlimit) under a burst of new connections, then raises it: requests
// fail or wait meanwhile, and afterwards the database is intact and holds
// every acknowledged event.
func TestFileDescriptorsExhausted(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("prlimit (util-linux) not installed")
	}
	dir := t.TempDir()
	dest := newRecorder(t, false)
	cfg := writeConfig(t, dir, reliabilityConfig("sqlite:anyhook.db", dest.URL))
	p := start(t, cfg)
	pid := strconv.Itoa(p.cmd.Process.Pid)
	var mu sync.Mutex
	var acked []string
	// A provider with a connection open from before keeps it.
	kept := &http.Client{Timeout: 3 * time.Second, Transport: http.DefaultTransport.(*http.Transport).Clone()}
	for i := range 5 {
		code, id := post(kept, p.url, fmt.Sprintf("evt_fd_ok_%d", i), 512)
		if code != 200 {
			t.Fatalf("before: %d %s; %s", code, id, p.stderr)
		}
		acked = append(acked, id)
	}
	out, err := exec.Command("prlimit", "--pid", pid, "--nofile", "--output=SOFT,HARD", "--noheadings", "--raw").Output()
	if err != nil {
		t.Fatalf("prlimit: %v", err)
	}
	limits := strings.Fields(string(out))
	fds, err := os.ReadDir("/proc/" + pid + "/fd")
	if err != nil {
		t.Fatal(err)
	}
	// The limit caps descriptor numbers, and closed ones leave holes:
	// only a limit of 3 (stdin, stdout, stderr) leaves no room at all for
	// accept, SQLite readers or outbound connections.
	low := 3
	if out, err := exec.Command("prlimit", "--pid", pid, fmt.Sprintf("--nofile=%d:%s", low, limits[1])).CombinedOutput(); err != nil {
		t.Fatalf("prlimit: %v: %s", err, out)
	}
	t.Logf("RLIMIT_NOFILE %s -> %d (%d open)", limits[0], low, len(fds))

	// A burst of fresh connections, each a new file descriptor.
	fresh := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	codes := map[int]int{}
	var refused []string
	var wg sync.WaitGroup
	for w := range 17 {
		wg.Go(func() {
			for i := range 2 {
				c := fresh
				if w == 0 {
					c = kept
				}
				id := fmt.Sprintf("evt_fd_%d_%d", w, i)
				code, aid := post(c, p.url, id, 512)
				mu.Lock()
				codes[code]++
				if code == 200 {
					acked = append(acked, aid)
				} else {
					refused = append(refused, id)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("descriptors exhausted: answers %v (0: no answer)", codes)
	if len(refused) == 0 {
		t.Fatal("every request succeeded: the descriptor limit did not bite")
	}
	for code := range codes {
		if code != 0 && code != 200 && code != 503 {
			t.Errorf("answer %d while descriptors were exhausted; want 200, 503 or no answer", code)
		}
	}

	if out, err := exec.Command("prlimit", "--pid", pid, "--nofile="+limits[0]+":"+limits[1]).CombinedOutput(); err != nil {
		t.Fatalf("prlimit: %v: %s", err, out)
	}
	for _, id := range refused {
		var code int
		var aid string
		testwait.Within(t, 2*time.Minute, "ingest after the limit was raised", func() bool {
			code, aid = post(http.DefaultClient, p.url, id, 512)
			return code == 200
		})
		acked = append(acked, aid)
	}
	// Deliveries resume too.
	testwait.Within(t, 2*time.Minute, "every event delivered", func() bool {
		got := dest.snapshot()
		for _, id := range acked {
			if len(got[id]) == 0 {
				return false
			}
		}
		return true
	})
	p.kill()
	if _, err := sqlite.IntegrityCheck(t.Context(), filepath.Join(dir, "anyhook.db")); err != nil {
		t.Fatal(err)
	}
	if missing := eventsMissing(t, filepath.Join(dir, "anyhook.db"), acked); len(missing) > 0 {
		t.Fatalf("%d acknowledged events missing, e.g. %s", len(missing), missing[0])
	}
}
