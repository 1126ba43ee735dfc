package deploy

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

var releaseTargets = []string{"linux/amd64", "linux/arm64", "darwin/arm64"}

func release(t *testing.T, env []string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command("scripts/release.sh", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// scripts/release.sh --snapshot builds the three archives and SHA256SUMS,
// the same bytes twice; each archive holds a static, stamped binary and
// the licence files; the binary for this machine reports its version and
// serves the example config until SIGTERM, then exits 0.
func TestRelease(t *testing.T) {
	t.Parallel()
	dist, again := t.TempDir(), t.TempDir()
	if out, err := release(t, nil, "--snapshot", "--out", dist); err != nil {
		t.Fatalf("release.sh --snapshot: %v\n%s", err, out)
	}
	if out, err := release(t, nil, "--snapshot", "--out", again); err != nil {
		t.Fatalf("release.sh --snapshot, again: %v\n%s", err, out)
	}
	sums := read(t, filepath.Join(dist, "SHA256SUMS"))
	if !bytes.Equal(sums, read(t, filepath.Join(again, "SHA256SUMS"))) {
		t.Errorf("two builds of one commit differ:\n%s\n%s", sums, read(t, filepath.Join(again, "SHA256SUMS")))
	}

	head := strings.TrimSpace(git(t, "rev-parse", "HEAD"))
	date := strings.TrimSpace(git(t, "show", "-s", "--date=format-local:%Y-%m-%dT%H:%M:%SZ", "--format=%cd", "HEAD"))
	var version string
	lines := strings.Split(strings.TrimSpace(string(sums)), "\n")
	if len(lines) != len(releaseTargets) {
		t.Fatalf("SHA256SUMS has %d lines, want %d:\n%s", len(lines), len(releaseTargets), sums)
	}
	for i, line := range lines {
		sum, name, ok := strings.Cut(line, "  ")
		m := regexp.MustCompile(`^anyhook_(\d+\.\d+\.\d+(?:-[0-9A-Za-z.-]+)?)_(\w+)_(\w+)\.tar\.gz$`).FindStringSubmatch(name)
		if !ok || m == nil || m[2]+"/"+m[3] != releaseTargets[i] {
			t.Errorf("SHA256SUMS line %q: want the %s archive", line, releaseTargets[i])
			continue
		}
		version = "v" + m[1]
		b := read(t, filepath.Join(dist, name))
		if got := sha256.Sum256(b); hex.EncodeToString(got[:]) != sum {
			t.Errorf("%s: SHA-256 %x, SHA256SUMS says %s", name, got, sum)
		}
		bin := checkArchive(t, name, b, m[2], m[3])
		if bin == "" || m[2] != runtime.GOOS || m[3] != runtime.GOARCH {
			continue
		}
		out, err := exec.Command(bin, "version").Output()
		if want := fmt.Sprintf("anyhook %s\ncommit:   %s\ndate:     %s\n", version, head, date); err != nil || !strings.HasPrefix(string(out), want) {
			t.Errorf("the released anyhook version: %v\n%s\nwant it to start\n%s", err, out, want)
		}
		serveExample(t, bin, version)
	}
	if !strings.HasPrefix(version, "v0.0.0-snapshot-"+head[:12]) {
		t.Errorf("snapshot version %s; want v0.0.0-snapshot-%s", version, head[:12])
	}

	// Versions that are not vMAJOR.MINOR.PATCH are refused before building.
	if out, err := release(t, []string{"VERSION=1.2"}, "--snapshot", "--out", t.TempDir()); err == nil || !strings.Contains(out, "is not vMAJOR.MINOR.PATCH") {
		t.Errorf("VERSION=1.2: %v, %s", err, out)
	}
}

func git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "TZ=UTC0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// checkArchive checks the files of a release archive and returns its
// binary, written out.
func checkArchive(t *testing.T, name string, b []byte, goos, goarch string) string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return ""
	}
	dir := strings.TrimSuffix(name, ".tar.gz")
	files := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return ""
		}
		if h.Uid != 0 || h.Gid != 0 || h.Uname != "" {
			t.Errorf("%s: %s is owned by %d/%d %q; want 0/0", name, h.Name, h.Uid, h.Gid, h.Uname)
		}
		if h.Typeflag == tar.TypeDir {
			continue
		}
		body, _ := io.ReadAll(tr)
		files[strings.TrimPrefix(h.Name, dir+"/")] = body
		if h.Name == dir+"/anyhook" && h.Mode&0o111 == 0 {
			t.Errorf("%s: anyhook is not executable (%o)", name, h.Mode)
		}
	}
	var names []string
	for n := range files {
		names = append(names, n)
	}
	slices.Sort(names)
	if want := []string{"LICENSE", "NOTICE", "README.md", "THIRD_PARTY_LICENSES", "anyhook"}; !slices.Equal(names, want) {
		t.Errorf("%s holds %q, want %q under %s/", name, names, want, dir)
	}
	for _, f := range []string{"LICENSE", "NOTICE"} {
		if !bytes.Equal(files[f], read(t, filepath.Join(root, f))) {
			t.Errorf("%s: %s is not the repository's", name, f)
		}
	}
	if !bytes.Contains(files["THIRD_PARTY_LICENSES"], []byte("for "+goos+"/"+goarch+"\n")) || !bytes.Contains(files["THIRD_PARTY_LICENSES"], []byte("modernc.org/sqlite")) {
		t.Errorf("%s: THIRD_PARTY_LICENSES is not that of %s/%s", name, goos, goarch)
	}
	bin := filepath.Join(t.TempDir(), "anyhook")
	if err := os.WriteFile(bin, files["anyhook"], 0o755); err != nil {
		t.Fatal(err)
	}
	checkStatic(t, bin, goos, goarch)
	return bin
}

// serveExample runs `anyhook serve` on examples/anyhook.yaml (on a free
// port instead of 8080, in a directory of its own), asks /healthz, and
// stops it with SIGTERM: exit 0.
func serveExample(t *testing.T, bin, version string) {
	t.Helper()
	example := string(read(t, filepath.Join(root, "examples", "anyhook.yaml")))
	cfg := strings.Replace(example, "\nlisten: 127.0.0.1:8080 ", "\nlisten: 127.0.0.1:0    ", 1)
	if cfg == example {
		t.Fatal("examples/anyhook.yaml no longer listens on 127.0.0.1:8080: update this test")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "anyhook.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "serve", "--config", path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		cmd.Process.Kill()
		<-done
	}()
	first := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		first <- line
		io.Copy(io.Discard, stdout)
	}()
	var url string
	select {
	case line := <-first:
		prefix := "anyhook " + version + " listening on "
		if !strings.HasPrefix(line, prefix) {
			t.Fatalf("serve says %q, want %q…; stderr:\n%s", line, prefix, stderr.String())
		}
		url = strings.TrimSpace(strings.TrimPrefix(line, prefix))
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not listen within 30s; stderr:\n%s", stderr.String())
	}
	resp, err := http.Get(url + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /healthz: %v %v", err, resp)
	}
	resp.Body.Close()
	if out, err := exec.Command(bin, "healthcheck", "--url", url+"/healthz").CombinedOutput(); err != nil {
		t.Errorf("anyhook healthcheck: %v: %s", err, out)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		done <- err // for the deferred Wait
		if err != nil {
			t.Errorf("serve after SIGTERM: %v; want exit 0; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(40 * time.Second):
		t.Errorf("serve did not stop within 40s of SIGTERM; stderr:\n%s", stderr.String())
	}
}
